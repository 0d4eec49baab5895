"""A measured run of Megatron-LM read from its training log: the anchor run
(``planner.calibration.anchor.AnchorRun``) that a log already holds, so that anchoring on one's
own stack needs no hand-written request, whose every setting is a chance to anchor on the
wrong run.

Megatron-LM prints every argument once, after ``validate_args`` (``_print_args`` in
``megatron/training/arguments.py``, read at d98e8a6)::

    ------------------------ arguments ------------------------
      tensor_model_parallel_size .................... 4
      ...
    -------------------- end of arguments ---------------------

(``'  {} {} {}'.format(arg, '.' * (48 - len(arg)), value)``), the padded vocabulary when it
builds the tokenizer (`` > padded vocab (size: 128000) with 256 dummy tokens (new size:
128256)``, ``megatron/training/vocab_utils.py``, ``megatron/core/tokenizers/utils/
build_tokenizer.py``), and, every ``log_interval`` iterations, the mean time of those
iterations (`` iteration 20/ 100 | ... | elapsed time per iteration (ms): 1234.5 | ...``,
``training_log`` in ``megatron/training/training.py``).

The arguments map onto the request with the same flag names the launch renderer writes
(``planner.launch.megatron``); a setting the step model has no counterpart for is refused
by name (``PlannerInputError``), never dropped. The measured step is the median of the logged
intervals after the first ``skip`` (the first holds the warm-up: compilation, NCCL set-up, the
allocator's growth). What the log cannot say (the routing's balance, whether the GPUs' clocks
were capped) keeps the request's defaults, and the notes say so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from planner.calibration.logged import MOE_BALANCE_NOTE, shown, steady_step, with_world
from planner.errors import PlannerInputError
from planner.specs.layout import default_layout, explicit_layout

ARGS_START = re.compile(r"-{8,} arguments -{8,}\s*$")
ARGS_END = re.compile(r"-{8,} end of arguments -{8,}\s*$")
# After the block's own prefix (a launcher's '[rank0]: ', a logger's): two spaces, the name,
# its dots (none for names of 48 characters or more), the value.
ARG_LINE = re.compile(r"^  (\w+) (?:\.+ )?(.*?)\s*$")
# Lines may carry a logger's prefix (a timestamp, the rank): matched anywhere in the line.
ITERATION = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): "
                       r"(\d+(?:\.\d*)?)")
PADDED_VOCAB = re.compile(r"> padded vocab \(size: (\d+)\) with (\d+) dummy tokens "
                          r"\(new size: (\d+)\)")
# Megatron-LM's choices the request has no counterpart for, by argument: the value refused.
FP8_RECIPES = {"delayed", "tensorwise", "blockwise", "mxfp8"}
SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
# Printed values longer than this are kept as text (the longest the reader parses is a
# --moe-layer-freq list, 3 characters a layer).
MAX_LITERAL = 100_000


@dataclass(frozen=True)
class MegatronLog:
    """What a Megatron-LM log says: its arguments (as printed), the padded vocabulary, and
    the (iteration, ms per iteration) of each logged interval."""

    args: dict[str, str]
    padded_vocab: int | None
    intervals: list[tuple[int, float]] = field(default_factory=list)


def read_log(text: str) -> MegatronLog:
    """Parse a Megatron-LM training log (rank 0's output). The last arguments block counts
    (a restarted job prints one per start), and the intervals logged after it."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if ARGS_START.search(line)]
    if not starts:
        raise PlannerInputError("log", "no Megatron-LM arguments block ('--- arguments ---', "
                                "printed by rank 0 at start-up) in the log")
    args: dict[str, str] = {}
    end = len(lines)
    head = lines[starts[-1]]
    prefix = head[:ARGS_START.search(head).start()]     # type: ignore[union-attr]
    for j in range(starts[-1] + 1, len(lines)):
        if ARGS_END.search(lines[j]):
            end = j
            break
        line = lines[j][len(prefix):] if lines[j].startswith(prefix) else lines[j]
        m = ARG_LINE.match(line)
        if m:
            args[m.group(1)] = m.group(2).strip()
    if end == len(lines):
        raise PlannerInputError("log", "the arguments block does not end ('--- end of "
                                "arguments ---'): the log is cut short")
    vocab = None
    intervals = []
    for line in lines[end:]:
        if (m := PADDED_VOCAB.search(line)) is not None:
            vocab = int(m.group(3))
        elif (m := ITERATION.search(line)) is not None:
            intervals.append((int(m.group(1)), float(m.group(2))))
    return MegatronLog(args=args, padded_vocab=vocab, intervals=intervals)


def essential(text: str) -> str:
    """The lines of a log the reader reads (the last arguments block, the padded vocabulary,
    the iteration lines), for a log too long to send whole."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if ARGS_START.search(line)]
    head = lines[starts[-1]:] if starts else lines
    keep, inside = [], bool(starts)
    for line in head:
        if inside:
            keep.append(line)
            inside = not ARGS_END.search(line)
        elif PADDED_VOCAB.search(line) or ITERATION.search(line):
            keep.append(line)
    return "\n".join(keep) + "\n"


def _value(raw: str | None) -> Any:
    """A printed argument as Python: None, booleans, numbers, lists, enums
    (``AttnBackend.flash`` -> 'flash'), torch dtypes (``torch.bfloat16`` -> 'bf16');
    anything else as its text."""
    if raw is None:
        return None
    dtypes = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16",
              "torch.uint8": "fp8"}
    if raw in dtypes:
        return dtypes[raw]
    if re.fullmatch(r"[A-Za-z]+\.\w+", raw) and raw.split(".")[0][0].isupper():
        return raw.split(".", 1)[1]
    if len(raw) > MAX_LITERAL:
        return raw           # no argument the reader needs prints so long (a nesting bomb)
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


class _Args:
    """The printed arguments, read by name with Megatron-LM's defaults where a name is absent
    (an older release that did not have the flag)."""

    def __init__(self, args: dict[str, str]):
        self.raw = args

    def get(self, name: str, default: Any = None) -> Any:
        v = _value(self.raw.get(name))
        return default if v is None else v

    def shown(self, name: str) -> str:
        """The printed value, for an error message."""
        return shown(self.raw.get(name))

    def count(self, name: str, default: int | None = None, minimum: int = 1) -> int:
        """A whole number of at least ``minimum``; ``default`` where it is absent or None
        (none: the argument is needed)."""
        v = self.get(name)
        if v is None and default is not None:
            return default
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise PlannerInputError(f"log.{name}", f"needed as a whole number of {minimum} or "
                                    f"more, printed as {self.shown(name)}")
        return v

    def number(self, name: str, default: float) -> float:
        """A number of at least 0; ``default`` where it is absent or None."""
        v = self.get(name, default)
        if not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
            raise PlannerInputError(f"log.{name}", f"needed as a number of 0 or more, printed "
                                    f"as {self.shown(name)}")
        return float(v)

    def word(self, name: str, default: str | None = None) -> str | None:
        """A name (a choice, an enum member); ``default`` where it is absent or None."""
        v = self.get(name, default)
        if v is not None and not isinstance(v, str):
            raise PlannerInputError(f"log.{name}", f"needed as a name, printed as "
                                    f"{self.shown(name)}")
        return v

    def words(self, name: str, default: list[str]) -> list[str]:
        """Names, printed as a list (or one name)."""
        v = self.get(name) or default
        v = [v] if isinstance(v, str) else v
        if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
            raise PlannerInputError(f"log.{name}", f"needed as a list of names, printed as "
                                    f"{self.shown(name)}")
        return list(v)

    def flag(self, name: str) -> bool:
        return self.get(name, False) is True


def _refuse(name: str, why: str) -> PlannerInputError:
    return PlannerInputError(f"log.{name}", f"{why}; not read from a log yet: write this run's "
                             "request by hand (planner estimate's JSON with "
                             "measured_step_time_s)")


def _model(a: _Args, vocab: int | None) -> dict:
    if a.flag("deepspeed"):
        # Megatron-DeepSpeed prints the same block with DeepSpeed's own arguments
        # (deepspeed.add_config_arguments: --deepspeed, --deepspeed_config): its pipeline
        # engine and ZeRO run the plan, not Megatron-LM's.
        raise _refuse("deepspeed", "a Megatron-DeepSpeed run (DeepSpeed's engine runs its "
                      "pipeline and ZeRO)")
    if a.get("window_size") not in (None, 0, False):
        raise _refuse("window_size", "sliding-window attention")
    heads = a.count("num_attention_heads")
    hidden = a.count("hidden_size")
    if vocab is None:
        vocab = a.count("padded_vocab_size", 0, 0) or a.count("vocab_size", 0, 0) or None
    if vocab is None:
        raise PlannerInputError("log", "the log does not state the vocabulary (no ' > padded "
                                "vocab (size: ...)' line, no vocab_size argument): give it "
                                "with the run")
    model: dict[str, Any] = {
        "name": "Megatron-LM run", "num_layers": a.count("num_layers"), "hidden_size": hidden,
        "num_attention_heads": heads, "ffn_hidden_size": a.count("ffn_hidden_size"),
        "ffn_type": "swiglu" if a.flag("swiglu") else "gelu", "vocab_size": vocab,
        "tied_embeddings": not a.flag("untie_embeddings_and_output_weights")}
    # Grouped-query attention only with its flag (argument_utils.py: num_query_groups is
    # dropped without it).
    if a.flag("group_query_attention"):
        model["num_kv_heads"] = a.count("num_query_groups")
    if a.flag("multi_latent_attention"):
        # Multi-latent attention (``--multi-latent-attention``): --qk-head-dim is the query and
        # key heads' width without the rotary part, --qk-pos-emb-head-dim the rotary part.
        model.update({"kv_lora_rank": a.count("kv_lora_rank"),
                      "head_dim": a.count("qk_head_dim"),
                      "qk_rope_head_dim": a.count("qk_pos_emb_head_dim", 0, 0),
                      "v_head_dim": a.count("v_head_dim")})
        if a.get("q_lora_rank") is not None:
            model["q_lora_rank"] = a.count("q_lora_rank")
    else:
        kv = a.count("kv_channels", hidden // heads)
        if kv * heads != hidden:
            model["head_dim"] = kv
    mtp = a.count("mtp_num_layers", 0, 0)
    if mtp:
        model["mtp_num_layers"] = mtp
    experts = a.count("num_experts", 0, 0)
    if experts:
        model.update({"num_experts": experts, "moe_top_k": a.count("moe_router_topk"),
                      "moe_ffn_hidden_size": a.count("moe_ffn_hidden_size",
                                                     model["ffn_hidden_size"])})
        shared = a.count("moe_shared_expert_intermediate_size", 0, 0)
        if shared:
            model.update({"num_shared_experts": 1, "moe_shared_ffn_hidden_size": shared})
        model.update(_moe_layers(a.get("moe_layer_freq", 1), model["num_layers"]))
        if a.word("moe_router_score_function") == "sigmoid":
            model["moe_router_score"] = "sigmoid"
        groups = a.count("moe_router_num_groups", 0, 0)
        if groups:
            model.update({"moe_router_num_groups": groups,
                          "moe_router_group_topk": a.count("moe_router_group_topk")})
    return model


def _moe_layers(freq: Any, layers: int) -> dict:
    """``--moe-layer-freq`` (1, or a pattern of leading dense layers then expert layers) as the
    model's ``first_k_dense_layers``."""
    if freq == 1:
        return {}
    if (isinstance(freq, list) and len(freq) == layers
            and all(x in (0, 1) and not isinstance(x, bool) for x in freq)):
        k = freq.index(1) if 1 in freq else layers
        if freq == [0] * k + [1] * (layers - k):
            return {"first_k_dense_layers": k}
    raise _refuse("moe_layer_freq", f"an expert-layer pattern other than leading dense layers "
                  f"then expert layers ({shown(freq)})")


def _training(a: _Args) -> dict:
    if a.word("fp8"):
        precision = "fp8"
    elif a.word("fp4"):
        precision = "fp4"
    elif a.flag("bf16"):
        precision = "bf16"
    elif a.flag("fp16"):
        precision = "fp16"
    else:
        precision = "fp32"
    t: dict[str, Any] = {
        "global_batch_size": a.count("global_batch_size"), "seq_length": a.count("seq_length"),
        "precision": precision,
        # (TransformerConfig's defaults: 0.1 each.)
        "dropout": a.number("attention_dropout", 0.1) > 0 or a.number("hidden_dropout", 0.1) > 0,
        "grad_dtype": "bf16" if a.flag("grad_reduce_in_bf16") else "fp32",
        "overlap_grad_reduce": a.flag("overlap_grad_reduce"),
        "overlap_param_gather": a.flag("overlap_param_gather"),
        "overlap_p2p_comm": a.get("overlap_p2p_comm", True) is True,
        # Transformer Engine's userbuffers (planner.cost.tp_overlap); Megatron-LM runs it only
        # with sequence parallelism, as the planner costs it.
        "tp_comm_overlap": "te" if a.flag("tp_comm_overlap") else "none"}
    if precision == "fp8":
        recipe = a.word("fp8_recipe", "delayed")
        if recipe not in FP8_RECIPES:
            raise _refuse("fp8_recipe", f"the fp8 recipe {shown(recipe)}")
        t["fp8_recipe"] = recipe
        t["fp8_param_gather"] = a.flag("fp8_param_gather")
    if precision == "fp4":
        recipe = a.word("fp4_recipe", "nvfp4")
        if recipe != "nvfp4":
            raise _refuse("fp4_recipe", f"the fp4 recipe {shown(recipe)}")
        t["fp8_param_gather"] = a.flag("fp4_param_gather")
    if a.get("transformer_impl") == "local":
        # Megatron-Core's own attention: no FlashAttention, its fused softmax unless turned off.
        t["flash_attention"] = False
        t["softmax_fusion"] = a.get("masked_softmax_fusion", True) is True
    elif a.get("attention_backend") == "flash":
        t["attention_kernel"] = "flash2"
    if a.flag("use_precision_aware_optimizer"):
        first, second = (a.word(k, "fp32") or "fp32" for k in ("exp_avg_dtype",
                                                                 "exp_avg_sq_dtype"))
        if first != second:
            raise _refuse("exp_avg_dtype", f"Adam moments in two dtypes ({first}, {second})")
        t["optimizer_state_dtype"] = first
    if a.get("recompute_granularity") == "selective":
        t["recompute_modules"] = a.words("recompute_modules", ["core_attn"])
    if a.flag("distribute_saved_activations"):
        t["distribute_saved_activations"] = True
    cp_types = a.words("cp_comm_type", ["p2p"])
    if a.count("context_parallel_size", 1) > 1:
        if len(set(cp_types)) > 1:
            raise _refuse("cp_comm_type", f"context parallelism of several kinds by layer "
                          f"({cp_types})")
        kind = cp_types[0]
        if kind == "a2a+p2p":
            sizes = a.get("hierarchical_context_parallel_sizes")
            if not (isinstance(sizes, list) and sizes and isinstance(sizes[0], int)):
                raise PlannerInputError("log.hierarchical_context_parallel_sizes", "needed as "
                                        f"a list of group sizes with cp_comm_type a2a+p2p, "
                                        f"printed as {shown(sizes)}")
            t.update({"ring_attention": "a2a+p2p", "cp_a2a_size": sizes[0]})
        elif kind in ("p2p", "a2a"):
            t["ring_attention"] = "te" if kind == "p2p" else "a2a"
        else:
            raise _refuse("cp_comm_type", f"context parallelism by {shown(kind)}")
    if a.count("num_experts", 0, 0):
        dispatcher = a.word("moe_token_dispatcher_type", "allgather")
        backend = a.word("moe_flex_dispatcher_backend", "deepep")
        if dispatcher == "flex" and backend in ("deepep", "hybridep"):
            t["moe_dispatcher"] = "deepep"      # DeepEP or HybridEP kernels (TrainingSpec)
        elif dispatcher == "alltoall":
            t["moe_dispatcher"] = "alltoall"
        else:
            raise _refuse("moe_token_dispatcher_type", f"the {shown(dispatcher)} token dispatcher")
        t["moe_a2a_overlap"] = a.flag("overlap_moe_expert_parallel_comm")
        if a.get("moe_expert_capacity_factor") is not None:
            t["moe_capacity_factor"] = a.number("moe_expert_capacity_factor", 0.0)
    return t


def _plan(a: _Args, layers: int) -> dict:
    tp, pp = a.count("tensor_model_parallel_size"), a.count("pipeline_model_parallel_size")
    cp = a.count("context_parallel_size", 1)
    world = a.count("world_size")
    if world % (tp * pp * cp):
        raise PlannerInputError("log.world_size", f"{world} ranks are not a multiple of "
                                f"tp x pp x cp = {tp * pp * cp}")
    vpp = a.count("virtual_pipeline_model_parallel_size", 1)
    layout = a.get("pipeline_model_parallel_layout")
    if layout is not None and pp > 1:         # validate_args sets the virtual stages from it
        vpp = len(layout_chunks(str(layout), pp)[0])
    plan: dict[str, Any] = {
        "dp": world // (tp * pp * cp), "tp": tp, "pp": pp, "cp": cp, "vpp": vpp,
        "micro_batch_size": a.count("micro_batch_size"),
        "sequence_parallel": a.flag("sequence_parallel")}
    if a.count("num_experts", 0, 0):
        plan["ep"] = a.count("expert_model_parallel_size", 1)
        plan["etp"] = a.count("expert_tensor_parallel_size", tp)    # Megatron's default: tp
    granularity = a.word("recompute_granularity")
    if granularity not in (None, "full", "selective"):
        raise PlannerInputError("log.recompute_granularity", f"{shown(granularity)} is not full or "
                                "selective")
    plan["recompute"] = granularity or "none"
    if granularity == "full" and a.word("recompute_method") == "block":
        plan["recompute_num_layers"] = a.count("recompute_num_layers")
    if a.flag("use_megatron_fsdp"):
        strategy = a.word("data_parallel_sharding_strategy", "no_shard")
        if strategy not in SHARDING:
            raise PlannerInputError("log.data_parallel_sharding_strategy", f"{shown(strategy)} is "
                                    f"not one of {', '.join(SHARDING)}")
        plan["zero_stage"] = SHARDING[strategy]
    else:
        plan["zero_stage"] = 1 if a.flag("use_distributed_optimizer") else 0
    instances = a.count("num_distributed_optimizer_instances", 1)
    if instances > 1:
        plan["dp_replicate"] = instances
    offload = a.count("cpu_offloading_num_layers", 0, 0) if a.get("cpu_offloading", True) \
        else 0
    if offload:
        plan["cpu_offload_layers"] = offload
    group = a.count("microbatch_group_size_per_vp_stage", 0, 0)
    if vpp > 1 and group and group != pp:
        plan["microbatch_group_size"] = group
    layout = a.get("pipeline_model_parallel_layout")
    standalone = layout is not None and pp > 1 and layout_mtp_standalone(str(layout))
    if standalone:
        plan["mtp_standalone"] = True
    stages = _stages(a, layers, pp, vpp, standalone)
    if stages is not None:
        plan["layers_per_stage"] = stages
    return plan


def unrolled_layout(layout: str) -> list[str]:
    """The virtual stages of ``--pipeline-model-parallel-layout``, unrolled as Megatron-LM's
    ``PipelineParallelLayerLayout.parse_str_to_list`` does: commas dropped, '(...)*n' then
    'x*n' repeated, split at '|'. A layout that would unroll past ``MAX_LITERAL`` characters
    is refused before it is built (no model has that many layers)."""
    text = layout.replace(",", "")
    too_long = PlannerInputError("log.pipeline_model_parallel_layout", f"{shown(layout)} "
                                 "unrolls to more virtual stages and layers than any model has")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        size = len(text)

        def repeat(m: re.Match) -> str:
            nonlocal size
            size += len(m.group(1)) * (int(m.group(2)) - 1)
            if size > MAX_LITERAL:
                raise too_long
            return m.group(1) * int(m.group(2))

        text = re.sub(pattern, repeat, text)
    return text.split("|")


def layout_chunks(layout: str, pp: int) -> tuple[tuple[int, ...], ...]:
    """Decoder layers per (rank, chunk) of ``--pipeline-model-parallel-layout``, virtual
    stages in chunk-major order (``unrolled_layout``)."""
    virtual = unrolled_layout(layout)
    text = "|".join(virtual)
    if set(text) - set("ELtm|") or len(virtual) % pp:
        raise PlannerInputError("log.pipeline_model_parallel_layout", f"{shown(layout)} is not a "
                                f"layout of {pp} pipeline ranks")
    v = len(virtual) // pp
    return tuple(tuple(virtual[c * pp + r].count("t") for c in range(v)) for r in range(pp))


def layout_mtp_standalone(layout: str) -> bool:
    """Whether the multi-token prediction modules of a layout stand alone: in the virtual stage
    before the loss's, which holds no decoder layer ('...m|L'), rather than beside the loss
    ('...tmL'). Elsewhere is no placement the planner makes."""
    virtual = unrolled_layout(layout)
    holding = [i for i, stage in enumerate(virtual) if "m" in stage]
    if not holding:
        return False
    last = len(virtual) - 1
    if holding == [last]:
        return False
    if holding == [last - 1] and "t" not in virtual[last]:
        return True
    raise _refuse("pipeline_model_parallel_layout", "multi-token prediction modules outside "
                  "the last two virtual stages")


def _stages(a: _Args, layers: int, pp: int, vpp: int, standalone: bool = False
            ) -> list[int] | None:
    """Layers per stage where they are not the planner's default layout's
    (``specs.layout.default_layout``, which a plan without stages gets)."""
    stages = _logged_stages(a, layers, pp, vpp, standalone)
    default = default_layout(layers, pp, vpp)
    if stages is None or (default is not None and tuple(stages) == default.stages):
        return None
    return stages


def _logged_stages(a: _Args, layers: int, pp: int, vpp: int, standalone: bool
                   ) -> list[int] | None:
    """Layers per stage where the split is not even: an explicit layout whose chunks are those
    the planner gives its stages (``specs.layout.explicit_layout``), the embedding and the
    loss counted as layers, or given first and last stages (the forms
    ``planner.launch.megatron`` writes)."""
    if pp == 1:
        return None
    layout = a.get("pipeline_model_parallel_layout")
    if layout is not None:
        chunks = layout_chunks(str(layout), pp)
        stages = tuple(sum(c) for c in chunks)
        mtp = a.count("mtp_num_layers", 0, 0)
        planned = explicit_layout(stages, len(chunks[0]), standalone, mtp).chunks
        if sum(stages) != layers or planned != chunks:
            raise _refuse("pipeline_model_parallel_layout", f"the split of {shown(layout)} over "
                          "the chunks, which the planner's layouts do not place so")
        return list(stages)
    if a.flag("account_for_embedding_in_pipeline_split"):
        u = (layers + 2) // (pp * vpp)
        return [u * vpp - (r in (0, pp - 1)) for r in range(pp)]
    first, last = (None if a.get(k) is None else a.count(k)
                   for k in ("decoder_first_pipeline_num_layers",
                             "decoder_last_pipeline_num_layers"))
    if first is None and last is None:
        return None
    inner = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if (rest % inner if inner else rest) or rest < inner:
        raise _refuse("decoder_first_pipeline_num_layers", "first and last stages that leave "
                      "the others an uneven share")
    mid = rest // inner if inner else 0
    return [first if first is not None else mid] + [mid] * (pp - 2) + [
        last if last is not None else mid]


def _unmodelled(a: _Args) -> list[str]:
    """Settings the run used that the request costs otherwise, said rather than refused: their
    effect is a small part of a step, which the fitted speed then absorbs."""
    notes = []
    if a.get("gradient_accumulation_fusion", True) is False:
        notes.append("--no-gradient-accumulation-fusion: each micro-batch's weight gradients "
                     "are added into the fp32 ones by a kernel of their own, which the request "
                     "costs fused into the GEMMs")
    if (a.get("recompute_granularity") == "full" and a.get("recompute_method") == "uniform"
            and a.count("recompute_num_layers", 1) > 1):
        notes.append(f"--recompute-method uniform over groups of {a.get('recompute_num_layers')}"
                     " layers keeps fewer checkpoints than the per-layer recompute costed: the "
                     "memory predicted is higher than the run's")
    return notes


def measured_step_s(log: MegatronLog, skip: int = 1) -> tuple[float, list[str]]:
    """The median time per iteration (s) of the logged intervals after the first ``skip``,
    and notes."""
    if not log.intervals:
        raise PlannerInputError("log", "no 'elapsed time per iteration (ms)' line: the run "
                                "logged no training iteration")
    return steady_step([ms / 1e3 for _, ms in log.intervals], skip)


def anchor_run(text: str, cluster: dict, name: str | None = None, skip: int = 1
               ) -> tuple[dict, list[str]]:
    """The anchor run a Megatron-LM log holds (an estimate request with the measured step), on
    ``cluster`` (a cluster as a request gives it: a preset name, or a spec; its node count is
    set from the log's world size), and the notes on what the log could not say."""
    log = read_log(text)
    a = _Args(log.args)
    model = _model(a, log.padded_vocab)
    plan = _plan(a, model["num_layers"])
    training = _training(a)
    step, notes = measured_step_s(log, skip)
    notes += _unmodelled(a)
    world = a.count("world_size")
    cluster = with_world(cluster, world)
    if model.get("num_experts"):
        notes.append(MOE_BALANCE_NOTE)
    run = {"name": name or f"Megatron-LM log, {world} GPUs", "measured_step_time_s": step,
           "model": model, "cluster": cluster, "training": training, "plan": plan}
    return run, notes
