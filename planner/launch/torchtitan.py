"""The [training], [parallelism], [activation_checkpoint] and [compile] sections of a
torchtitan job config (TOML, the ``JobConfig`` of torchtitan's last release, v0.2.2) for a plan
it runs as predicted. torch.compile is on (``compile.enable``, v0.2.2's ``Compile`` dataclass:
``enable`` false by default, ``components`` ["model", "loss"]): the step model costs the norms,
activations and residual adds as fused kernels, which eager PyTorch runs one op at a time; a
plan costed with the eager kernels (``training.eager_elementwise``) leaves the model out of
``components``, one costed with PyTorch's eager loss (``training.loss_implementation``
'eager') the loss, and ``enable = false`` when neither is left; a loss costed as Megatron's,
which torchtitan cannot run, is compiled and holds less at its peak than costed. A
full recompute costed to stop early (``training.recompute_early_stop``) sets
``activation_checkpoint.early_stop`` (v0.2.2's default is false).

ZeRO maps onto FSDP2: zero_stage 0 is DDP (``data_parallel_replicate_degree``, only when nothing
else is parallel), 3 is FSDP resharding after forward (``data_parallel_shard_degree``,
``fsdp_reshard_after_forward = "always"``), 2 keeps the gathered weights between forward and
backward (``"never"``; the planner's ZeRO-2 only with one micro-batch), 1 is FSDP under a
pipeline (``"default"``: not resharded after forward when PP is on, and
torch.distributed.pipelining reduce-scatters the gradients after each stage's last backward, so
the weights are gathered and the gradients reduced once a step, ZeRO-1's traffic and memory;
no ZeRO-2/3 with a pipeline); hybrid sharding
(``plan.dp_replicate``) is HSDP, ``data_parallel_replicate_degree`` replicas of
``data_parallel_shard_degree`` ranks. Pipelines use
``Interleaved1F1B`` with virtual stages, ``GPipe`` when there are fewer micro-batches than stages
(``Schedule1F1B`` refuses that; the orders coincide) and ``1F1B`` otherwise; a layout other than
the default even split of layers plus embedding and loss is given as
``module_fqns_per_model_part`` (the modules of each virtual stage, torchtitan's Llama naming:
``tok_embeddings``, ``layers.<i>``, ``norm``, ``output``). Context parallelism all-gathers K
and V, PyTorch's default rotation, which v0.2.2's training runs whatever
``context_parallel_rotate_method`` says (it is applied by validate.py only; the config says
"allgather"). MoE models get
``expert_parallel_degree`` and ``expert_tensor_parallel_degree`` (v0.2.2's ``Parallelism``;
the expert degrees it accepts are checked in ``planner.frameworks``).
"""

from __future__ import annotations

from planner.cost.layers import costed_loss
from planner.launch.context import TORCH_DTYPE, LaunchContext
from planner.specs import TrainingSpec

TomlValue = bool | int | float | str | list


def _compile_section(t: TrainingSpec) -> dict:
    """[compile]: the model compiled unless costed with eager kernels, the loss unless costed
    as PyTorch's eager one (v0.2.2's ``Compile.components``)."""
    components = ([] if t.eager_elementwise else ["model"]) + (
        [] if costed_loss(t) == "eager" else ["loss"])
    return {"enable": True, "components": components} if components else {"enable": False}


def _toml_value(v: TomlValue) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def module_fqns(ctx: LaunchContext) -> list[list[str]]:
    """The modules of each virtual stage, in execution order."""
    layout = ctx.layout
    out, layer = [], 0
    stages = layout.virtual_stages()
    for k, n in enumerate(stages):
        part = ["tok_embeddings"] if k == 0 else []
        part += [f"layers.{layer + i}" for i in range(n)]
        layer += n
        if k == len(stages) - 1:
            part += ["norm", "output"]
        out.append(part)
    return out


def torchtitan_toml(ctx: LaunchContext) -> tuple[str, list[str]]:
    p, t = ctx.plan, ctx.training
    notes: list[str] = []
    replicate, shard = ((p.dp, 1) if p.zero_stage == 0
                        else (p.dp_replicate, p.dp // p.dp_replicate))
    parallelism: dict[str, TomlValue] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": p.tp,
        "pipeline_parallel_degree": p.pp,
        "context_parallel_degree": p.cp,
    }
    if p.zero_stage >= 1 and p.dp * p.cp > 1:
        # ZeRO-1 is FSDP under a pipeline, not resharded after forward ("default" there).
        parallelism["fsdp_reshard_after_forward"] = {1: "default", 2: "never",
                                                     3: "always"}[p.zero_stage]
    if ctx.model.is_moe:
        parallelism["expert_parallel_degree"] = p.ep
        parallelism["expert_tensor_parallel_degree"] = p.etp
        if ctx.training.moe_dispatcher == "deepep":
            parallelism["expert_parallel_comm_backend"] = "deepep"
    if p.tp > 1:
        # AsyncTP (training.tp_comm_overlap 'async_tp'), which needs the model compiled: the
        # planner refuses it for torchtitan with eager kernels (planner.frameworks).
        parallelism["enable_async_tensor_parallel"] = ctx.tp_overlap == "async_tp"
    if p.cp > 1:
        # What v0.2.2's training runs whatever this key says (it never applies it): PyTorch's
        # default rotation, the K,V all-gather (training.ring_attention 'torch_allgather').
        parallelism["context_parallel_rotate_method"] = "allgather"
    if p.pp > 1:
        m = p.grad_accum_steps
        parallelism["pipeline_parallel_schedule"] = (
            "Interleaved1F1B" if p.vpp > 1 else "GPipe" if m < p.pp else "1F1B")
        parallelism["pipeline_parallel_microbatch_size"] = p.micro_batch_size
        layout = ctx.layout
        if layout.kind in ("even", "embedding_loss") and p.vpp > 1:
            per = (sum(layout.stages) + (2 if layout.kind == "embedding_loss" else 0)) // (
                p.pp * p.vpp)
            parallelism["pipeline_parallel_layers_per_stage"] = per
            less = 1 if layout.kind == "embedding_loss" else 0
            parallelism["pipeline_parallel_first_stage_less_layers"] = less
            parallelism["pipeline_parallel_last_stage_less_layers"] = less
        else:
            parallelism["module_fqns_per_model_part"] = module_fqns(ctx)
    sections: dict[str, dict[str, TomlValue]] = {
        "training": {
            "local_batch_size": p.micro_batch_size * p.grad_accum_steps if p.pp > 1
            else p.micro_batch_size,
            "global_batch_size": t.global_batch_size,
            "seq_len": t.seq_length,
            "mixed_precision_param": TORCH_DTYPE[t.precision],
            # No master weights: parameters, gradients and optimizer states all in bf16
            # (v0.2.2's training.dtype; the frameworks refuse any other such plan here).
            **({"dtype": "bfloat16"} if t.no_master_copy else {}),
        },
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": p.recompute},
        # The step model costs fused memory-bound kernels (norms, activations, residual adds),
        # which torchtitan runs only under torch.compile (v0.2.2's compile.enable is false),
        # unless the plan was costed with its eager ones (training.eager_elementwise); and the
        # loss compiled unless costed eager (training.loss_implementation: a compiled loss
        # holds less at its peak than Megatron's, which torchtitan cannot run).
        "compile": _compile_section(t),
    }
    if t.recompute_early_stop and p.recompute == "full":
        sections["activation_checkpoint"]["early_stop"] = True
    if p.recompute == "selective":
        # torchtitan's default selective option "2" checkpoints every second block; the plan's
        # selective recompute is the per-op policy (frameworks refuse any other for torchtitan).
        sections["activation_checkpoint"]["selective_ac_option"] = "op"
    if t.precision == "fp8" and t.fp8_recipe == "mxfp8":
        # v0.2.2 registers torchao's MXLinear as "quantize.linear.mx" and the experts' MXFP8
        # grouped GEMMs as "quantize.grouped_mm.mx" (components/quantization/mx.py), which
        # match the MoE modules by name ("experts", docs/mxfp8.md); the linear converter skips
        # the output layer by default (filter_fqns), which the step model costs in 16 bits.
        moe = ctx.model.is_moe
        converters = ["quantize.linear.mx"] + (["quantize.grouped_mm.mx"] if moe else [])
        sections["model"] = {"converters": converters}
        sections["quantize.linear.mx"] = {"recipe_name": "mxfp8_cublas"}
        if moe:
            sections["quantize.grouped_mm.mx"] = {"recipe_name": "mxfp8", "fqns": ["experts"]}
    elif t.precision == "fp8":
        # v0.2.2 registers torchao's Float8Linear as "quantize.linear.float8"
        # (components/quantization/float8.py; an unregistered name fails at start-up).
        sections["model"] = {"converters": ["quantize.linear.float8"]}
        if t.fp8_param_gather:
            sections["quantize.linear.float8"] = {"enable_fsdp_float8_all_gather": True}
    lines = [f"# torchtitan (v0.2.2) job config sections for dp={p.dp} tp={p.tp} pp={p.pp} "
             f"cp={p.cp} ({p.gpus_used} GPUs), from the planner"]
    for name, values in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n", notes
