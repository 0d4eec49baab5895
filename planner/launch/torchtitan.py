"""The [training], [parallelism] and [activation_checkpoint] sections of a torchtitan job
config (TOML) for a plan.

ZeRO maps onto FSDP2: zero_stage 0 is DDP (``data_parallel_replicate_degree``), 3 is FSDP
(``data_parallel_shard_degree``, reshard after forward), 1 and 2 are FSDP that keeps the
gathered weights between forward and backward (``fsdp_reshard_after_forward = "never"``, the
ZeRO-2 pattern; FSDP has no ZeRO-1 mode).
"""

from __future__ import annotations

from planner.launch.context import TORCH_DTYPE, LaunchContext


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def torchtitan_toml(ctx: LaunchContext) -> tuple[str, list[str]]:
    p, t = ctx.plan, ctx.training
    notes: list[str] = []
    replicate, shard = (p.dp, 1) if p.zero_stage == 0 else (1, p.dp)
    parallelism = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": p.tp,
        "pipeline_parallel_degree": p.pp,
        "context_parallel_degree": p.cp,
    }
    if p.zero_stage in (1, 2) and p.dp > 1:
        parallelism["fsdp_reshard_after_forward"] = "never"
        if p.zero_stage == 1:
            notes.append("FSDP has no ZeRO-1 mode: zero_stage=1 is rendered as ZeRO-2 "
                         "(gradients sharded too), which needs less memory, not more")
    if p.tp > 1:
        parallelism["enable_async_tensor_parallel"] = False
        if not p.sequence_parallel:
            notes.append("torchtitan's tensor parallelism always shards the sequence "
                         "(sequence parallelism); this plan was costed without it")
    if p.pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if p.vpp > 1 else "1F1B"
        parallelism["pipeline_parallel_microbatch_size"] = p.micro_batch_size
        if p.vpp > 1:   # pp * vpp stages of equal size
            parallelism["pipeline_parallel_layers_per_stage"] = (
                ctx.model.num_layers // (p.pp * p.vpp))
        if ctx.uneven_stages is not None:
            notes.append(f"torchtitan splits layers evenly; the planned split "
                         f"{p.layers_per_stage} needs a custom pipeline split")
    sections = {
        "training": {
            "local_batch_size": p.micro_batch_size * p.grad_accum_steps if p.pp > 1
            else p.micro_batch_size,
            "global_batch_size": t.global_batch_size,
            "seq_len": t.seq_length,
            "mixed_precision_param": TORCH_DTYPE[t.precision],
        },
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": p.recompute},
    }
    if p.recompute == "selective":
        sections["activation_checkpoint"]["selective_ac_option"] = "op"
    lines = [f"# torchtitan job config sections for dp={p.dp} tp={p.tp} pp={p.pp} cp={p.cp}"
             f" ({p.gpus_used} GPUs), from the planner"]
    for name, values in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n", notes
