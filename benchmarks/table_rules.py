"""What a published table's words and date imply for the runs it prints (``published_tables``):
the year of its software, the framework it names and what that framework runs (Megatron-LM's
own defaults before April 2024, DeepSpeed's ZeRO-3 of 2021, IBM's fms-fsdp), its MoE settings,
its TP overlap, its ZeRO stage and hybrid sharding, its precision and fp8 recipe, its attention
kernel, its pipeline schedule, its recompute mode.
Each rule cites the framework code or the page it reads; ``published_tables``'s docstring
lists them in the order a row is built."""

from __future__ import annotations

import re

from planner.search.plan_request import FRAMEWORK_TRAINING
from planner.specs import ClusterSpec, ModelSpec

# What the software of a framework a source names runs (module docstring), by its name's
# pattern: the DeepSpeed engine's (deepspeed/runtime/pipe/engine.py ``is_pipe_partitioned`` and
# its ``ReduceGrads`` after the schedule; ZeRO-1/2 gather the updated weights inside ``step``,
# deepspeed/runtime/zero/stage_1_and_2.py), NVIDIA's performance recipes' bf16 gradient
# reduction (NeMo-Framework-Launcher's H100 benchmark scripts and DGX Cloud Benchmarking's
# yaml: optim.grad_sync_dtype bf16; NeMo 2.0's scripts/performance and Megatron-Bridge's
# performance configs: grad_reduce_in_fp32 False), torchtitan's below.
_DEEPSPEED = {"p2p_scatter_gather": True, "overlap_param_gather": False,
              "grad_reduce_after_last_backward": True,
              "async_tensor_model_parallel_allreduce": False}
# The trainers built on DeepSpeed's engine: BigScience's Megatron-DeepSpeed (BLOOM) and
# EleutherAI's GPT-NeoX ("augmented with techniques from DeepSpeed", its README; its pipeline
# is DeepSpeed's PipelineModule).
_DEEPSPEED_NAMES = re.compile(r"deepspeed|bigscience|gpt-neox")
# Under bf16 its BF16_Optimizer (ZeRO 0-1) adds each micro-batch's bf16 gradients into fp32
# ones, parameter by parameter, from the pipeline engine's backward (deepspeed/runtime/pipe/
# engine.py ``_exec_backward_pass``: ``self.optimizer.update_hp_grads(clear_lp_grads=False)``),
# since bf16 pipelines arrived (DeepSpeed #1801, 2022-04-19; BLOOM trained with it).
_BF16_PIPELINE_FROM = (2022, 4)
# BigScience's fork (BLOOM's) never had FlashAttention.
_BIGSCIENCE = re.compile(r"bigscience")
# Under fp16 its ZeRO-1/2 reduces the fp16 gradient buckets in fp16 (stage_1_and_2.py
# ``communication_data_type``: the parameters' dtype unless configured).
_DEEPSPEED_FP16 = {"grad_dtype": "fp16"}
# Aleph Alpha's trainer (AA-Scaling, public as github.com/Aleph-Alpha/scaling), which ran
# Hagemann et al.'s layouts (arXiv 2311.05610; the corpus's runs cite each file): its
# gradients accumulate on the bf16 parameters and its ZeRO-1 all-reduces them whole in fp32
# buckets after the backward (src/scaling/core/optimizer/optimizer.py allreduce_gradients,
# allreduce.py allreduce_tensor_in_float32), then all-gathers the updated shards; no
# torch.compile and no fused RoPE or SwiGLU (nn/mlp.py, nn/rotary.py); the logits gathered
# over the TP ranks and the loss upcast to fp32 over the whole vocabulary
# (transformer/model/layers/lm_head.py, model.py loss_function); every_layer checkpointing
# reruns the head too (core/nn/parallel_module/parallel_module.py); each ColumnParallelLinear
# brings its input into the TP region itself, three a layer with its SwiGLU's two, and the
# backward all-reduce blocks (core/nn/linear/utils.py _CopyToModelParallelRegion); no dropout
# (its defaults are 0.0); its RMSNorm runs as eager ops unless the FlashAttention repository's
# fused kernel is named ("RMS kernel").
_ALEPH_ALPHA = {"dropout": False, "eager_elementwise": True, "grad_dtype": "bf16",
                "grad_reduce_dtype": "fp32", "overlap_grad_reduce": False,
                "overlap_param_gather": False, "zero_grad_allreduce": True,
                "vocab_parallel_loss": False, "recompute_head": True,
                "tp_column_parallel_inputs": 3, "async_tensor_model_parallel_allreduce": False}
_ALEPH_ALPHA_NAMES = re.compile(r"aleph[- ]alpha|aa[- ]scaling")
# PyTorch's and FairScale's FSDP (the OPT-175B run's "Fully Sharded Data Parallel (Artetxe et
# al., 2021)", the FSDP paper's): each wrapped module's gradients are reduce-scattered from its
# post-backward hook on a stream of their own while the backward goes on (FairScale
# fully_sharded_data_parallel.py ``_post_backward_hook``: "start the reductions in
# post_backward stream"; PyTorch's FSDP the same), in the compute dtype unless told otherwise
# (FairScale's ``fp32_reduce_scatter=False``; PyTorch's ``MixedPrecision.reduce_dtype``: "If
# this is None but param_dtype is not None, then this takes on the param_dtype value").
_FSDP_NAMES = re.compile(r"\bfsdp|fully[- ]sharded[- ]data[- ]parallel|fairscale|metaseq")
# Frameworks whose own FSDP settings the corpus encodes otherwise (torchtitan's fp32
# reduce-scatter; llm-foundry's per-yaml mixed-precision policy).
_OWN_FSDP = re.compile(r"torchtitan|llm[- ]foundry|mosaicml")
# MosaicML's llm-foundry (the MPT benchmarks): its MPT model's fused loss and flash-attn
# attention, and Composer's FSDP mixed-precision modes.
_LLM_FOUNDRY = re.compile(r"llm[- ]?foundry|mosaic ?ml")
_LLM_FOUNDRY_FLASH_FROM = (2024, 4)
# IBM's fms-fsdp (github.com/foundation-model-stack/fms-fsdp): PyTorch's FSDP over the
# foundation-model-stack's Llama, uncompiled unless the row or the table names torch.compile
# (scripts/train.sh use_torch_compile=False; its README's tables were redone compiled on
# 2024-05-09): the RMSNorm as eager ops (fms/modules/layernorm.py LayerNormParameterized:
# pow(2).mean, rsqrt, two products), rotary embeddings as fp32 eager ops
# (fms/modules/positions.py), SwiGLU as two kernels (fms/modules/feedforward.py
# GatedLinearUnit), grouped K and V expanded to every head before F.scaled_dot_product_attention
# (fms/modules/attention.py), the loss torch.nn.CrossEntropyLoss over the logits
# (fms_fsdp/utils/train_utils.py); torch.compile there wraps the model, not the loss.
_FMS = re.compile(r"fms[- ]fsdp|foundation[- ]model[- ]stack")
_NVIDIA_RECIPES = re.compile(r"(?<![a-z])nemo(?![a-z])|megatron[- ]bridge|dgx cloud benchmarking|"
                             r"dgxc-benchmarking")


def nvidia_recipes(text: str, year: int | None) -> bool:
    """Whether the (lower-case) text names NVIDIA's published performance recipes (NeMo,
    Megatron-Bridge, DGX Cloud Benchmarking) of 2023 on, or undated: the runs the NVIDIA rules
    below describe. NeMo Megatron's 2022 runs are the legacy software's."""
    return bool(_NVIDIA_RECIPES.search(text)) and (year is None or year >= 2023)
_COMPILED = re.compile(r"torch\.compile|\bcompiled?\b")
# ... unless it is named as off: "no torch.compile", "without compile", "compile: off".
_NOT_COMPILED = re.compile(r"\b(?:no|without|w/o|disabled?)\s+(?:torch\.)?compile"
                           r"|\bcompiled?\b\s*[:=]?\s*(?:off|false|disabled|no)\b|\buncompiled\b")


def compile_named(words: str) -> bool | None:
    """Whether a row's words say torch.compile ran (True), say it did not (False), or say
    nothing of it (None)."""
    w = words.lower()
    if _NOT_COMPILED.search(w):
        return False
    return True if _COMPILED.search(w) else None


def _compiled(words: str, text: str) -> bool:
    """Whether torch.compile ran: as the row says where it says how it ran (a caption naming
    the techniques its rows compare names them for none in particular), else the table."""
    return compile_named(words if words.strip() else text) is True


def names_fms(text: str) -> bool:
    """Whether the text names IBM's fms-fsdp (``_FMS``), whose "selective" activation
    checkpointing wraps whole blocks, every n-th (fms_fsdp/policies/ac_handler.py
    apply_fsdp_checkpointing checkpoints each block whose count is a multiple of n, its
    config's selective_checkpointing, 1 by default: every block), rather than Megatron-LM's
    attention-only recompute, and whose models go by size (config_utils.py)."""
    return bool(_FMS.search(text.lower()))


# A row's columns that name the run rather than describe how it ran.
_NAMING = ("id", "source", "sweep", "split", "model", "precision", "hardware", "recompute")


def row_words(row: dict) -> str:
    """What a row says in words about how it ran (a technique or notes column): its text
    columns but those naming the run, and nothing where they hold only figures."""
    words = " ".join(v for k, v in row.items() if isinstance(v, str) and k not in _NAMING)
    return words if re.search(r"[a-zA-Z]{2}", words) else ""


def _gpu_has_kernel(cluster: dict, kernel: str = "flash2") -> bool:
    """Whether the cluster's GPU has the named attention kernel's rates, FlashAttention-2's by
    default (``GPUSpec.attention_kernels``); False for one that does not validate (the run's
    own validation says why, where it replays)."""
    try:
        gpu = ClusterSpec.model_validate(cluster).gpu
    except ValueError:
        return False
    return getattr(gpu.attention_kernels, kernel) is not None


def framework(text: str, words: str, year: int | None, cluster: dict,
               precision: str = "bf16") -> tuple[dict, list[str]]:
    """(training settings, what was assumed) for the framework the table's ``text`` or the
    row's ``words`` name: DeepSpeed, FSDP (PyTorch's or FairScale's, outside torchtitan and
    llm-foundry), Aleph Alpha's trainer, torchtitan, llm-foundry or NVIDIA's recipes (module
    docstring);
    nothing for any other. Whether torch.compile ran is the row's to say where it says how it
    ran (a caption naming the techniques its rows compare names them for none in particular),
    the table's where the row says nothing."""
    t = f"{text} {words}".lower()
    out: dict = {}
    said: list[str] = []
    if _DEEPSPEED_NAMES.search(t):
        out.update(_DEEPSPEED)
        said.append("DeepSpeed's pipeline engine sends each activation split over the "
                    "model-parallel ranks (PipelineEngine is_pipe_partitioned), as the "
                    "corpus's Megatron-DeepSpeed runs do: p2p_scatter_gather; its ZeRO gathers "
                    "the updated weights inside the optimizer step and its pipeline reduces "
                    "after the schedule; its Megatron forks' (and AutoTP's) column-parallel "
                    "all-reduce blocks the backward")
        if precision == "bf16" and not dated_before(t, year, _BF16_PIPELINE_FROM):
            out["microbatch_grad_copy"] = True
            said.append("DeepSpeed's BF16_Optimizer adds every micro-batch's bf16 gradients "
                        "into fp32 ones (pipe/engine.py _exec_backward_pass update_hp_grads, "
                        "since DeepSpeed #1801 of 2022-04-19): microbatch_grad_copy")
        if _BIGSCIENCE.search(t):
            out["flash_attention"] = False
            said.append("BigScience's Megatron-DeepSpeed fork has no FlashAttention (none in "
                        "its code at its last commit, 2023-12-07)")
        if precision == "fp16":
            out.update(_DEEPSPEED_FP16)
            said.append("DeepSpeed's fp16 ZeRO-1/2 reduces the fp16 gradient buckets in fp16 "
                        "(stage_1_and_2.py communication_data_type, the parameters' dtype by "
                        "default): grad_dtype fp16")
    if _FSDP_NAMES.search(t) and not _OWN_FSDP.search(t):
        out["overlap_grad_reduce"] = True
        said.append("FSDP reduce-scatters each wrapped module's gradients from its "
                    "post-backward hook while the backward goes on: overlap_grad_reduce")
        if precision in ("fp16", "bf16"):
            out["grad_dtype"] = precision
            said.append(f"FSDP reduces in the compute dtype unless told otherwise (FairScale's "
                        f"fp32_reduce_scatter False, PyTorch's reduce_dtype None): grad_dtype "
                        f"{precision}")
    if _ALEPH_ALPHA_NAMES.search(t):
        fused_norm = bool(re.search(r"rms[- ]?(?:norm )?kernel|fused[- ]rms", t))
        out.update({**_ALEPH_ALPHA, "norm_fusion": fused_norm})
        said.append("Aleph Alpha's trainer (AA-Scaling): bf16 gradients all-reduced whole in "
                    "fp32 after the backward, then the shards gathered; eager elementwise "
                    "kernels; the logits gathered over TP and the loss in fp32; checkpointing "
                    "reruns the head; three column-parallel inputs a layer, their all-reduce "
                    "blocking; no dropout; "
                    + ("the fused RMSNorm kernel named" if fused_norm else "eager RMSNorm"))
    if "torchtitan" in t:
        compiled = _compiled(words, text)
        out.update(FRAMEWORK_TRAINING["torchtitan"])
        out.update({"loss_implementation": "fused" if compiled else "eager",
                    "eager_elementwise": not compiled, "selective_recompute": "per_op"})
        if _gpu_has_kernel(cluster):
            out["attention_kernel"] = "flash2"
        said.append("torchtitan: FSDP2's per-parameter copies and the rest a torchtitan search "
                    "costs; selective recompute by its per-op policy; attention through "
                    "PyTorch's SDPA (FlashAttention-2 where the GPU has its rates); "
                    + ("torch.compile: fused elementwise kernels and loss" if compiled else
                       "no torch.compile named: eager elementwise kernels and loss"))
    if _FMS.search(t):
        compiled = _compiled(words, text)
        out.update({"eager_elementwise": not compiled, "norm_fusion": compiled,
                    "repeat_kv": True, "loss_implementation": "eager"})
        if _gpu_has_kernel(cluster):
            out["attention_kernel"] = "flash2"
        said.append("IBM's fms-fsdp: K and V expanded to every head, attention through "
                    "PyTorch's SDPA (FlashAttention-2 where the GPU has its rates), an eager "
                    "loss; " + ("torch.compile: fused elementwise kernels and RMSNorm"
                                if compiled else "no torch.compile named: eager elementwise "
                                "kernels and the foundation-model-stack's eager RMSNorm"))
    if _LLM_FOUNDRY.search(t):
        out["loss_implementation"] = "fused"
        said.append("llm-foundry's MPT: loss_fn 'fused_crossentropy' by default "
                    "(llmfoundry/models/mpt/modeling_mpt.py): a fused loss")
        # Undated, as its README's tables are, or dated before the script's switch: 'triton'.
        if (_gpu_has_kernel(cluster, "flash_triton")
                and not dated_from(t, year, _LLM_FOUNDRY_FLASH_FROM)):
            out["attention_kernel"] = "flash_triton"
            said.append("llm-foundry's benchmark script ran MPT's attn_impl 'triton' (scripts/"
                        "train/benchmarking/submit_benchmarks.py's default until 7f0fdae66, "
                        "2024-03-26): the Triton FlashAttention")
        elif _gpu_has_kernel(cluster):
            out["attention_kernel"] = "flash2"
            said.append("llm-foundry's MPT runs attn_impl 'flash' (its yamls; the benchmark "
                        "script's default from 2024-03-26, and no Triton kernel rates on this "
                        "GPU), the flash-attn package its 'gpu' extra pins at v2: "
                        "FlashAttention-2")
        pure = re.search(r"\bpure\b", (words if words.strip() else text).lower())
        if pure and precision in ("bf16", "fp16"):
            out["grad_dtype"] = precision
            said.append(f"Composer's FSDP mixed precision PURE reduces in the training dtype "
                        f"(get_mixed_precision: param, reduce and buffer dtypes all "
                        f"{precision}): grad_dtype {precision}")
    if nvidia_recipes(t, year):
        out["grad_dtype"] = "bf16"
        said.append("NVIDIA's performance recipes reduce bf16 gradients (grad_sync_dtype bf16, "
                    "grad_reduce_in_fp32 False)")
        if precision == "fp8" and (year is None or year >= 2025):
            out["fp8_param_gather"] = True
            said.append("NVIDIA's performance recipes of 2025 on gather fp8 weights when they "
                        "train in fp8 (NeMo 2.0's bf16_with_fp8_mixed fp8_params, DGX Cloud "
                        "Benchmarking's fp8_params, Megatron-Bridge's fp8 recipes' "
                        "fp8_param_gather): fp8_param_gather")
    if re.search(r"megatron[- ]bridge", t):
        out["loss_implementation"] = "fused"
        said.append("Megatron-Bridge's performance configs fuse the loss (cross_entropy_fusion_"
                    "impl 'te', Transformer Engine's parallel_cross_entropy): 'fused'")
    return out, said


# MoE settings a table's words name: (pattern, TrainingSpec field, value; None: the number
# the pattern captures). DeepEP, NVIDIA's HybridEP and Megatron-LM's flex dispatcher send a
# token once per node ('deepep'); the EP all-to-all overlap is Megatron-LM's
# --overlap-moe-expert-parallel-comm (its "1F1B A2A overlap"); forced balance routes every
# expert the mean load.
_MOE_WORDS = [
    (r"deep[- ]?ep|hybrid[- ]?ep|flex dispatcher", "moe_dispatcher", "deepep"),
    (r"\bstandard\b|all[- ]?to[- ]?all dispatch|alltoall", "moe_dispatcher", "alltoall"),
    # "capacity factor 1.25", "of 1", "equal to 1" (the MoE Parallel Folding paper's), "= 1"
    (r"capacity[- ]factor:?\s*(?:of |equal to |is |=\s*)?(\d+(?:\.\d+)?)",
     "moe_capacity_factor", None),
    (r"\b(?:a2a|all-to-all|ep) (?:comm(?:unication)? )?overlap|overlap-moe-expert-parallel-comm"
     r"|a2a[_ ]1f1b|1f1b (?:a2a )?overlap", "moe_a2a_overlap", True),
    (r"force[sd]? (?:load )?balanc", "moe_load_imbalance", 1.0),
]


def moe(text: str, words: str, year: int | None) -> tuple[dict, list[str]]:
    """(MoE training settings, what was assumed) for a MoE row: what its words name, else
    what the table's text names (``_MOE_WORDS``: a caption naming DeepEP beside the standard
    dispatcher names both, a row one of them), and NVIDIA's recipes' routing: their
    performance runs force-balance it or drop tokens at capacity 1 (Megatron-Bridge
    scripts/performance/utils/overrides.py: moe_router_force_load_balancing True when
    dropless, apply_moe_token_drop otherwise), the busiest rank at the mean load
    (``moe_load_imbalance`` 1.0) against the planner's 1.1."""
    out: dict = {}
    for source in (words.lower(), text.lower()):
        for pattern, key, value in _MOE_WORDS:
            found = re.search(pattern, source)
            if found and key not in out:
                out[key] = float(found[1]) if value is None else value
    t = f"{text} {words}".lower()
    if nvidia_recipes(t, year):
        out.setdefault("moe_load_imbalance", 1.0)
    return out, ([f"MoE settings the text names or NVIDIA's recipes run: {out}"] if out else [])


def overlap(text: str, words: str, year: int | None, tp: int) -> tuple[dict, list[str]]:
    """(training settings, what was assumed): tensor-parallel communication overlap
    (``training.tp_comm_overlap``, costed at ``efficiency.tp_comm_overlap``'s default share,
    0.8) where the row runs TP and NVIDIA's performance recipes of 2023 on ran it (their TP
    configurations set tp_comm_overlap, the userbuffers overlap: NeMo's
    MegatronCommOverlapCallback, Megatron-Bridge's comm_overlap, DGX Cloud Benchmarking's
    ub_tp_comm_overlap) or the text names AsyncTP (torchtitan's) or TP communication
    overlap."""
    if tp <= 1:
        return {}, []
    t = f"{text} {words}".lower()
    named = re.search(r"async[- ]?tp|tp[- ]comm(unication)?[- ]overlap", t)
    recipes = nvidia_recipes(t, year)
    if not (named or recipes):
        return {}, []
    kind = "async_tp" if named and "async" in named.group(0) else "te"
    return {"tp_comm_overlap": kind}, [
        f"TP communication overlap ({'as the text names it' if named else 'NVIDIA recipes'}"
        f"): training.tp_comm_overlap '{kind}', the share hidden at its default 0.8"]


def zero(text: str, words: str, year: int | None, pp: int) -> tuple[int, str]:
    """(ZeRO stage, why) of a row that does not give one: the stage the row's words name
    ("ZeRO-3", "ZeRO stage 1"; FSDP or "fully sharded" 3, or 1 under pipeline parallelism,
    where torchtitan and torch.distributed.pipelining gather the weights once a step and keep
    them, the corpus's convention; "distributed optimizer" 1), or, where they say nothing of
    how the run was parallelised, the table's (a caption naming ZeRO-3 beside PTD-P names a
    comparison, a row one side of it); else the framework's: torchtitan shards with FSDP2 and
    llm-foundry (MosaicML's MPT runs) with FSDP's FULL_SHARD, DeepSpeed's runs and NVIDIA's
    recipes of 2023 on use the ZeRO-1 (distributed) optimizer; else 0, plain data
    parallelism."""
    fsdp = 3 if pp == 1 else 1
    w = words.lower()
    describes = re.search(r"zero|fsdp|ptd|\b3d\b|megatron|shard|parallel", w)
    for source in (w,) if describes else (w, text.lower()):
        stage = re.search(r"\bzero[- ]?(?:stage[- ]?)?([0-3])\b", source)
        if stage:
            return int(stage[1]), "as the text names it"
        # FSDP's sharding strategies by their names (llm-foundry's "Sharding Strategy").
        if re.search(r"\bshard_grad_op\b", source):
            return 2, "FSDP's SHARD_GRAD_OP, as the text names it"
        if re.search(r"\bno_shard\b", source):
            return 0, "FSDP's NO_SHARD, as the text names it"
        if re.search(r"\bfsdp|fully[- ]sharded|\bhsdp\b|\b(?:full|hybrid)_shard\b", source):
            return fsdp, "FSDP, as the text names it"
        if "distributed optimizer" in source:
            return 1, "the distributed optimizer, as the text names it"
    t = f"{text} {words}".lower()
    if "torchtitan" in t:
        return fsdp, "torchtitan shards with FSDP2"
    if re.search(r"llm[- ]foundry|mosaicml", t):
        return fsdp, "llm-foundry shards with FSDP (FULL_SHARD)"
    if _DEEPSPEED_NAMES.search(t):
        return 1, "DeepSpeed's runs shard the optimizer (ZeRO-1)"
    if _ALEPH_ALPHA_NAMES.search(t):
        return 1, "Aleph Alpha's trainer shards the optimizer (ZeRO-1)"
    if nvidia_recipes(t, year):
        return 1, "NVIDIA's recipes run the distributed optimizer"
    return 0, ""


_HYBRID_SHARD = re.compile(r"\bhsdp\b|hybrid[ _-]?shard")
# A shard group's size in words: BloombergGPT's "We shard a model across 128 GPUs, and we have
# 4 copies of the model" (arXiv 2303.17564, section 3.4, ZeRO-3 in SageMaker's MiCS), "sharded
# over 64 GPUs", MiCS's "mics_shard_size 128".
_SHARD_SIZE = re.compile(r"shard(?:ed|s|ing)?\s+(?:(?:a|the)\s+model\s+)?(?:across|over)\s+"
                         r"(\d+)\s+(?:gpus|ranks|devices)|mics[_ ]shard[_ ]size\D{0,3}(\d+)")


def hybrid_shard(words: str, gpus_per_node: int, degrees: dict,
                 text: str = "") -> tuple[int | None, str]:
    """(replicas, why) of a sharded row whose words name hybrid sharding ("HSDP",
    "HYBRID_SHARD"): PyTorch FSDP's HYBRID_SHARD shards within a node and replicates across
    nodes (torch.distributed.fsdp.ShardingStrategy: "Apply FULL_SHARD within a node, and
    replicate parameters across nodes"), so the data-parallel ranks of a node form a shard
    group and the nodes its replicas; or whose words (else the table's ``text``) give the
    shard group's size ("sharded across 128 GPUs", MiCS's shard size): the data-parallel ranks
    over it. (None, "") where they name neither, or the ranks do not split so."""
    dp = degrees.get("dp", 1)
    for source in (words.lower(), text.lower()):
        size = _SHARD_SIZE.search(source)
        if size:
            group = int(size[1] or size[2])
            if 0 < group < dp and dp % group == 0:
                return dp // group, (f"dp_replicate {dp // group}: shard groups of {group} "
                                     f"GPUs, as the text gives them ({size[0]!r})")
            return None, ""
    if not _HYBRID_SHARD.search(words.lower()):
        return None, ""
    per_node = gpus_per_node // (degrees.get("tp", 1) * degrees.get("cp", 1))
    if per_node < 1 or dp <= per_node or dp % per_node:
        return None, ""
    return dp // per_node, (f"dp_replicate {dp // per_node}: hybrid sharding, as the row "
                            f"names it (FSDP's HYBRID_SHARD: shards within a node of "
                            f"{per_node} data-parallel ranks, replicas across the nodes)")


# A venue's two-digit year ("SC'21", "NSDI '24", "MLSys’23").
_VENUE_YEAR = re.compile(r"\b(?:sc|neurips|icml|mlsys|iclr|nsdi|osdi|sosp|atc|eurosys|ppopp|"
                         r"asplos|isca|hpca|micro|colm|acl|emnlp|naacl|kdd|vldb|aaai|ipdps|"
                         r"hpdc|ics|cvpr)\s*['’](\d\d)\b")


# A release named by its year and month, as NVIDIA's containers and pages are ("NeMo 24.07",
# "Megatron-Bridge 25.11", "release v25.02", "the 24.09 container").
_RELEASE_YEAR = re.compile(r"\b(?:nemo(?: framework)?|megatron[- ]bridge|release|container|"
                           r"version|v)\s*v?(2\d)\.(?:0[1-9]|1[0-2])(?:\.\d+)?\b"
                           r"|\b(2\d)\.(?:0[1-9]|1[0-2]) container")


# An arXiv identifier, YYMM.NNNNN with an optional version ("2205.01068v4").
_ARXIV = re.compile(r"\b([12]\d)([01]\d)\.\d{4,5}(?:v\d+)?\b")


def arxiv_dates(text: str) -> list[tuple[int, int]]:
    """(year, month) of every arXiv identifier the text names."""
    return [(2000 + int(y), int(m)) for y, m in _ARXIV.findall(text)]


def year(text: str) -> int | None:
    """The year of the software a source ran: its arXiv number's where it has one (the work
    as submitted; the venue that printed it a year later ran nothing newer: Korthikanti et
    al., arXiv 2205.05198, MLSys'23, ran 2022's Megatron-LM), else the latest year, venue 'YY
    or release YY.MM its text names (a source cites earlier work, not later)."""
    arxiv = arxiv_dates(text)
    if arxiv:
        return max(arxiv)[0]
    years = [int(y) for y in re.findall(r"\b(20[12]\d)\b", text)]
    years += [2000 + int(y) for y in re.findall(_VENUE_YEAR, text.lower())]
    years += [2000 + int(a or b) for a, b in re.findall(_RELEASE_YEAR, text.lower())]
    return max(years) if years else None


def megatron_lm_defaults(text: str, year: int | None) -> bool:
    """Whether the (lower-case) text names Megatron-LM, not NVIDIA's recipes or Megatron-Core,
    in a source dated before April 2024 (``dated_before``: its arXiv number's month, else a
    year before 2024): Megatron-LM's own defaults then left FlashAttention off
    (``--use-flash-attn`` opt-in from 2022-12-08, d693034ecf; ``--transformer-impl`` 'local'
    until 2024-04-02, e7b74a4b7e, when
    Transformer Engine's fused attention became the default), dropout at 0.1
    (``--hidden-dropout``, ``--attention-dropout``) and the distributed optimizer and the
    gradient overlap opt-in (``--use-distributed-optimizer``, ``--overlap-grad-reduce``):
    what a paper running it as a baseline ran unless it names otherwise."""
    if not re.search(r"megatron[- ]lm", text) or re.search(r"megatron[- ]core|\bmcore\b", text):
        return False
    if nvidia_recipes(text, year):
        return False
    return dated_before(text, year, (2024, 4))


# When each trainer on DeepSpeed's engine gained Megatron-LM's sequence parallelism
# (``--sequence-parallel``, Korthikanti et al. 2022): Microsoft's Megatron-DeepSpeed with its
# merge of upstream Megatron-LM on 2023-07-04 (9e72d571); EleutherAI's GPT-NeoX on 2024-08-23
# ("Megatron-LM style Sequence Parallel (#1257)", 8b43196f); BigScience's fork, which trained
# BLOOM, never had it (megatron/arguments.py at its last commit, 2023-12-07).
_SEQUENCE_PARALLEL_FROM = ((_BIGSCIENCE, None),
                           (re.compile(r"gpt-neox"), (2024, 8)),
                           (re.compile(r"deepspeed"), (2023, 7)))


def deepspeed_without_sequence_parallelism(text: str, year: int | None) -> str | None:
    """The trainer on DeepSpeed's engine the (lower-case) text names, where its source predates
    the trainer's Megatron-LM sequence parallelism (``_SEQUENCE_PARALLEL_FROM``; dated by its
    arXiv number's month, else by its year, a year of the change itself left undecided); None
    where no such trainer is named or the date leaves it possible."""
    for pattern, since in _SEQUENCE_PARALLEL_FROM:
        found = pattern.search(text)
        if not found:
            continue
        if since is None:
            return found[0]
        return found[0] if dated_before(text, year, since) else None
    return None


def dated_before(text: str, year: int | None, since: tuple[int, int]) -> bool:
    """Whether the text's source is dated before (year, month) ``since``: its latest arXiv
    number's month where it names one, else its year (the year of ``since`` itself left
    undecided: not before)."""
    dated = arxiv_dates(text)
    return (max(dated) < since) if dated else (year is not None and year < since[0])


def dated_from(text: str, year: int | None, since: tuple[int, int]) -> bool:
    """Whether the text's source is dated at or after ``since`` (``dated_before``'s dates;
    an undated source is neither)."""
    return (year is not None or bool(arxiv_dates(text))) and not dated_before(text, year, since)


def zero3_of_2021(model: dict, precision: str) -> tuple[dict, list[str]]:
    """(training settings, what was assumed) for a ZeRO-3 row of a source dated 2021 or
    before: DeepSpeed's ZeRO-3 as it then ran (0.3.13, March 2021; the corpus's SC'21 Table 2
    rows read each setting in its source): every parameter tensor gathered on its own through
    ``torch.distributed.all_gather`` into a list of per-rank views and reduce-scattered the same
    way (partition_parameters.py ``_allgather_param`` / ``_reduce_scatter_gradient``:
    ``zero3_per_rank_copies``), 12 tensors a GPT layer (its four weight matrices, their biases
    and two LayerNorms' weight and bias; 9 a SwiGLU layer's, its 7 projections and 2 norms, as
    Hugging Face's Llama holds them); a prefetch bucket of 5e7 parameters
    (``stage3_prefetch_bucket_size``), as a share of a layer; a matrix released and gathered
    again where more than ``stage3_max_reuse_distance`` (1e9) parameters run between two uses;
    the reduction overlapping the backward (``overlap_comm``) in the parameters' dtype (its
    buckets are ``torch.half`` under fp16). FSDP, Megatron-FSDP and DeepSpeed since 2022 gather
    into one flat buffer, the planner's default."""
    spec = ModelSpec.model_validate(model)
    tensors = 9 if spec.ffn_type == "swiglu" else 12
    out = {"zero3_per_rank_copies": True, "zero3_gathers_per_layer": tensors,
           "zero3_prefetch_layers": round(5e7 / spec.nonexpert_params_per_layer, 3),
           "zero3_max_reuse_params": 1e9, "overlap_grad_reduce": True}
    if precision == "fp16":
        out["grad_dtype"] = "fp16"
    return out, [f"DeepSpeed's ZeRO-3 of 2021 (0.3.13): {out}"]


PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
# The fp8 recipes (and NVFP4) published tables name, most specific first: (pattern,
# precision, ``TrainingSpec.fp8_recipe``); NVIDIA's performance pages write FP8-CS (current
# scaling), FP8-MX (MXFP8), FP8-BLK (DeepSeek-style blockwise) and NVFP4.
_RECIPES = [
    (r"nvfp4", "fp4", None),
    (r"mxfp8|\bfp8[- ]mx\b", "fp8", "mxfp8"),
    (r"\bfp8[- ]cs\b|current[- ]scaling|tensorwise", "fp8", "tensorwise"),
    (r"\bfp8[- ]blk\b|blockwise|deepseek[- ]style", "fp8", "blockwise"),
    (r"delayed[- ]scaling|\bfp8[- ](?:ds|delayed)\b", "fp8", "delayed"),
]


def quantisation(text: str) -> tuple[str | None, str | None]:
    """(precision, fp8 recipe) the text names (``_RECIPES``); (None, None) where it names
    none."""
    t = text.lower()
    return next(((prec, recipe) for pattern, prec, recipe in _RECIPES if re.search(pattern, t)),
                (None, None))


def printed_precision(given: str) -> tuple[str, str | None]:
    """(precision, fp8 recipe or None) of a precision as a table prints it: one of
    ``PRECISIONS`` in any case, or a page's name ("BF16", "FP8-CS", "MXFP8", "NVFP4") with the
    recipe it names (``quantisation``)."""
    if given.lower() in PRECISIONS:
        return given.lower(), None
    named, recipe = quantisation(given)
    return (named, recipe) if named else (precision(given), None)


def precision(text: str) -> str:
    """The 16-bit or fp8 precision a text names, bf16 where it names none: fp8 ("FP8",
    torchao's "Float8"; not a peak's), else fp16 ("fp16", "float16", Lightning's "16-mixed")
    unless bf16 is named too ("bf16", "bfloat16", "bf16-mixed")."""
    t = text.lower()
    if re.search(r"\bfp8\b|\bfloat8\b", t) and "peak" not in t:
        return "fp8"
    fp16 = re.search(r"fp16|\bfloat16\b|(?<![a-z0-9])16-mixed\b", t)
    return "fp16" if fp16 and not re.search(r"bf16|bfloat16", t) else "bf16"


# The attention implementations tables name, most specific first: (pattern, training settings).
# FlashAttention-2 (Dao 2023, arXiv 2307.08691: "FlashAttention-2"; Aleph Alpha's sweep files
# write "flash_attention2"), v1 ("flash_attentionv1.0.8", "FlashAttention v1"), Triton's
# (MPT's attn_impl 'triton'), and the attention without FlashAttention a paper sets against
# it: Megatron's fused scale-mask-softmax kernel ("fused") or plain PyTorch ops whose scale,
# mask and softmax each run as a kernel ("torch", "standard attention", "Without
# FlashAttention": the FlashAttention-2 paper's baseline, PyTorch's own softmax).
_ATTENTION_WORDS = [
    # Karpathy's minGPT (the FSDP paper's GPT-175B, "minGPT transformer"): its
    # CausalSelfAttention multiplies q by k's transpose, masks, softmaxes and drops out as
    # separate eager ops, and every dropout of its GPTConfig is 0.1 (mingpt/model.py).
    (r"\bmin-?gpt\b", {"flash_attention": False, "softmax_fusion": False, "dropout": True}),
    (r"without flash[-_ ]?att(?:ention|n)|(?:no|w/o) flash[-_ ]?att(?:ention|n)|"
     r"(?:standard|naive|plain|pytorch|unfused|torch) attention|kernel:? torch\b(?!\.)|"
     r"^\s*torch\s*$",
     {"flash_attention": False, "softmax_fusion": False}),
    (r"flash[-_ ]?att(?:ention|n)[-_ ]?(?:v)?2\b|flash[-_ ]?att(?:ention|n)[-_ ]?v?2(?:\.\d+)+|"
     r"\bfa-?2\b", {"flash_attention": True, "attention_kernel": "flash2"}),
    (r"flash[-_ ]?att(?:ention|n)[-_ ]?v?1(?:\.\d+)*\b|\bfa-?1\b",
     {"flash_attention": True, "attention_kernel": "flash1"}),
    (r"triton (?:flash[-_ ]?att(?:ention|n)|attention)|flash[-_ ]?att(?:ention|n) (?:in )?triton",
     {"flash_attention": True, "attention_kernel": "flash_triton"}),
    (r"fused (?:scale[- ]mask[- ])?softmax|^\s*fused\s*$|kernel:? fused\b",
     {"flash_attention": False, "softmax_fusion": True}),
    (r"flash[-_ ]?att(?:ention|n)", {"flash_attention": True}),
]


def attention(words: str, text: str, year: int | None) -> tuple[dict, list[str]]:
    """(training settings, what was assumed) for the attention a row's words name
    (``_ATTENTION_WORDS``): only where they name exactly one implementation (a notes column
    quoting a caption that compares three names none), else the table's text where the row's
    words name none. FlashAttention unqualified is its first version where the text also names
    FlashAttention-2 (the comparison the FlashAttention-2 paper prints) or the source predates
    FlashAttention-2 (July 2023, so any source of 2022 or before)."""
    for source in (words, text):
        named = _attention_named(source)
        if len(named) > 1:
            return {}, []
        if named:
            settings = dict(named[0])
            also_v2 = any(n.get("attention_kernel") == "flash2"
                          for n in _attention_named(f"{words} {text}"))
            if settings == {"flash_attention": True} and (
                    also_v2 or (year is not None and year <= 2022)):
                settings["attention_kernel"] = "flash1"
            return settings, [f"attention as the {'row' if source is words else 'text'} "
                              f"names it: {settings}"]
    return {}, []


def _attention_named(text: str) -> list[dict]:
    """The distinct attention settings a text names, each match masked before the less
    specific patterns look ("FlashAttention-2" is not also FlashAttention unqualified)."""
    t = re.sub(r"\s+", " ", text.lower())
    named: list[dict] = []
    for pattern, settings in _ATTENTION_WORDS:
        if re.search(pattern, t):
            if settings not in named:
                named.append(settings)
            t = re.sub(pattern, " ", t)
    return named


_PLAIN_SCHEDULE = re.compile(r"\bgpipe\b|pipedream|non[- ]?interleaved|\b1f1b\b")
_INTERLEAVED = re.compile(r"(?<!non)(?<!non[- ])interleav|virtual (?:pipeline )?stage|"
                          r"\b1f1b-i\b")


def schedule(words: str, text: str, year: int | None) -> tuple[str | None, str]:
    """('interleaved', 'plain' or None, why) for a pipelined row that does not give its
    virtual stages. The interleaved schedule where the row's words (else the table's) name it;
    the plain one where they name 1F1B without interleaving, GPipe or PipeDream, or the
    framework is DeepSpeed, whose pipeline engine has no interleaved schedule
    (deepspeed/runtime/pipe/schedule.py: TrainSchedule, one model chunk a stage), Aleph
    Alpha's trainer, or torchtitan, whose default schedule is 1F1B; else, from
    2023 on, the interleaved one, the corpus's convention for a run that does not publish its
    interleaving (the fastest that fits: Megatron-LM has run it since 2021, SC'21's
    interleaved 1F1B, and NVIDIA's, Meta's and ByteDance's published pipelines of 2023 on
    interleave); before 2023, the plain one."""
    for source, whose in ((words, "the row"), (text, "the text")):
        s = source.lower()
        if _INTERLEAVED.search(s):
            return "interleaved", f"{whose} names the interleaved schedule but not its stages"
        if _PLAIN_SCHEDULE.search(s):
            return "plain", f"{whose} names a schedule without interleaving"
    if _DEEPSPEED_NAMES.search(f"{words} {text}".lower()):
        return "plain", "DeepSpeed's pipeline engine does not interleave"
    if _ALEPH_ALPHA_NAMES.search(f"{words} {text}".lower()):
        return "plain", ("Aleph Alpha's trainer runs 1F1B without interleaving (Hagemann et "
                         "al., section 4.3)")
    if "torchtitan" in f"{words} {text}".lower():
        return "plain", ("torchtitan's default schedule is 1F1B (torchtitan/config/configs.py "
                         "pipeline_parallel_schedule = \"1F1B\")")
    if year is not None and year >= 2023:
        return "interleaved", (f"interleaving not published (a source of {year}: the "
                               "corpus's convention)")
    return None, ""


def recompute(text: str) -> str | None:
    """The recompute mode the text names: none (no or disabled recomputation, activation
    checkpointing or AC), selective, or full (full recomputation or AC, the recomputed
    forward, activation checkpointing unqualified); None where it names none."""
    t = re.sub(r"[_\s]+", " ", text.lower())
    if re.search(r"\b(no|without) (activation )?(recomput|checkpoint|ac\b)|"
                 r"(checkpointing|recomputation|\bac)( type)?:? (disabled|none|off)\b", t):
        return "none"
    if "selective" in t:
        return "selective"
    if re.search(r"(full|activation) (activation )?recomputation|recomputed forward|"
                 r"activation checkpointing|\bfull ac\b", t):
        return "full"
    return None
