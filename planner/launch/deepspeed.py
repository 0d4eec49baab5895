"""A DeepSpeed JSON config for a plan DeepSpeed runs as predicted (DeepSpeed 0.19.6 keys).

The engine does data parallelism with ZeRO stages 0-3, micro-batches and gradient accumulation
(``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``,
``zero_optimization.stage``); tensor parallelism through AutoTP training
(``"tensor_parallel": {"autotp_size": tp, "tp_overlap_comm": ...}``, from 0.16.4, the overlap
from 0.16.6; with ZeRO-3 from 0.19.4); pipeline
parallelism through the pipeline engine (``"pipeline": {"stages", "partition"}`` with the model
built as a ``PipelineModule`` of as many stages, ZeRO <= 1, evenly split layers); ZeRO-3's
hybrid sharding (``plan.dp_replicate``) as MiCS (``zero_optimization.mics_shard_size``);
expert parallelism through AutoEP (``"expert_parallel": {"enabled", "autoep_size"}``, from
0.19.2) for Hugging Face MoE models.
"""

from __future__ import annotations

import math

from planner.cost.layers import costed_loss, distributes_saved_input
from planner.cost.tables import ddp_bucket_params
from planner.launch.context import TORCH_DTYPE, LaunchContext

# DeepSpeed's defaults (deepspeed/runtime/zero/config.py): stage3_max_reuse_distance and
# stage3_max_live_parameters.
DEFAULT_REUSE_DISTANCE = 10**9
DEFAULT_MAX_LIVE = 10**9


def zero3_settings(ctx: LaunchContext) -> dict[str, int]:
    """ZeRO-3's gather settings for the run the plan costs, in parameters of a rank's mean
    layer L (its TP share, and its routed experts' EP share):

    - ``stage3_prefetch_bucket_size``: ``training.zero3_prefetch_layers`` x L, the weights the
      step model gathers ahead (DeepSpeed's default, 5e7, is a small part of a large layer's,
      and 0 gathers on demand, as P = 0 is costed);
    - ``stage3_max_live_parameters``: the layers the memory model holds gathered, the one in
      use and max(1, P) ahead, so that the limit never stops that prefetch (never below
      DeepSpeed's default, 1e9);
    - ``stage3_max_reuse_distance``: ``training.zero3_max_reuse_params`` where set; otherwise
      2 L, so that a layer gathered for its recompute stays gathered through its backward, as
      costed without a reuse distance (planner/cost/reuse.py; never below the default, 1e9);
    - ``reduce_bucket_size``: L, one reduce-scatter of a layer's gradients as its backward
      ends, as costed (DeepSpeed's 5e8 elements would span several small layers, or split a
      large one), in the one layer of full gradients the memory model holds."""
    t, p, m = ctx.training, ctx.plan, ctx.model
    layer = m.nonexpert_params_per_layer / p.tp + m.expert_params_per_layer / (p.ep * p.etp)
    ahead = t.zero3_prefetch_layers
    reuse = (math.ceil(t.zero3_max_reuse_params) if t.zero3_max_reuse_params is not None
             else max(DEFAULT_REUSE_DISTANCE, math.ceil(2 * layer)))
    return {"stage3_prefetch_bucket_size": math.ceil(ahead * layer),
            "stage3_max_live_parameters": max(DEFAULT_MAX_LIVE,
                                              math.ceil((1 + max(1.0, ahead)) * layer)),
            "stage3_max_reuse_distance": reuse,
            "reduce_bucket_size": math.ceil(layer)}


def deepspeed_config(ctx: LaunchContext) -> tuple[dict, list[str]]:
    p, t = ctx.plan, ctx.training
    notes: list[str] = []
    # The pipeline engine reduces at the end of its schedule (ReduceGrads), which is how a
    # pipelined plan is costed for DeepSpeed (training.grad_reduce_after_last_backward). There
    # ZeRO-1/2's reduce_gradients(pipeline_parallel=True) reduces every gradient only without
    # overlap_comm: with it, the hooks reduce nothing before the boundary the engine forces at
    # ReduceGrads, and only the pending buckets are flushed (deepspeed/runtime/zero/
    # stage_1_and_2.py reduce_gradients, reduce_ready_partitions_and_remove_grads).
    overlap = t.overlap_grad_reduce and p.pp == 1
    # Without an mpu, DeepSpeed's config takes every rank for a data-parallel one (config.py
    # world_size = dist.get_world_size()) and asserts train_batch_size = micro-batch x
    # accumulation x world size, so AutoTP's tp ranks count in it (the pipeline engine passes
    # its own mpu, whose data-parallel size is dp).
    cfg: dict = {
        "train_batch_size": t.global_batch_size * p.tp,
        "train_micro_batch_size_per_gpu": p.micro_batch_size,
        "gradient_accumulation_steps": p.grad_accum_steps,
        "zero_optimization": {"stage": p.zero_stage, "overlap_comm": overlap,
                              "contiguous_gradients": True},
        "gradient_clipping": 1.0,
    }
    if p.zero_stage == 3:
        cfg["zero_optimization"].update(zero3_settings(ctx))
        if p.dp_replicate > 1:
            # Hybrid sharding as MiCS: shard groups of consecutive ranks (no tensor
            # parallelism, which planner.frameworks checks), replicated across the others.
            cfg["zero_optimization"]["mics_shard_size"] = p.dp // p.dp_replicate * p.cp
    if p.zero_stage in (1, 2) and t.overlap_grad_reduce:
        # The gradients reduce (and the weights gather) in the buckets the plan is costed
        # with, Megatron's (``tables.ddp_bucket_params``), not DeepSpeed's 5e8 elements:
        # the last bucket is what the backward leaves exposed.
        bucket = ddp_bucket_params(p.dp * p.cp)
        cfg["zero_optimization"].update({"reduce_bucket_size": bucket,
                                         "allgather_bucket_size": bucket})
    if t.zero_grad_allreduce and p.zero_stage in (1, 2) and p.ep == 1:
        # Both of ZeRO-1/2's paths all-reduce (average_tensor: use_multi_rank_bucket_allreduce
        # by default, or gradient_reduction_w_predivide without reduce_scatter); this one
        # all-reduces each bucket whole, as costed. With experts the first stays: their
        # ZeRO-1/2 path asserts reduce_scatter (stage_1_and_2.py _configure_moe_settings).
        cfg["zero_optimization"]["reduce_scatter"] = False
    if p.ep > 1:
        # AutoEP (deepspeed/module_inject/auto_ep_config.py): the experts over ep consecutive
        # ranks, their gradients reduced over the ranks that hold the same ones.
        cfg["expert_parallel"] = {"enabled": True, "autoep_size": p.ep}
        notes.append("expert_parallel: AutoEP, DeepSpeed >= 0.19.2"
                     + (" (>= 0.19.3 with ZeRO-3)" if p.zero_stage == 3 else "")
                     + " and Transformers >= 5.0, replaces the experts of a Hugging Face MoE "
                     "model at deepspeed.initialize: presets mixtral, qwen3_moe (qwen2_moe), "
                     "qwen3_5_moe, deepseek_v2, deepseek_v3, detected from model.config; other "
                     "models name their layers with moe_layer_pattern, router_pattern and "
                     "expert_pattern; the router's load-balancing loss is not supported")
        if p.zero_stage in (1, 2):
            notes.append("ZeRO-1/2 with experts: give the config an optimizer section, or "
                         "build the client optimizer's parameter groups with deepspeed.moe."
                         "utils.split_params_into_different_moe_groups_for_optimizer (the "
                         "engine asserts a group marked moe)")
    if p.tp > 1:
        # The input gradient's all-reduce beside the weight-gradient GEMM where the plan is
        # costed so (AsyncColumnParallel, deepspeed/module_inject/layers.py), blocking after
        # it otherwise (ColumnParallel, the default).
        overlap_tp = t.async_tensor_model_parallel_allreduce
        cfg["tensor_parallel"] = {"autotp_size": p.tp, "tp_overlap_comm": overlap_tp}
        notes.append(f"train_batch_size {t.global_batch_size * p.tp} counts each sequence once "
                     f"per AutoTP rank, as DeepSpeed's batch check does without an mpu: the "
                     f"global batch is {t.global_batch_size} sequences")
        notes.append("AutoTP training needs DeepSpeed >= "
                     + ("0.16.6 (tp_overlap_comm)" if overlap_tp else "0.16.4")
                     + (" (>= 0.19.4 with ZeRO-3)" if p.zero_stage == 3 else ""))
    if costed_loss(t) != "eager":
        notes.append(f"the plan was costed with the {costed_loss(t)} cross-entropy "
                     "(training.loss_implementation); the model code's loss runs, Hugging "
                     "Face's ForCausalLMLoss an eager one over an fp32 copy, which holds 10 "
                     "bytes a logit at its peak: cost the plan with 'eager' to size it so")
    if p.pp > 1:
        cfg["pipeline"] = {"stages": p.pp, "partition": "uniform"}
        notes.append(f"build the model as deepspeed.pipe.PipelineModule(num_stages={p.pp}, "
                     "partition_method='type:<its decoder layer class>'), which splits the "
                     "transformer layers evenly as costed ('uniform' counts the embedding and "
                     "the head as layers too); the engine reads the stages from the "
                     "PipelineModule, not this config's pipeline section")
    if TORCH_DTYPE[t.precision] == "bfloat16":         # bf16, and fp8 / fp4 over bf16 weights
        cfg["bf16"] = {"enabled": True}
    elif t.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0}
    # The gradients accumulate in grad_dtype and are reduced in the dtype the plan is costed
    # with (DeepSpeed's defaults are the weights' 16 bits for both).
    cfg["data_types"] = {"grad_accum_dtype": t.grad_dtype}
    cfg["communication_data_type"] = t.grad_reduce_dtype or t.grad_dtype
    if p.recompute != "none":
        cfg["activation_checkpointing"] = {
            "partition_activations": distributes_saved_input(t, p),
            "contiguous_memory_optimization": False}
        notes.append(f"recompute={p.recompute}: wrap the model's layers with "
                     "deepspeed.checkpointing.checkpoint (DeepSpeed does not choose them) and "
                     "call deepspeed.checkpointing.configure(mpu, deepspeed_config=...) with "
                     "this config, which applies its activation_checkpointing section only so")
        if cfg["activation_checkpointing"]["partition_activations"]:
            notes.append("partition_activations: pass an mpu whose model-parallel group is the "
                         f"{p.tp} tensor-parallel ranks to deepspeed.checkpointing.configure, "
                         "over which the checkpointed inputs are split")
    return cfg, notes
