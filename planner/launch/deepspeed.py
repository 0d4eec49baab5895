"""A DeepSpeed JSON config for plans the DeepSpeed engine can run on its own.

The engine does data parallelism with ZeRO stages 0-3, micro-batches and gradient
accumulation; tensor, pipeline and context parallelism need Megatron-DeepSpeed or another
model-parallel front end, so those plans get no config and a note saying why.
"""

from __future__ import annotations

from planner.launch.context import LaunchContext


def deepspeed_config(ctx: LaunchContext) -> tuple[dict | None, list[str]]:
    p, t = ctx.plan, ctx.training
    if p.tp > 1 or p.pp > 1 or p.cp > 1:
        return None, [f"DeepSpeed's engine expresses data parallelism and ZeRO only; this plan "
                      f"also uses tp={p.tp}, pp={p.pp}, cp={p.cp}: run it with Megatron-LM "
                      "(or Megatron-DeepSpeed) instead"]
    cfg: dict = {
        "train_batch_size": t.global_batch_size,
        "train_micro_batch_size_per_gpu": p.micro_batch_size,
        "gradient_accumulation_steps": p.grad_accum_steps,
        "zero_optimization": {"stage": p.zero_stage, "overlap_comm": t.overlap_grad_reduce,
                              "contiguous_gradients": True},
        "gradient_clipping": 1.0,
    }
    if t.precision in ("bf16", "fp8"):
        cfg["bf16"] = {"enabled": True}
    elif t.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0}
    notes = []
    if p.recompute != "none":
        cfg["activation_checkpointing"] = {"partition_activations": False,
                                           "contiguous_memory_optimization": False}
        notes.append(f"recompute={p.recompute}: wrap the model's layers with "
                     "deepspeed.checkpointing.checkpoint (DeepSpeed does not choose them)")
    return cfg, notes
