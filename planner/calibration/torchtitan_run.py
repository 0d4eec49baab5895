"""A measured run of torchtitan read from its job config and its training log: the anchor run
(``planner.calibration.anchor.AnchorRun``) that a torchtitan user already holds.

The job config (TOML, torchtitan v0.2.2's ``JobConfig``) says the model, the batch, the
parallelism, the recompute and whether the model is compiled; it maps onto the request with
the keys the launch renderer writes (``planner.launch.torchtitan``), and onto the training
switches torchtitan's execution implies (``planner.search.plan_request.FRAMEWORK_TRAINING``:
FSDP2's per-parameter copies, its reductions, PyTorch's all-gather context parallelism). The
log gives the world (``ParallelDims.build_mesh``: "Building device mesh with parallelism:
pp=.., dp_replicate=.., dp_shard=.., cp=.., tp=.., ep=.., etp=..") and the throughput of each
logged interval (``MetricsProcessor.log``: "step: 10 ... tps: 5,123 ..."). torchtitan's tps is
tokens per second per device: every rank counts its batch's labels (``train.py``:
``labels.numel()``) and the sum over a step's micro-batches is divided by the interval and by
the non-data-parallel degree (``metrics.py``), so one step takes global batch x sequence /
(tps x world) seconds. The step is the median over the logged intervals after the first
``skip`` (the first holds the compilation).

Llama 3's flavors (8B, 70B, 405B) and Qwen3's MoE flavors (30B-A3B, 235B-A22B) are read from
the config's ``[model]``; any other model is given with the run (and a model given with a
flavor the reader knows must have its shape). A MoE model's expert degrees are ``expert_parallel_degree`` and
``expert_tensor_parallel_degree`` (checked against the mesh's ep and etp), its experts one
grouped GEMM (``MoEArgs.use_grouped_mm``, true by default) and its dispatch PyTorch's all-to-all
or DeepEP's (``expert_parallel_comm_backend``); the routing's balance is not in the log.
"""

from __future__ import annotations

import re
from typing import Any

import tomllib

from planner.calibration.logged import MOE_BALANCE_NOTE, shown, steady_step, with_world
from planner.errors import PlannerInputError
from planner.search.plan_request import FRAMEWORK_TRAINING
from planner.specs.layout import default_layout, explicit_layout

# torchtitan v0.2.2, torchtitan/models/llama3/__init__.py: TransformerModelArgs per flavor
# (dim, n_layers, n_heads, n_kv_heads, ffn_dim_multiplier, multiple_of); vocab_size 128256
# (model/args.py); untied output.
LLAMA3_FLAVORS = {"8B": (4096, 32, 32, 8, 1.3, 1024), "70B": (8192, 80, 64, 8, 1.3, 4096),
                  "405B": (16384, 126, 128, 8, 1.2, 4096)}
LLAMA3_VOCAB = 128256
TITAN = " (torchtitan)"            # the suffix of the models the reader builds
MESH = re.compile(r"Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), "
                  r"dp_shard=(\d+), cp=(\d+), tp=(\d+)(?:, ep=(\d+), etp=(\d+))?")
STEP = re.compile(r"step:\s*(\d+)\s.*?tps:\s*(\d[\d,]*)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# torchtitan's float8 converter (v0.2.2 registers "quantize.linear.float8"; "float8" before)
# and its MX one ("quantize.linear.mx"; "mx" before), whose MXFP8 recipes the step model costs
# as 'mxfp8' (torchao's recipe names: mxfp8_cublas, the default, and its rounding variants).
FLOAT8 = ("quantize.linear.float8", "float8")
MX = ("quantize.linear.mx", "mx")


def llama3_model(flavor: str) -> dict:
    """A Llama 3 flavor as torchtitan builds it: FeedForward's hidden width is 2/3 of 4 dim,
    times ffn_dim_multiplier, rounded up to multiple_of (model/model.py)."""
    dim, layers, heads, kv, mult, multiple = LLAMA3_FLAVORS[flavor]
    hidden = int(mult * int(2 * 4 * dim / 3))
    hidden = multiple * ((hidden + multiple - 1) // multiple)
    return {"name": f"Llama 3 {flavor}{TITAN}", "num_layers": layers, "hidden_size": dim,
            "num_attention_heads": heads, "num_kv_heads": kv, "ffn_hidden_size": hidden,
            "ffn_type": "swiglu", "vocab_size": LLAMA3_VOCAB, "tied_embeddings": False}


# torchtitan v0.2.2, torchtitan/models/qwen3/__init__.py: the Qwen3 MoE flavors' Qwen3ModelArgs
# (dim, n_layers, n_heads, n_kv_heads, hidden_dim, moe_inter_dim; MoEArgs num_experts,
# top_k), head_dim 128, vocab_size 151936, softmax routing, no shared experts, every layer MoE.
QWEN3_MOE_FLAVORS = {"30B-A3B": (2048, 48, 32, 4, 6144, 768, 128, 8),
                     "235B-A22B": (4096, 94, 64, 4, 12288, 1536, 128, 8)}
QWEN3_VOCAB = 151936


def qwen3_moe_model(flavor: str) -> dict:
    """A Qwen3 MoE flavor as torchtitan builds it."""
    dim, layers, heads, kv, hidden, moe_ffn, experts, top_k = QWEN3_MOE_FLAVORS[flavor]
    return {"name": f"Qwen3 {flavor}{TITAN}", "num_layers": layers, "hidden_size": dim,
            "num_attention_heads": heads, "num_kv_heads": kv, "head_dim": 128,
            "ffn_hidden_size": hidden, "ffn_type": "swiglu", "vocab_size": QWEN3_VOCAB,
            "tied_embeddings": False, "num_experts": experts, "moe_top_k": top_k,
            "moe_ffn_hidden_size": moe_ffn, "moe_router_score": "softmax"}


# The models the reader builds from a config's [model] name and flavor.
FLAVORS = {**{("llama3", f): llama3_model for f in LLAMA3_FLAVORS},
           **{("qwen3", f): qwen3_moe_model for f in QWEN3_MOE_FLAVORS}}
SHAPE = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size",
         "vocab_size", "num_experts", "moe_top_k", "moe_ffn_hidden_size")


def _same_shape(model: dict, flavor_model: dict) -> None:
    """A model given with a run whose config names a flavor the reader knows has that
    flavor's shape (the model of a form or a command line left at another size would anchor
    the model on a run that never happened)."""
    for key in SHAPE:
        if key in flavor_model and model.get(key) != flavor_model[key]:
            raise PlannerInputError("model", f"{key} {shown(model.get(key))}, where the "
                                    f"config's {flavor_model['name'].removesuffix(TITAN)} has "
                                    f"{flavor_model[key]}: give the model the run trained, or "
                                    "none")


def _section(cfg: dict, name: str) -> dict:
    section = cfg.get(name, {})
    if not isinstance(section, dict):
        raise PlannerInputError(f"config.{name}", "needed as a table")
    return section


def _count(section: dict, where: str, key: str, default: int | None = None,
           minimum: int = 1) -> int:
    v = section.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise PlannerInputError(f"config.{where}.{key}", f"needed as a whole number of "
                                f"{minimum} or more, given as {shown(v)}")
    return v


def essential(log: str) -> str:
    """The lines of a log the reader reads (the device mesh, the steps), for a log too long
    to send whole."""
    return "\n".join(line for line in log.splitlines()
                     if MESH.search(ANSI.sub("", line)) or STEP.search(ANSI.sub("", line))) + "\n"


def _world(log: str) -> tuple[int, dict[str, int]]:
    """The world and its degrees from the log's device-mesh line (the last one)."""
    found = MESH.findall(ANSI.sub("", log))
    if not found:
        raise PlannerInputError("log", "no 'Building device mesh with parallelism: ...' line "
                                "(torchtitan logs it at start-up)")
    pp, rep, shard, cp, tp = (int(x) for x in found[-1][:5])
    world = pp * rep * shard * cp * tp
    if world < 1:
        raise PlannerInputError("log", "the device mesh line gives no ranks")
    degrees = {"pp": pp, "dp_replicate": rep, "dp_shard": shard, "cp": cp, "tp": tp}
    if found[-1][5]:       # (the expert degrees, carved out of the others: not in the world)
        degrees.update(ep=int(found[-1][5]), etp=int(found[-1][6]))
    return world, degrees


def step_times(log: str, tokens_per_step: float, world: int, skip: int = 1
               ) -> tuple[float, list[str]]:
    """The median step (s) over the logged intervals after the first ``skip``, from their tps
    (tokens per second per device), and notes."""
    tps = [int(t.replace(",", "")) for _, t in STEP.findall(ANSI.sub("", log))]
    if not tps:
        raise PlannerInputError("log", "no 'step: ... tps: ...' line: the run logged no step")
    if min(tps) <= 0:
        raise PlannerInputError("log", "a logged interval with no throughput (tps 0)")
    return steady_step([tokens_per_step / (t * world) for t in tps], skip)


# The config's degrees and the device mesh's names of them, with torchtitan's defaults
# (``JobConfig.parallelism``: data_parallel_shard_degree -1 takes the ranks left).
MESH_DEGREES = (("pipeline_parallel_degree", "pp", 1),
                ("data_parallel_replicate_degree", "dp_replicate", 1),
                ("data_parallel_shard_degree", "dp_shard", -1),
                ("context_parallel_degree", "cp", 1), ("tensor_parallel_degree", "tp", 1),
                ("expert_parallel_degree", "ep", 1), ("expert_tensor_parallel_degree", "etp", 1))


def _same_degrees(par: dict, degrees: dict[str, int]) -> None:
    """The log's device mesh is what the config asks (a config and a log of two different
    runs would anchor the model on a run that never happened)."""
    for key, mesh, default in MESH_DEGREES:
        given = par.get(key, default)
        if given == -1 and default == -1 or mesh not in degrees:
            continue
        v = _count(par, "parallelism", key, default)
        if v != degrees[mesh]:
            raise PlannerInputError(f"config.parallelism.{key}", f"{v}, where the log's device "
                                    f"mesh has {mesh}={degrees[mesh]}: the config and the log "
                                    "are not of one run")


def _plan(cfg: dict, degrees: dict[str, int], layers: int, moe: bool) -> dict:
    """The plan (the inverse of ``planner.launch.torchtitan``'s [parallelism] and [training]
    sections); ``moe``: the model has routed experts."""
    par, tr = _section(cfg, "parallelism"), _section(cfg, "training")
    _same_degrees(par, degrees)
    pp, rep, shard, cp, tp = (degrees[k] for k in ("pp", "dp_replicate", "dp_shard", "cp",
                                                   "tp"))
    ep = _count(par, "parallelism", "expert_parallel_degree", 1)
    etp = _count(par, "parallelism", "expert_tensor_parallel_degree", 1)
    if not moe and ep * etp > 1:
        raise PlannerInputError("config.parallelism.expert_parallel_degree", "expert "
                                "parallelism for a model without routed experts")
    dp = rep * shard
    reshard = par.get("fsdp_reshard_after_forward", "default")
    if shard == 1 and cp == 1:
        zero = 0
    elif reshard == "always" or (reshard == "default" and pp == 1):
        zero = 3
    elif pp > 1:
        zero = 1                   # FSDP under a pipeline: gathered and reduced once a step
    elif reshard == "never":
        zero = 2
    else:
        raise PlannerInputError("config.parallelism.fsdp_reshard_after_forward",
                                f"{shown(reshard)} is not default, always or never")
    gbs = global_batch(tr, dp)
    local = _count(tr, "training", "local_batch_size", 8)
    stages = None
    if pp > 1:
        # train.py: gradient_accumulation_steps = global / (local x dp), each a whole pipeline
        # schedule over local / pipeline_parallel_microbatch_size micro-batches.
        if gbs != local * dp:
            raise PlannerInputError("config.training.global_batch_size", f"{gbs // (local * dp)}"
                                    " pipeline schedules a step (gradient accumulation over a "
                                    "pipeline), which the request costs as one: give the whole "
                                    "batch as local_batch_size")
        mbs = _count(par, "parallelism", "pipeline_parallel_microbatch_size", 1)
        if local % mbs:
            raise PlannerInputError("config.parallelism.pipeline_parallel_microbatch_size",
                                    f"{mbs} does not divide local_batch_size {local}")
        schedule = par.get("pipeline_parallel_schedule", "1F1B")      # its default
        if schedule not in SINGLE_STAGE + MULTI_STAGE:
            raise PlannerInputError("config.parallelism.pipeline_parallel_schedule",
                                    f"{shown(schedule)}: the request costs 1F1B, GPipe with "
                                    "one micro-batch and Interleaved1F1B")
        chunks = _pipeline_chunks(par, layers, pp, schedule)
        vpp = len(chunks[0])
        if schedule == "GPipe" and local // mbs > 1:
            raise PlannerInputError("config.parallelism.pipeline_parallel_schedule", "GPipe "
                                    "over several micro-batches holds all of them in flight on "
                                    "every stage; the request costs 1F1B's")
        totals = tuple(sum(c) for c in chunks)
        if explicit_layout(totals, vpp).chunks != chunks:
            raise PlannerInputError("config.parallelism.module_fqns_per_model_part", "a split "
                                    "of the layers over the chunks the planner's layouts do "
                                    "not make")
        default = default_layout(layers, pp, vpp)
        if default is None or default.stages != totals:
            stages = list(totals)
    else:
        mbs, vpp = local, 1
    if gbs % (mbs * dp):
        raise PlannerInputError("config.training.global_batch_size", f"{gbs} is not a "
                                f"multiple of the micro-batch ({mbs}) x data parallel ({dp})")
    mode = _section(cfg, "activation_checkpoint").get("mode", "selective")   # its default
    if mode not in ("none", "selective", "full"):
        raise PlannerInputError("config.activation_checkpoint.mode", f"{shown(mode)} is not none, "
                                "selective or full")
    plan: dict[str, Any] = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "vpp": vpp,
                            "micro_batch_size": mbs, "recompute": mode, "zero_stage": zero,
                            "sequence_parallel": tp > 1}
    if moe:
        plan.update(ep=ep, etp=etp)
    if zero and rep > 1:
        plan["dp_replicate"] = rep
    if stages is not None:
        plan["layers_per_stage"] = stages
    return plan


# The pipeline schedules whose execution the step model costs (torchtitan's names): one stage a
# rank, or interleaved virtual stages. The others (zero-bubble, DualPipeV, looped BFS) are not.
SINGLE_STAGE, MULTI_STAGE = ("1F1B", "GPipe"), ("Interleaved1F1B",)


def llm_split(stages: int, layers: int, first: int, last: int) -> list[int]:
    """Decoder layers per virtual stage as torchtitan v0.2.2 splits them
    (``generate_llm_fqn_per_model_part``, distributed/pipeline_parallel.py): the embedding
    counted as ``first`` layers and the norm and output as ``last``, the sum spread evenly,
    the first stages one more where it does not divide."""
    if stages == 1:
        return [layers]
    per, extra = divmod(layers + first + last, stages)
    if per == 0 or first > per or last > per:
        raise PlannerInputError("config.parallelism", f"{stages} virtual stages cannot split "
                                f"{layers} layers with the embedding counted as {first} and "
                                f"the output as {last} (torchtitan refuses it too)")
    out, placed = [], 0
    for k in range(stages):
        n = per + (k < extra) - (first if k == 0 else last if k == stages - 1 else 0)
        n = max(0, min(n, layers - placed))
        out.append(n)
        placed += n
    return out


def _pipeline_chunks(par: dict, layers: int, pp: int, schedule: str
                     ) -> tuple[tuple[int, ...], ...]:
    """Decoder layers per (rank, chunk): the modules of each virtual stage
    (``module_fqns_per_model_part``) or torchtitan's own split (``llm_split``) over
    ``ceil((layers + first + last) / pipeline_parallel_layers_per_stage)`` virtual stages, or
    without that key one a rank for single-stage schedules and two for multi-stage ones
    (``pipeline_llm``); virtual stages chunk-major."""
    if "module_fqns_per_model_part" in par:
        parts = par["module_fqns_per_model_part"]
        if not (isinstance(parts, list) and all(isinstance(p, list) for p in parts)):
            raise PlannerInputError("config.parallelism.module_fqns_per_model_part",
                                    "needed as a list of lists of module names")
        virtual = [sum(isinstance(x, str) and x.startswith("layers.") for x in p)
                   for p in parts]
    else:
        first = _count(par, "parallelism", "pipeline_parallel_first_stage_less_layers", 1, 0)
        last = _count(par, "parallelism", "pipeline_parallel_last_stage_less_layers", 1, 0)
        if "pipeline_parallel_layers_per_stage" in par:
            per = _count(par, "parallelism", "pipeline_parallel_layers_per_stage")
            stages = -(-(layers + first + last) // per)
        else:
            stages = pp * (1 if schedule in SINGLE_STAGE else 2)
        if stages > 4 * (layers + first + last):
            raise PlannerInputError("config.parallelism", f"{stages} virtual stages for "
                                    f"{layers} layers")
        virtual = llm_split(stages, layers, first, last)
    if sum(virtual) != layers or len(virtual) % pp or min(virtual, default=-1) < 0:
        raise PlannerInputError("config.parallelism", f"the pipeline's stages hold "
                                f"{sum(virtual)} layers in {len(virtual)} parts, not the "
                                f"model's {layers} over {pp} ranks")
    v = len(virtual) // pp
    if (v == 1) != (schedule in SINGLE_STAGE):
        raise PlannerInputError("config.parallelism.pipeline_parallel_schedule", f"{schedule} "
                                f"with {v} stages a rank")
    return tuple(tuple(virtual[c * pp + r] for c in range(v)) for r in range(pp))


def global_batch(tr: dict, dp: int) -> int:
    """training.global_batch_size, whose default (-1) is local_batch_size x the data-parallel
    degree (train.py)."""
    gbs = tr.get("global_batch_size", -1)
    if gbs == -1:
        return _count(tr, "training", "local_batch_size", 8) * dp
    return _count(tr, "training", "global_batch_size")


def _training(cfg: dict, plan: dict, moe: bool) -> dict:
    tr, model = _section(cfg, "training"), _section(cfg, "model")
    t: dict[str, Any] = {**FRAMEWORK_TRAINING["torchtitan"],
                         "global_batch_size": global_batch(tr, plan["dp"]),
                         "seq_length": _count(tr, "training", "seq_len", 2048),
                         "dropout": False}
    param = tr.get("mixed_precision_param", "bfloat16")
    if param not in ("bfloat16", "float32"):
        raise PlannerInputError("config.training.mixed_precision_param", f"{shown(param)} is not "
                                "bfloat16 or float32")
    converters = model.get("converters", [])
    if not isinstance(converters, list):
        raise PlannerInputError("config.model.converters", "needed as a list of names")
    if any(c in FLOAT8 for c in converters):
        float8 = _section(_section(_section(cfg, "quantize"), "linear"), "float8")
        t.update({"precision": "fp8", "fp8_recipe": "tensorwise",
                  "fp8_param_gather": float8.get("enable_fsdp_float8_all_gather") is True})
    elif any(c in MX for c in converters):
        mx = _section(_section(_section(cfg, "quantize"), "linear"), "mx")
        recipe = mx.get("recipe_name", "mxfp8_cublas")
        if not (isinstance(recipe, str) and recipe.startswith("mxfp8")):
            raise PlannerInputError("config.quantize.linear.mx.recipe_name",
                                    f"{shown(recipe)} is not an MXFP8 recipe (the step model "
                                    "costs fp8 GEMMs, not MX's fp6 or fp4)")
        t.update({"precision": "fp8", "fp8_recipe": "mxfp8"})
    else:
        t["precision"] = "bf16" if param == "bfloat16" else "fp32"
    if tr.get("dtype") == "bfloat16":
        # No master weights: bf16 parameters, gradients and moments, reduced in fp32.
        t.update({"master_weights": False, "grad_dtype": "bf16",
                  "optimizer_state_dtype": "bf16", "grad_reduce_dtype": "fp32"})
    compile_ = _section(cfg, "compile")
    components = compile_.get("components", ["model", "loss"])
    if not isinstance(components, list):
        raise PlannerInputError("config.compile.components", "needed as a list of names")
    compiled = compile_.get("enable", False) is True
    t["eager_elementwise"] = not (compiled and "model" in components)
    # v0.2.2 compiles the loss with the model by default (components ["model", "loss"]).
    t["loss_implementation"] = "fused" if compiled and "loss" in components else "eager"
    ac = _section(cfg, "activation_checkpoint")
    if plan["recompute"] == "selective":
        if str(ac.get("selective_ac_option", "2")) != "op":
            raise PlannerInputError("config.activation_checkpoint.selective_ac_option",
                                    "layer-wise selective recompute (every n-th block): the "
                                    "request's selective recompute is the per-op policy "
                                    "('op')")
        t["selective_recompute"] = "per_op"
    if plan["recompute"] == "full":
        t["recompute_early_stop"] = ac.get("early_stop", False) is True
    if plan["tp"] > 1:
        t["async_tensor_model_parallel_allreduce"] = False
        if _section(cfg, "parallelism").get("enable_async_tensor_parallel") is True:
            if t["eager_elementwise"]:
                raise PlannerInputError("config.parallelism.enable_async_tensor_parallel",
                                        "async tensor parallelism without the model compiled "
                                        "(torchtitan refuses it: 'Async TP requires "
                                        "torch.compile')")
            t["tp_comm_overlap"] = "async_tp"      # PyTorch's micro-pipelined TP
    if moe:
        # torchtitan's experts run one grouped GEMM (MoEArgs.use_grouped_mm, true by default);
        # its expert-parallel backend is PyTorch's all-to-all or DeepEP's kernels.
        t["moe_expert_gemm"] = "grouped"
        backend = _section(cfg, "parallelism").get("expert_parallel_comm_backend", "standard")
        if backend not in ("standard", "deepep"):
            raise PlannerInputError("config.parallelism.expert_parallel_comm_backend",
                                    f"{shown(backend)} is not standard or deepep")
        t["moe_dispatcher"] = "deepep" if backend == "deepep" else "alltoall"
    return t


def anchor_run(config: str, log: str, cluster: dict, model: dict | None = None,
               name: str | None = None, skip: int = 1) -> tuple[dict, list[str]]:
    """The anchor run a torchtitan job config and its log hold, on ``cluster`` (its node count
    set from the log's world), with ``model`` given or Llama 3's flavor from the config; and
    notes on what they could not say."""
    try:
        cfg = tomllib.loads(config)
    except tomllib.TOMLDecodeError as exc:
        raise PlannerInputError("config", f"not TOML: {exc}") from exc
    spec = _section(cfg, "model")
    family, flavor = spec.get("name"), spec.get("flavor")
    key = (family, flavor) if isinstance(family, str) and isinstance(flavor, str) else None
    build = None if key is None else FLAVORS.get(key)
    if model is None:
        if build is None:
            known = ", ".join(f"{n} {f}" for n, f in FLAVORS)
            raise PlannerInputError("model", f"the config's model ({shown(family)}, flavor "
                                    f"{shown(flavor)}) is not one the reader knows ({known}): "
                                    "give the model with the run")
        model = build(str(flavor))
    elif build is not None and isinstance(model, dict):
        _same_shape(model, build(str(flavor)))
    layers = model.get("num_layers") if isinstance(model, dict) else None
    if not isinstance(layers, int) or layers < 1:
        raise PlannerInputError("model.num_layers", "needed as a whole number of 1 or more")
    experts = model.get("num_experts")
    moe = isinstance(experts, int) and experts > 1
    world, degrees = _world(log)
    plan = _plan(cfg, degrees, layers, moe)
    training = _training(cfg, plan, moe)
    step, notes = step_times(log, training["global_batch_size"] * training["seq_length"],
                             world, skip)
    if moe:
        notes.append(MOE_BALANCE_NOTE)
    cluster = with_world(cluster, world)
    run = {"name": name or f"torchtitan log, {world} GPUs", "measured_step_time_s": step,
           "model": model, "cluster": cluster, "training": training, "plan": plan}
    return run, notes
