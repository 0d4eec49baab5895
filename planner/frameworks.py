"""Which frameworks run a plan as predicted: the capability matrix, as data, and its rules.

Each capability names, per framework, whether it is supported, the framework's own argument or
config key, and the source file that defines it (read in Megatron-LM d98e8a6 of 2026-08-22,
torchtitan's last release v0.2.2 of 2026-02-20, DeepSpeed 0.19.6). A plan runs "as predicted" on
a framework when the framework can express every part of it *and* executes it the way the step
model costs it (e.g. torchtitan's FSDP without resharding gathers the weights every micro-batch,
which is not the planner's ZeRO-2, so such plans are not listed for torchtitan).

``rules_mask`` checks plans as arrays over their rules' inputs (``rules_context``; the
search filters its whole space with it, ``search.space.runs_on``), ``runs_mask`` in one call;
``reasons_by_framework`` gives one plan's reasons in words; ``frameworks_for`` lists the
frameworks with none;
``refusal_rules`` and ``capability_matrix`` give the rules and the matrix as data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from planner.specs.plan import microbatch_groups
from planner.specs.training import reduced_after_backward

Framework = Literal["megatron", "torchtitan", "deepspeed"]
FRAMEWORKS: tuple[Framework, ...] = ("megatron", "torchtitan", "deepspeed")
# What a search may ask for: one framework, or "any" plan the step model costs, whether or not
# a framework of today runs it as predicted (to replay published runs of older software).
ANY_FRAMEWORK = "any"
FrameworkChoice = Framework | Literal["any"]

MEGATRON = "NVIDIA/Megatron-LM"
TITAN = "pytorch/torchtitan v0.2.2"
DEEPSPEED = "deepspeedai/DeepSpeed 0.19.6"


@dataclass(frozen=True)
class Support:
    status: Literal["yes", "no", "partial"]
    how: str            # the framework's flag or config key (verbatim)
    source: str         # where it is defined
    note: str = ""


def _s(status, how, source, note=""):
    return Support(status, how, source, note)


CAPABILITIES: dict[str, dict[str, Support]] = {
    "data_parallel": {
        "megatron": _s("yes", "world / (tp * pp * cp)", f"{MEGATRON} megatron/training/arguments.py"),
        "torchtitan": _s("yes", "parallelism.data_parallel_replicate_degree / "
                         "data_parallel_shard_degree", f"{TITAN} torchtitan/config/job_config.py",
                         "pure replicated DP (DDP) only when no other parallelism is used, "
                         "and with one micro-batch a step: its replicate() all-reduces every "
                         "micro-batch's gradients (torchtitan never turns the sync off)"),
        "deepspeed": _s("yes", "world / model-parallel size", f"{DEEPSPEED} deepspeed/runtime/engine.py"),
    },
    "zero_1": {
        "megatron": _s("yes", "--use-distributed-optimizer", f"{MEGATRON} megatron/training/arguments.py"),
        "torchtitan": _s("partial", "parallelism.data_parallel_shard_degree with "
                         'pipeline_parallel_degree > 1, fsdp_reshard_after_forward = "default"',
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "FSDP has no optimizer-only sharding, but under a pipeline it runs as "
                         "ZeRO-1: apply_fsdp does not reshard after forward when PP is on, "
                         "and torch.distributed.pipelining reduce-scatters the gradients at "
                         "the last micro-batch (stage.py backward_maybe_with_nosync)"),
        "deepspeed": _s("yes", "zero_optimization.stage = 1",
                        f"{DEEPSPEED} deepspeed/runtime/zero/config.py"),
    },
    "zero_2": {
        "megatron": _s("partial", "--use-megatron-fsdp --data-parallel-sharding-strategy "
                       "optim_grads", f"{MEGATRON} megatron/training/arguments.py",
                       "Megatron-FSDP is documented without pipeline parallelism"),
        "torchtitan": _s("partial", 'parallelism.fsdp_reshard_after_forward = "never"',
                         f"{TITAN} torchtitan/config/job_config.py",
                         "gathers the weights every micro-batch: the planner's ZeRO-2 only "
                         "with one micro-batch"),
        "deepspeed": _s("partial", "zero_optimization.stage = 2",
                        f"{DEEPSPEED} deepspeed/runtime/zero/config.py",
                        "not with the pipeline engine"),
    },
    "zero_3": {
        "megatron": _s("partial", "--use-megatron-fsdp --data-parallel-sharding-strategy "
                       "optim_grads_params", f"{MEGATRON} megatron/training/arguments.py",
                       "Megatron-FSDP is documented without pipeline parallelism"),
        "torchtitan": _s("partial", 'parallelism.data_parallel_shard_degree, '
                         'fsdp_reshard_after_forward = "always"', f"{TITAN} torchtitan/config/job_config.py",
                         "FSDP2 shards each parameter: its gathers and reduce-scatters copy "
                         "on the compute stream (training.zero3_per_parameter); not with a "
                         "pipeline (pipelining defers the reduce-scatter to after the stage's "
                         "last backward: ZeRO-1)"),
        "deepspeed": _s("partial", "zero_optimization.stage = 3",
                        f"{DEEPSPEED} deepspeed/runtime/zero/config.py",
                        "not with the pipeline engine; with AutoTP from 0.19.4"),
    },
    "hybrid_sharding": {
        "megatron": _s("yes", "--num-distributed-optimizer-instances (Megatron-FSDP: with "
                       "--outer-dp-sharding-strategy no_shard, its default)",
                       f"{MEGATRON} megatron/core/distributed/param_and_grad_buffer.py, "
                       "megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py",
                       "each bucket reduce-scattered inside an instance, its shard all-reduced "
                       "across the instances at the last micro-batch"),
        "torchtitan": _s("partial", "parallelism.data_parallel_replicate_degree",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "without a pipeline FSDP2 all-reduces across the replicas every "
                         "micro-batch (torchtitan never calls set_requires_all_reduce(False)): "
                         "costed so with training.hsdp_all_reduce_every_microbatch, which a "
                         "torchtitan search sets; under a pipeline as ZeRO-1, whose schedule "
                         "reduces at the last micro-batch (torch.distributed.pipelining "
                         "stage.py backward_maybe_with_nosync)"),
        "deepspeed": _s("partial", "zero_optimization.mics_shard_size",
                        f"{DEEPSPEED} deepspeed/runtime/zero/mics.py",
                        "MiCS: ZeRO-3 only, its shard groups consecutive global ranks (no "
                        "AutoTP); the replicas all-reduce at the accumulation boundary"),
    },
    "tensor_parallel": {
        "megatron": _s("yes", "--tensor-model-parallel-size",
                       f"{MEGATRON} megatron/core/model_parallel_config.py"),
        "torchtitan": _s("partial", "parallelism.tensor_parallel_degree",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "always with sequence parallelism"),
        "deepspeed": _s("partial", 'tensor_parallel.autotp_size',
                        f"{DEEPSPEED} deepspeed/runtime/tensor_parallel/config.py",
                        "AutoTP (>= 0.16.4): no sequence parallelism, not with the pipeline engine"),
    },
    "sequence_parallel": {
        "megatron": _s("yes", "--sequence-parallel", f"{MEGATRON} megatron/core/model_parallel_config.py"),
        "torchtitan": _s("yes", "(always on with tensor_parallel_degree > 1)",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/module_inject/auto_tp.py",
                        "DeepSpeed's sequence parallelism is Ulysses, not Megatron's"),
    },
    "pipeline_parallel": {
        "megatron": _s("yes", "--pipeline-model-parallel-size",
                       f"{MEGATRON} megatron/core/model_parallel_config.py",
                       "sends the whole activation unless sequence parallelism splits it "
                       "(megatron/core/pipeline_parallel/schedules.py)"),
        "torchtitan": _s("yes", "parallelism.pipeline_parallel_degree",
                         f"{TITAN} torchtitan/config/job_config.py"),
        "deepspeed": _s("partial", 'PipelineModule(num_stages=...); "pipeline": {"stages"}',
                        f"{DEEPSPEED} deepspeed/runtime/pipe/module.py",
                        "ZeRO <= 1 (engine.py asserts), even layer partition, no TP"),
    },
    "interleaved_schedule": {
        "megatron": _s("yes", "--num-virtual-stages-per-pipeline-rank, "
                       "--microbatch-group-size-per-virtual-pipeline-stage, "
                       "--no-overlap-p2p-communication",
                       f"{MEGATRON} megatron/core/pipeline_parallel/schedules.py",
                       "pp <= group <= micro-batches; last group 0 or >= pp"),
        "torchtitan": _s("partial", 'parallelism.pipeline_parallel_schedule = "Interleaved1F1B"',
                         f"{TITAN} torch/distributed/pipelining/schedules.py",
                         "Megatron's schedule with micro-batch groups of m / max(1, m // pp) "
                         "(its rounds), where the rounds divide the micro-batches"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/pipe/schedule.py", "1F1B only"),
    },
    "uneven_stages": {
        "megatron": _s("yes", "--decoder-first-pipeline-num-layers / "
                       "--decoder-last-pipeline-num-layers, --account-for-embedding-in-pipeline-"
                       "split / --account-for-loss-in-pipeline-split, "
                       "--pipeline-model-parallel-layout",
                       f"{MEGATRON} megatron/training/arguments.py"),
        "torchtitan": _s("yes", "parallelism.module_fqns_per_model_part, "
                         "pipeline_parallel_first_stage_less_layers / "
                         "pipeline_parallel_last_stage_less_layers",
                         f"{TITAN} torchtitan/distributed/pipeline_parallel.py"),
        "deepspeed": _s("no", 'PipelineModule(partition_method="uniform")',
                        f"{DEEPSPEED} deepspeed/runtime/pipe/module.py",
                        "partitions by a method, not by given counts"),
    },
    "fewer_microbatches_than_stages": {
        "megatron": _s("yes", "(1F1B clamps its warm-up)",
                       f"{MEGATRON} megatron/core/pipeline_parallel/schedules.py",
                       "not with the interleaved schedule"),
        "torchtitan": _s("partial", 'parallelism.pipeline_parallel_schedule = "GPipe"',
                         "torch/distributed/pipelining/schedules.py (PyTorch 2.13)",
                         "Schedule1F1B refuses it; ScheduleGPipe runs every forward before "
                         "any backward, so each stage holds all m micro-batches where the "
                         "plan's 1F1B memory holds min(pp - i, m): one micro-batch only"),
        "deepspeed": _s("yes", "gradient_accumulation_steps",
                        f"{DEEPSPEED} deepspeed/runtime/pipe/engine.py"),
    },
    "context_parallel": {
        "megatron": _s("yes", "--context-parallel-size, --cp-comm-type p2p, a2a or a2a+p2p "
                       "(--hierarchical-context-parallel-sizes)",
                       f"{MEGATRON} megatron/core/model_parallel_config.py, "
                       "megatron/core/transformer/transformer_config.py, "
                       "megatron/core/parallel_state.py",
                       "Transformer Engine's ring (p2p, training.ring_attention 'te'), its "
                       "all-to-all (a2a, DeepSpeed-Ulysses' scheme, ring_attention 'a2a') or "
                       "both (a2a+p2p: all-to-alls over cp_a2a_size consecutive CP ranks, the "
                       "ring over the groups, ring_attention 'a2a+p2p')"),
        "torchtitan": _s("yes", "parallelism.context_parallel_degree",
                         f"{TITAN} torchtitan/distributed/context_parallel.py",
                         "PyTorch's ring with its default rotation, the K,V all-gather "
                         "(training.ring_attention 'torch_allgather'): v0.2.2's training path "
                         "never applies context_parallel_rotate_method (only validate.py's "
                         "create_context_parallel_ctx calls set_rotate_method); with ZeRO, "
                         "since it shards the weights over the CP ranks whenever cp > 1"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/sequence/layer.py",
                        "no ring attention; Ulysses' all-to-all is DistributedAttention, which "
                        "the model code wraps around its attention (not a config key)"),
    },
    "recompute_full": {
        "megatron": _s("yes", "--recompute-granularity full --recompute-method uniform "
                       "--recompute-num-layers 1",
f"{MEGATRON} megatron/core/transformer/transformer_config.py"),
        "torchtitan": _s("yes", 'activation_checkpoint.mode = "full"',
                         f"{TITAN} torchtitan/config/job_config.py"),
        "deepspeed": _s("yes", "activation_checkpointing + deepspeed.checkpointing.checkpoint",
                        f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/config.py"),
    },
    "recompute_early_stop": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/tensor_parallel/random.py",
                       "CheckpointFunction reruns the whole forward (reentrant)"),
        "torchtitan": _s("yes", "activation_checkpoint.early_stop = true",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "false by default since August 2025 (torchtitan#1580)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/"
                        "checkpointing.py", "CheckpointFunction reruns the whole forward"),
    },
    "distribute_saved_activations": {
        "megatron": _s("yes", "--distribute-saved-activations",
                       f"{MEGATRON} megatron/core/tensor_parallel/random.py",
                       "tensor parallelism without sequence parallelism, full recompute "
                       "(megatron/training/arguments.py, transformer_config.py)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/distributed/activation_checkpoint.py",
                         "its tensor parallelism always splits the sequence"),
        "deepspeed": _s("partial", "activation_checkpointing.partition_activations",
                        f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/"
                        "checkpointing.py", "partitions over the model-parallel group of the "
                        "mpu given to deepspeed.checkpointing.configure: the layers "
                        "checkpointed through deepspeed.checkpointing.checkpoint, the TP "
                        "group passed as that mpu"),
    },
    "recompute_head": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/transformer/transformer_block.py",
                       "full recompute checkpoints the transformer layers "
                       "(_checkpointed_forward); the embedding and the output layer run once"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/distributed/activation_checkpoint.py",
                         "apply_ac wraps each TransformerBlock; the embedding, final norm and "
                         "output run once"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/pipe/module.py",
                        "PipelineModule._is_checkpointable: GPTModelPipe checkpoints its "
                        "transformer layers only, a generic PipelineModule every layer with "
                        "parameters, the head among them"),
    },
    "cpu_offload": {
        "megatron": _s("yes", "--cpu-offloading-num-layers N",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py",
                       "Transformer Engine's CPU offload of the first N layers' activations; "
                       "no pipeline parallelism, no recompute"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/config/job_config.py",
                         "activation checkpointing only; no activation offloading"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/"
                        "config.py", "cpu_checkpointing offloads checkpoints under recompute, "
                        "not a layer's activations without it"),
    },
    "eager_elementwise": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/training/arguments.py",
                       "RoPE and SwiGLU run fused (--no-rope-fusion and --no-bias-swiglu-fusion "
                       "unfuse them into other kernels than torchtitan's eager ones)"),
        "torchtitan": _s("yes", "compile.enable = false", f"{TITAN} torchtitan/config/job_config.py",
                         "the model code's ops one kernel at a time"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the model code's kernels, whichever they are"),
    },
    "dropout": {
        "megatron": _s("yes", "--attention-dropout / --hidden-dropout",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py",
                       "both default to 0.1: the planner passes 0.0 unless training.dropout"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/llama3/model/model.py",
                         "its decoder models (llama3, llama4, qwen3, deepseek_v3, gpt_oss) have "
                         "no dropout layers"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the model code's dropout, whichever it is (Megatron-DeepSpeed: "
                        "--attention-dropout, --hidden-dropout)"),
    },
    "recompute_partial": {
        "megatron": _s("yes", "--recompute-granularity full --recompute-method block "
                       "--recompute-num-layers N", f"{MEGATRON} megatron/core/recompute.py"),
        "torchtitan": _s("no", 'activation_checkpoint.selective_ac_option = "<n>"',
                         f"{TITAN} torchtitan/config/job_config.py",
                         "layer-level checkpointing wraps every n-th block, not the first N of "
                         "each pipeline chunk"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/config.py",
                        "the model's own code chooses which layers to checkpoint"),
    },
    "recompute_selective": {
        "megatron": _s("partial", "--recompute-granularity selective --recompute-modules "
                       "<training.recompute_modules> (default core_attn)",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py",
                       'training.selective_recompute = "modules"'),
        "torchtitan": _s("partial", 'activation_checkpoint.mode = "selective", '
                         'selective_ac_option = "op"',
                         f"{TITAN} torchtitan/config/job_config.py, "
                         "torchtitan/distributed/activation_checkpoint.py",
                         'training.selective_recompute = "per_op": keeps the matmul outputs '
                         "but every second one and the attention kernel's, recomputes the rest"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/activation_checkpointing/config.py"),
    },
    "fp8": {
        "megatron": _s("yes", "--fp8-format hybrid --fp8-recipe "
                       "delayed|tensorwise|blockwise|mxfp8",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py",
                       "'mxfp8' for Blackwell architecture only"),
        "torchtitan": _s("yes", 'model.converters = ["quantize.linear.float8"] or '
                         '["quantize.linear.mx"] with quantize.linear.mx.recipe_name = '
                         '"mxfp8_cublas"',
                         f"{TITAN} torchtitan/components/quantization/float8.py, mx.py",
                         "torchao scales each tensor by its current amax (delayed scaling was "
                         "removed, pytorch/ao#1680): training.fp8_recipe 'tensorwise'; or "
                         "MXFP8 (training.fp8_recipe 'mxfp8', SM100 and later, the experts' "
                         "grouped GEMMs through quantize.grouped_mm.mx, no tensor parallelism "
                         "under torch.compile)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/constants.py", "no fp8 in the engine"),
    },
    "fp4": {
        "megatron": _s("yes", "--fp4-format e2m1 --fp4-recipe nvfp4 [--fp4-param-gather]",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py",
                       "Transformer Engine's NVFP4BlockScaling (TE >= 2.7), Blackwell"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/components/quantization/",
                         "its quantisation converters run float8 and MXFP8 (docs/mxfp8.md)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/constants.py",
                        "no fp4 in the engine"),
    },
    "fp8_param_gather": {
        "megatron": _s("partial", "--fp8-param-gather",
                       f"{MEGATRON} megatron/training/arguments.py, "
                       "megatron/core/distributed/distributed_data_parallel_config.py",
                       "with the distributed optimizer or Megatron-FSDP ('--fp8-param-gather "
                       "only supported with distributed optimizer, torch fsdp2, megatron "
                       "fsdp'); under --use-torch-fsdp2 it is turned off from Transformer "
                       "Engine 2.0"),
        "torchtitan": _s("partial", "quantize.linear.float8.enable_fsdp_float8_all_gather = true",
                         f"{TITAN} torchtitan/config/job_config.py, "
                         "torchtitan/components/quantization/float8.py",
                         "only where FSDP shards the weights (parallel_dims.dp_shard_enabled), "
                         "with tensorwise scaling, dense models (the experts' grouped GEMMs are "
                         "not Float8Linear)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/constants.py", "no fp8 in the engine"),
    },
    "fp16": {
        "megatron": _s("yes", "--fp16", f"{MEGATRON} megatron/core/model_parallel_config.py"),
        "torchtitan": _s("no", "training.mixed_precision_param", f"{TITAN} torchtitan/config/job_config.py",
                         "bfloat16 or float32 only"),
        "deepspeed": _s("yes", "fp16.enabled", f"{DEEPSPEED} deepspeed/runtime/constants.py"),
    },
    "expert_parallel": {
        "megatron": _s("yes", "--num-experts, --moe-router-topk, --expert-model-parallel-size",
                       f"{MEGATRON} megatron/core/transformer/transformer_config.py, "
                       "megatron/core/parallel_state.py",
                       "experts fold into tp * cp * dp (world % (etp * ep * pp) == 0); "
                       "--moe-token-dispatcher-type alltoall"),
        "torchtitan": _s("partial", "parallelism.expert_parallel_degree",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "EP borrows ranks from FSDP and TP: etp = 1 needs ep a multiple of "
                         "cp * tp within dp_shard * cp * tp; etp = tp needs ep a multiple of "
                         "cp within dp_shard * cp"),
        "deepspeed": _s("partial", '"expert_parallel": {"enabled": true, "autoep_size": ep}',
                        f"{DEEPSPEED} deepspeed/module_inject/auto_ep_config.py, "
                        "auto_ep_layer.py, auto_ep_folding.py",
                        "AutoEP (from 0.19.2; with ZeRO-3 from 0.19.3) replaces a Hugging Face "
                        "MoE model's experts at deepspeed.initialize: etp 1 only; EP groups of "
                        "ep consecutive ranks, expert gradients reduced over the others; k "
                        "copies of each token through all_to_all_single, not overlapped; "
                        "grouped expert GEMMs. Not with AutoTP (its folding all-gathers the "
                        "experts' outputs over the TP ranks, not costed) nor pipelines (its "
                        "presets match model.layers.N.mlp, which a PipelineModule has not) "
                        "nor MiCS; ZeRO-1/2 keep reduce_scatter on (its MoE path asserts it)"),
    },
    "expert_tensor_parallel": {
        "megatron": _s("yes", "--expert-tensor-parallel-size",
                       f"{MEGATRON} megatron/core/model_parallel_config.py",
                       "defaults to tp; the planner passes it always"),
        "torchtitan": _s("partial", "parallelism.expert_tensor_parallel_degree",
                         f"{TITAN} torchtitan/config/job_config.py", "1 or tp only"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/moe/layer.py"),
    },
    "moe_deepep_dispatch": {
        "megatron": _s("yes", "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
                       "deepep", f"{MEGATRON} megatron/core/transformer/transformer_config.py"),
        "torchtitan": _s("yes", 'parallelism.expert_parallel_comm_backend = "deepep"',
                         f"{TITAN} torchtitan/config/job_config.py"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/moe/sharded_moe.py"),
    },
    "moe_a2a_overlap": {
        "megatron": _s("partial", "--overlap-moe-expert-parallel-comm --delay-wgrad-compute",
                       f"{MEGATRON} megatron/core/model_parallel_config.py, "
                       "transformer_config.py",
                       "needs ep > 1, no full recompute, and interleaving when pp > 1"),
        "torchtitan": _s("no", "parallelism.pipeline_parallel_expert_parallel_overlap",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "only inside the DualPipeV schedule"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/moe/sharded_moe.py"),
    },
    "moe_token_copies": {
        "megatron": _s("partial", "--moe-permute-fusion",
                       f"{MEGATRON} megatron/core/transformer/moe/moe_utils.py",
                       "training.moe_routing 'fused': Transformer Engine's fused permute and "
                       "unpermute, and the all-to-all dispatcher's sorts by local expert "
                       "(sort_chunks_by_idxs, moe_routing.chunk_sort_bytes); the unfused "
                       "default's separate weighting and scatter-add are not costed"),
        "torchtitan": _s("yes", "(its MoE layer's own)",
                         f"{TITAN} torchtitan/models/moe/moe.py, utils.py",
                         "training.moe_routing 'torchtitan': eager gathers, a padded "
                         "permutation and an fp32 combine (its standard backend; under DeepEP "
                         "its wrapper's copies, costed as fused)"),
        "deepspeed": _s("partial", "(AutoEP's layer)",
                        f"{DEEPSPEED} deepspeed/module_inject/auto_ep_layer.py",
                        "training.moe_routing 'autoep' where ep > 1; at ep 1 the model's own "
                        "MoE blocks, costed as fused"),
    },
    "moe_expert_gemm": {
        "megatron": _s("partial", "--moe-grouped-gemm",
                       f"{MEGATRON} megatron/core/transformer/moe/experts.py (TEGroupedMLP)",
                       "per_expert only: Transformer Engine's GroupedLinear launches one cuBLAS "
                       "GEMM per local expert; the legacy GroupedMLP (one grouped kernel) was "
                       "removed after core_v0.16"),
        "torchtitan": _s("partial", "MoEArgs(use_grouped_mm=True)",
                         f"{TITAN} torchtitan/models/moe/moe.py",
                         "grouped only: torch._grouped_mm; use_grouped_mm is a model flavor "
                         "argument, not a config option"),
        "deepspeed": _s("partial", "deepspeed.moe.experts.Experts; AutoEP's use_grouped_mm",
                        f"{DEEPSPEED} deepspeed/moe/experts.py, "
                        "deepspeed/moe/ep_experts.py",
                        "per_expert without expert parallelism (a loop over the experts); "
                        "grouped under AutoEP (ep > 1: torch._grouped_mm on Hopper and newer, "
                        "its Triton grouped GEMM before)"),
    },
    "moe_tensor_parallel": {
        "megatron": _s("partial", "--sequence-parallel",
                       f"{MEGATRON} megatron/core/transformer/moe/moe_layer.py",
                       "MoE layers with tp > 1 raise during training without sequence "
                       "parallelism"),
        "torchtitan": _s("yes", "(sequence parallelism always on with TP)",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/moe/layer.py"),
    },
    "low_precision_optimizer_states": {
        "megatron": _s("yes", "--use-precision-aware-optimizer --exp-avg-dtype "
                       "--exp-avg-sq-dtype", f"{MEGATRON} megatron/training/arguments.py",
                       "Transformer Engine's FusedAdam; fp32 master weights kept; only "
                       "with the distributed optimizer (megatron/core/optimizer/__init__.py)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/config/job_config.py",
                         "no optimizer-state dtype option"),
        "deepspeed": _s("no", "bf16.bf16_optimizer_states",
                        f"{DEEPSPEED} deepspeed/runtime/precision_config.py",
                        "only with bf16_master_weights_and_grads (bf16 master weights)"),
    },
    "no_master_weights": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/training/arguments.py",
                       "main parameters are kept in fp32, or in fp16 with "
                       "--use-precision-aware-optimizer --main-params-dtype: a copy either way"),
        "torchtitan": _s("yes", "training.dtype = \"bfloat16\"",
                         f"{TITAN} torchtitan/config/job_config.py, torchtitan/train.py",
                         "parameters, gradients and optimizer states all in bf16; FSDP2 "
                         "reduces in mixed_precision_reduce (float32) and casts back"),
        "deepspeed": _s("no", "bf16.bf16_master_weights_and_grads",
                        f"{DEEPSPEED} deepspeed/runtime/precision_config.py",
                        "keeps a bf16 master copy beside the bf16 weights"),
    },
    "multi_token_prediction": {
        "megatron": _s("yes", "--mtp-num-layers", f"{MEGATRON} "
                       "megatron/core/transformer/transformer_config.py, "
                       "megatron/core/transformer/multi_token_prediction.py",
                       "on the last pipeline stage unless --pipeline-model-parallel-layout "
                       "places 'm' elsewhere"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/deepseek_v3/model.py",
                         "added after v0.2.2 (torchtitan/models/deepseek_v3/mtp.py)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "a model-code feature; the engine has no MTP option"),
    },
    "blocking_tp_allreduce": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/tensor_parallel/layers.py",
                       "the input gradient's all-reduce is issued async_op=True before the "
                       "weight-gradient GEMM and waited for after it (no flag turns it off)"),
        "torchtitan": _s("yes", "parallelism.enable_async_tensor_parallel = false",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "sequence-parallel TP through DTensor: PrepareModuleInput gathers the "
                         "norm's output to Replicate, the column-parallel layers keep it, and "
                         "its gradient is reduce-scattered before the backward goes on "
                         "(training.async_tensor_model_parallel_allreduce false)"),
        "deepspeed": _s("yes", "tensor_parallel.tp_overlap_comm = false (the default)",
                        f"{DEEPSPEED} deepspeed/module_inject/layers.py",
                        "AutoTP's ColumnParallel.backward all-reduces the input gradient "
                        "synchronously, after the layer's weight gradient "
                        "(training.async_tensor_model_parallel_allreduce false); with "
                        "tp_overlap_comm true (from 0.16.6) AsyncColumnParallel issues it "
                        "async_op=True after the input-gradient GEMM and waits after the "
                        "weight-gradient GEMM, as Megatron-Core does (the flag true)"),
    },
    "tp_comm_overlap": {
        "megatron": _s("partial", "--tp-comm-overlap", f"{MEGATRON} megatron/training/arguments.py, "
                       "megatron/training/initialize.py",
                       "Transformer Engine's userbuffers (training.tp_comm_overlap 'te'); "
                       "refused without --sequence-parallel ('Tensor parallel "
                       "communication/GEMM overlap can happen only when sequence parallelism "
                       "is enabled')"),
        "torchtitan": _s("partial", "parallelism.enable_async_tensor_parallel = true",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "AsyncTP through symmetric memory (training.tp_comm_overlap "
                         "'async_tp'); refused without torch.compile ('Async TP requires "
                         "torch.compile')"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/module_inject/layers.py",
                        "AutoTP's tp_overlap_comm issues the backward's input-gradient "
                        "all-reduce asynchronously; nothing pipelines the collectives with the "
                        "GEMMs"),
    },
    "mixed_precision_without_sharding": {
        "megatron": _s("yes", "--bf16 / --fp16", f"{MEGATRON} megatron/training/arguments.py",
                       "16-bit training whatever the parallelism"),
        "torchtitan": _s("partial", "training.mixed_precision_param",
                         f"{TITAN} torchtitan/distributed/utils.py",
                         "FSDP applies the mixed precision, autocast only DDP or one GPU: with "
                         "TP or PP and nothing FSDP-sharded (dp shard x cp = 1) it trains in "
                         "fp32 (maybe_enable_amp), unless the whole model is bf16 "
                         "(training.dtype = \"bfloat16\": training.master_weights false)"),
        "deepspeed": _s("yes", "bf16.enabled / fp16.enabled", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "16-bit training whatever the parallelism"),
    },
    "separate_column_parallel_inputs": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/transformer/mlp.py",
                       "one QKV GEMM (attention.py linear_qkv) and one fc1 GEMM a layer "
                       "(mlp.py doubles linear_fc1's width for a gated unit): two input "
                       "gradients all-reduced without sequence parallelism "
                       "(training.tp_column_parallel_inputs 2)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "tensor parallelism always runs with sequence parallelism, which "
                         "gathers a block's input once"),
        "deepspeed": _s("yes", "tensor_parallel.autotp_size",
                        f"{DEEPSPEED} deepspeed/module_inject/auto_tp.py",
                        "AutoTP wraps every Hugging Face linear but o_proj and down_proj in a "
                        "LinearLayer whose ColumnParallel backward all-reduces its input "
                        "gradient: five a Llama-family layer (q, k, v, gate, up; "
                        "training.tp_column_parallel_inputs 5, what a DeepSpeed search of a "
                        "dense SwiGLU model costs)"),
    },
    "microbatch_gradient_copy": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/tensor_parallel/layers.py",
                       "gradient accumulation fusion: the weight-gradient GEMMs write into "
                       "the fp32 main_grad"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/distributed/utils.py",
                         "autograd accumulates the gradients in place; under a pipeline FSDP2 "
                         "accumulates them in fp32 (microbatch_gradient_upcast)"),
        "deepspeed": _s("yes", "data_types.grad_accum_dtype = fp32, ZeRO-1",
                        f"{DEEPSPEED} deepspeed/runtime/bf16_optimizer.py",
                        "every micro-batch's 16-bit gradients are added into fp32 ones, "
                        "parameter by parameter (BF16_Optimizer; fp16's grad_accum in "
                        "zero/stage_1_and_2.py): training.microbatch_grad_copy"),
    },
    "microbatch_gradient_upcast": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/tensor_parallel/layers.py",
                       "gradient accumulation fusion: the weight-gradient GEMMs write into "
                       "the fp32 main_grad"),
        "torchtitan": _s("yes", "(FSDP under a pipeline; training.mixed_precision_reduce "
                         "\"float32\", its only choice)",
                         f"{TITAN} torch/distributed/fsdp/_fully_shard/_fsdp_param.py",
                         "torch.distributed.pipelining turns gradient sync off for every "
                         "backward, so FSDP2 keeps the unsharded gradients and adds each "
                         "micro-batch's bf16 ones into fp32 (to_accumulated_grad_if_needed, "
                         "accumulate_unsharded_grad_if_needed): "
                         "training.microbatch_grad_upcast"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/bf16_optimizer.py",
                        "its own fp32 accumulation: training.microbatch_grad_copy"),
    },
    "attention_kernel": {
        "megatron": _s("partial", "--attention-backend flash",
                       f"{MEGATRON} megatron/training/arguments.py",
                       "FlashAttention through Transformer Engine for training.attention_kernel "
                       "'flash2' (auto, the GPU's default kernel, otherwise); no FlashAttention "
                       "v1 or Triton kernel"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/attention.py",
                         "SDPA with its cuDNN, flash and math backends in that order: the GPU's "
                         "default kernel"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the attention kernel is the model code's, not the engine's"),
    },
    "grouped_query_attention": {
        "megatron": _s("yes", "--group-query-attention --num-query-groups",
                       f"{MEGATRON} megatron/training/arguments.py",
                       "K and V at their own head count through Transformer Engine's attention "
                       "and ring (training.repeat_kv false)"),
        "torchtitan": _s("yes", "(the model's n_kv_heads)",
                         f"{TITAN} torchtitan/models/llama3/model/model.py",
                         "SDPA with enable_gqa: K and V at their own head count, in PyTorch's "
                         "ring attention too (training.repeat_kv false; through v0.2.1 its "
                         "repeat_kv expanded them to every query head)"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the model code's attention: where it expands K and V to every query "
                        "head (Hugging Face's eager attention, repeat_kv), training.repeat_kv"),
    },
    "softmax_fusion": {
        "megatron": _s("yes", "--transformer-impl local --no-masked-softmax-fusion",
                       f"{MEGATRON} megatron/training/arguments.py",
                       "'Disable fusion of query_key_value scaling, masking, and softmax' in "
                       "Megatron-Core's own DotProductAttention, which the local "
                       "implementation builds (training.softmax_fusion false)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/attention.py",
                         "attention is SDPA or FlexAttention: the softmax runs inside the kernel"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the attention is the model code's, fused or not"),
    },
    "norm_fusion": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/models/backends.py",
                       "norms are Transformer Engine's or Apex's fused kernels, or "
                       "torch.nn.RMSNorm without Apex: no flag runs the reference eager RMSNorm "
                       "(training.norm_fusion false)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/models/llama3/model/model.py",
                         "the norms are torch.nn.RMSNorm, fused under torch.compile; the "
                         "reference eager RMSNorm (norm_type 'rmsnorm') left in 2025"),
        "deepspeed": _s("partial", "", f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "the norms are the model code's, fused or not"),
    },
    "vocab_parallel_loss": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/tensor_parallel/cross_entropy.py",
                       "the loss is always the vocab-parallel cross-entropy "
                       "(training.vocab_parallel_loss false)"),
        "torchtitan": _s("no", "parallelism.disable_loss_parallel",
                         f"{TITAN} torchtitan/config/job_config.py",
                         "without loss parallel DTensor gathers the logits into one buffer "
                         "(no per-rank copies) before its fp32 loss; not costed so"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/module_inject/auto_tp.py",
                        "AutoTP leaves every TP rank the whole logits (LmHeadLinearAllreduce "
                        "all-reduces a row-parallel head's output; a head wrapped as a "
                        "LinearLayer gathers its output), so the model code's loss runs over "
                        "the full vocabulary (training.vocab_parallel_loss false, which a "
                        "DeepSpeed search sets)"),
    },
    "zero_grad_allreduce": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/distributed/param_and_grad_buffer.py",
                       "the distributed optimizer reduce-scatters the gradients "
                       "(training.zero_grad_allreduce false)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/config/job_config.py",
                         "FSDP2 reduce-scatters the gradients"),
        "deepspeed": _s("yes", "(always: zero_optimization.use_multi_rank_bucket_allreduce, "
                        "true by default)", f"{DEEPSPEED} deepspeed/runtime/zero/stage_1_and_2.py",
                        "since 0.12.4 average_tensor all-reduces each bucket even with "
                        "reduce_scatter true (the ranks' slices combined and sent through "
                        "allreduce_and_scatter: use_multi_rank_bucket_allreduce, "
                        "zero/config.py), and with reduce_scatter false too "
                        "(gradient_reduction_w_predivide): it runs ZeRO-1/2 plans only costed "
                        "with training.zero_grad_allreduce, which a DeepSpeed search sets"),
    },
    "grad_reduce_dtype": {
        "megatron": _s("no", "", f"{MEGATRON} megatron/core/distributed/distributed_data_parallel_config.py",
                       "grad_reduce_in_fp32 sets the gradient buffer and the reduction together "
                       "(training.grad_dtype)"),
        "torchtitan": _s("no", "", f"{TITAN} torchtitan/config/job_config.py",
                         "FSDP2 reduces in mixed_precision_reduce and keeps the sharded "
                         "gradients so (training.grad_dtype)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/constants.py",
                        "communication_data_type and data_types.grad_accum_dtype exist, but its "
                        "bf16 optimizer accumulates in fp32; not costed"),
    },
    "grad_reduce_overlap": {
        "megatron": _s("yes", "--overlap-grad-reduce",
                       f"{MEGATRON} megatron/core/distributed/distributed_data_parallel.py"),
        "torchtitan": _s("partial", "FSDP2 / DDP (apply_fsdp, apply_ddp)",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "reduces during the backward: FSDP2 per layer, DDP per bucket; under "
                         "a pipeline FSDP reduces after each stage's last backward "
                         "(torch.distributed.pipelining stage.py perform_reduce_grad): costed "
                         "so with training.grad_reduce_after_last_backward, which a torchtitan "
                         "search sets"),
        "deepspeed": _s("partial", "zero_optimization.overlap_comm",
                        f"{DEEPSPEED} deepspeed/runtime/engine.py",
                        "only with ZeRO-1/2/3 outside the pipeline engine: without ZeRO the engine "
                        "all-reduces after the backward (_backward_epilogue -> "
                        "allreduce_gradients -> buffered_allreduce_fallback), the pipeline "
                        "engine at the end of the schedule (ReduceGrads), and ZeRO-1 with bf16 "
                        "weights and fp32 gradients runs as BF16_Optimizer, which reduces "
                        "after the backward too"),
    },
    "param_gather_overlap": {
        "megatron": _s("yes", "--overlap-param-gather",
                       f"{MEGATRON} megatron/core/distributed/distributed_data_parallel.py",
                       "with the distributed optimizer: each bucket's gather runs ahead of the "
                       "next forward that needs it"),
        "torchtitan": _s("partial", "FSDP2 prefetch",
                         f"{TITAN} torchtitan/models/llama3/infra/parallelize.py",
                         "FSDP2 gathers layer by layer ahead of the forward (its ZeRO-2 with "
                         "one micro-batch)"),
        "deepspeed": _s("no", "", f"{DEEPSPEED} deepspeed/runtime/zero/stage_1_and_2.py",
                        "ZeRO-1/2 gather the updated weights at the end of the optimizer step, "
                        "before the next forward (step: all_gather_dp_groups)"),
    },
    "bf16_gradient_reduce": {
        "megatron": _s("yes", "--grad-reduce-in-bf16", f"{MEGATRON} megatron/training/arguments.py"),
        "torchtitan": _s("no", "training.mixed_precision_reduce", f"{TITAN} torchtitan/config/job_config.py",
                         "float32 only"),
        "deepspeed": _s("yes", "communication_data_type", f"{DEEPSPEED} deepspeed/runtime/constants.py"),
    },
}


def capability_matrix() -> dict[str, dict[str, dict]]:
    """The matrix as plain data (JSON)."""
    return {cap: {fw: asdict(s) for fw, s in row.items()} for cap, row in CAPABILITIES.items()}


# Rules: (framework, capability, message, predicate over the plan arrays). ``ctx`` holds the
# plan arrays and per plan: m (micro-batches), even (the layout is even), and the training spec.
def _rules():
    def z(c):
        return c["zero"]

    def sharded(c):
        return (z(c) >= 2) & c["sharded"]

    def early_stop(c):
        return c["early_stop"] & ((c["rec"] == 2) | (c["rnl"] > 0))

    reentrant = ("a full recompute that stops early (training.recompute_early_stop; its "
                 "checkpoint function reruns the whole layer)")
    flat = "FSDP2's per-parameter copies (training.zero3_per_parameter; its buffers are flat)"
    offload = "activations offloaded to host memory (plan.cpu_offload_layers)"
    rerun = ("a full recompute that reruns the embedding and the LM head too "
             "(training.recompute_head; it recomputes the transformer layers only)")

    def head_rerun(c):
        return c["head_rerun"] & (c["rec"] == 2)

    def separate_accumulation(c):
        """ZeRO-1 with 16-bit weights and fp32 gradients: DeepSpeed adds each micro-batch's
        gradients into fp32 ones, parameter by parameter (BF16_Optimizer's hp gradients;
        DeepSpeedZeroOptimizer's ``grad_accum`` where gradients are not partitioned,
        stage_1_and_2.py)."""
        return c["fp32_grads_16bit"] & (z(c) == 1)

    def bf16_optimizer(c):
        """DeepSpeed's BF16_Optimizer: what its engine builds for that ZeRO-1 with bf16
        weights (``_do_optimizer_sanity_check``)."""
        return c["bf16"] & separate_accumulation(c)

    def hybrid_every(c):
        """Hybrid plans whose replicas' all-reduce ``hsdp_all_reduce_every_microbatch`` would
        run every micro-batch: sharded gradients (ZeRO-2/3), several micro-batches and no
        pipeline."""
        return (c["rep"] > 1) & (c["m"] > 1) & (c["pp"] == 1) & (z(c) >= 2)

    def reduced_after(c):
        """Pipelined ZeRO 1-3 plans without interleaving whose once-a-step gradient reduction
        ``training.grad_reduce_after_last_backward`` costs after the last backward (the flag
        changes nothing elsewhere)."""
        return (c["dp_overlap"] & reduced_after_backward(c["pp"], z(c), c["vpp"])
                & (c["sharded"] | (c["rep"] > 1)))

    def list_gathers(c):
        return c["z3_copies"] & (z(c) >= 3)

    def expert_launch(grouped: bool):
        """Refuses a MoE plan whose experts launch as one grouped kernel (``grouped``) or
        one GEMM each (not ``grouped``): ``training.moe_expert_gemm``."""
        return lambda c: np.full(c["n"], c["moe"] and c["grouped_gemm"] is grouped)

    copies = ("ZeRO-3 gathers into per-rank views (training.zero3_per_rank_copies: DeepSpeed "
              "of 2021); it gathers into one flat buffer")
    return [
        ("megatron", "zero_3", copies, list_gathers),
        ("torchtitan", "zero_3", copies, list_gathers),
        ("deepspeed", "zero_3", copies, list_gathers),
        ("torchtitan", "zero_3", "ZeRO-2/3 without FSDP2's per-parameter copies "
         "(training.zero3_per_parameter)", lambda c: sharded(c) & ~c["per_param"]),
        ("megatron", "zero_3", flat, lambda c: sharded(c) & c["per_param"]),
        ("deepspeed", "zero_3", flat, lambda c: sharded(c) & c["per_param"]),
        ("megatron", "recompute_early_stop", reentrant, early_stop),
        ("deepspeed", "recompute_early_stop", reentrant, early_stop),
        ("megatron", "recompute_head", rerun, head_rerun),
        ("torchtitan", "recompute_head", rerun, head_rerun),
        ("torchtitan", "distribute_saved_activations", "a full recompute that keeps 1/tp of "
         "each layer's input (training.distribute_saved_activations with tensor parallelism "
         "and no sequence parallelism)",
         lambda c: c["dsa"] & (c["rec"] == 2) & (c["tp"] > 1) & (c["sp"] == 0)),
        ("megatron", "tp_comm_overlap", "TP communication overlap without sequence "
         "parallelism (training.tp_comm_overlap 'te': --tp-comm-overlap asserts "
         "--sequence-parallel)",
         lambda c: (c["tp_overlap"] == "te") & (c["tp"] > 1) & (c["sp"] == 0)),
        ("megatron", "tp_comm_overlap", "PyTorch's AsyncTP (training.tp_comm_overlap "
         "'async_tp': Megatron-LM overlaps through Transformer Engine's userbuffers, 'te')",
         lambda c: (c["tp_overlap"] == "async_tp") & (c["tp"] > 1)),
        ("torchtitan", "tp_comm_overlap", "AsyncTP without torch.compile "
         "(training.tp_comm_overlap 'async_tp' with training.eager_elementwise: 'Async TP "
         "requires torch.compile')",
         lambda c: (c["tp_overlap"] == "async_tp") & (c["tp"] > 1) & c["eager"]),
        ("torchtitan", "tp_comm_overlap", "Transformer Engine's userbuffers "
         "(training.tp_comm_overlap 'te': torchtitan overlaps through AsyncTP, 'async_tp')",
         lambda c: (c["tp_overlap"] == "te") & (c["tp"] > 1)),
        ("deepspeed", "tp_comm_overlap", "TP collectives pipelined with the GEMMs "
         "(training.tp_comm_overlap: AutoTP has no such overlap)",
         lambda c: (c["tp_overlap"] != "none") & (c["tp"] > 1)),
        ("torchtitan", "cpu_offload", offload, lambda c: c["off"] > 0),
        ("deepspeed", "cpu_offload", offload, lambda c: c["off"] > 0),
        ("megatron", "eager_elementwise", "torchtitan's eager elementwise kernels "
         "(training.eager_elementwise)", lambda c: np.full(c["n"], c["eager"])),
        ("megatron", "fp8_param_gather", "fp8 weight gathers without the distributed "
         "optimizer (training.fp8_param_gather with ZeRO stage 0: Megatron-LM asserts "
         "--use-distributed-optimizer or FSDP)",
         lambda c: c["fp8_gather"] & (z(c) == 0)),
        ("torchtitan", "fp8_param_gather", "fp8 weight gathers without FSDP sharding the "
         "weights over data-parallel ranks (training.fp8_param_gather: "
         "enable_fsdp_float8_all_gather acts only with dp_shard > 1, ZeRO-2/3 here; sharding "
         "over CP ranks alone gathers in 16 bits)",
         lambda c: c["fp8_gather"] & ~((z(c) >= 2) & (_titan_shard(c) > 1))),
        ("torchtitan", "fp8", "per-tensor fp8 expert GEMMs (its float8 converter converts "
         "nn.Linear only: the grouped experts run torch._grouped_mm in bf16; "
         "quantization/utils.py module_filter_fn; MXFP8 has a grouped converter, "
         "training.fp8_recipe 'mxfp8')",
         lambda c: np.full(c["n"], c["moe"] and c["fp8"] and c["fp8_recipe"] != "mxfp8")),
        ("torchtitan", "fp8", "MXFP8 with tensor parallelism under torch.compile (MXLinearConverter "
         "asserts 'TP not yet supported with torch.compile for mxfp8'; components/quantization/"
         "mx.py)",
         lambda c: (c["tp"] > 1) & np.full(c["n"], c["fp8"] and c["fp8_recipe"] == "mxfp8"
                                          and not c["eager"])),
        ("torchtitan", "fp8_param_gather", "MXFP8 weight gathers (training.fp8_param_gather "
         "with 'mxfp8': 'All distributed communication for MXFP8 training is currently done "
         "in high precision', docs/mxfp8.md)",
         lambda c: c["fp8_gather"] & np.full(c["n"], c["fp8_recipe"] == "mxfp8")),
        ("torchtitan", "moe_deepep_dispatch", "DeepEP without expert parallelism or with expert "
         "tensor parallelism (its deepseek_v3 and llama4 parallelize raise: 'DeepEP requires "
         "expert parallelism', 'DeepEP with Expert Tensor Parallelism (ETP) is not supported')",
         lambda c: np.full(c["n"], c["moe"] and c["deepep"]) & ((c["ep"] == 1) | (c["etp"] > 1))),
        ("torchtitan", "sequence_parallel", "a sequence length that 2 x tp x cp does not divide "
         "(ParallelDims.seq_len_divisor, asserted by every model's parallelize)",
         lambda c: c["seq"] % (2 * c["tp"] * c["cp"]) != 0),
        ("torchtitan", "fp8_param_gather", "fp8 weight gathers of routed experts "
         "(training.fp8_param_gather with a MoE model: Float8Linear converts nn.Linear only, "
         "the experts' grouped GEMMs gather in 16 bits)",
         lambda c: np.full(c["n"], c["moe"]) & c["fp8_gather"]),
        ("torchtitan", "fp8", "an fp8 recipe other than per-tensor current scaling or MXFP8 "
         "(torchao's float8 training scales by the current amax: training.fp8_recipe "
         "'tensorwise'; its MX converter runs 'mxfp8')",
         lambda c: np.full(c["n"], c["fp8"] and c["fp8_recipe"] not in ("tensorwise", "mxfp8"))),
        ("megatron", "fp8", "recompute of layernorm or moe_act under fp8 with delayed scaling "
         "(TransformerConfig refuses it: training.fp8_recipe 'tensorwise' or 'blockwise')",
         lambda c: (c["rec"] == 1) & ~c["per_op"] & np.full(c["n"], c["fp8_modules"])),
        ("torchtitan", "hybrid_sharding", "hybrid sharding with more than one micro-batch and "
         "no pipeline, all-reduced across the replicas once a step (plan.dp_replicate: FSDP2 "
         "all-reduces every micro-batch's gradients, training.hsdp_all_reduce_every_microbatch)",
         lambda c: hybrid_every(c) & ~c["hsdp_every"]),
        ("megatron", "hybrid_sharding", "hybrid sharding all-reduced across the replicas every "
         "micro-batch (training.hsdp_all_reduce_every_microbatch: the distributed optimizer's "
         "instances and Megatron-FSDP all-reduce at the last micro-batch)",
         lambda c: hybrid_every(c) & c["hsdp_every"]),
        ("deepspeed", "hybrid_sharding", "hybrid sharding all-reduced across the replicas every "
         "micro-batch (training.hsdp_all_reduce_every_microbatch: MiCS all-reduces at the "
         "accumulation boundary)", lambda c: hybrid_every(c) & c["hsdp_every"]),
        ("deepspeed", "hybrid_sharding", "hybrid sharding of ZeRO-1/2 (plan.dp_replicate; "
         "MiCS shards ZeRO-3 only)", lambda c: (c["rep"] > 1) & (z(c) < 3)),
        ("deepspeed", "hybrid_sharding", "hybrid sharding with tensor parallelism "
         "(plan.dp_replicate: MiCS's shard groups are consecutive global ranks, "
         "mics_utils.py)", lambda c: (c["rep"] > 1) & (c["tp"] > 1)),
        # Each framework runs the pipelined reduction one way: refused when costed the other.
        *[(fw, "grad_reduce_overlap", why,
           lambda c, after=after: reduced_after(c) & (c["after_bwd"] == after))
          for fw, after, why in (
              ("torchtitan", False, "pipelined FSDP's gradient reduction overlapped with the "
               "last backward (training.grad_reduce_after_last_backward false): "
               "torch.distributed.pipelining reduces after each stage's last backward"),
              ("megatron", True, "the gradient reduction started after each stage's last "
               "backward (training.grad_reduce_after_last_backward): Megatron-LM launches "
               "each bucket's as its gradients are ready"))],
        ("megatron", "zero_2", "ZeRO-2/3 (Megatron-FSDP) with pipeline parallelism",
         lambda c: (z(c) >= 2) & (c["pp"] > 1)),
        ("torchtitan", "zero_1", "ZeRO-1 without a pipeline (no optimizer-only sharding in "
         "FSDP; under a pipeline its FSDP runs as ZeRO-1)",
         lambda c: (z(c) == 1) & (c["nd"] > 1) & (c["pp"] == 1)),
        ("torchtitan", "zero_3", "ZeRO-2/3 with a pipeline (torch.distributed.pipelining "
         "reduce-scatters FSDP's gradients at the last micro-batch, after the stage's last "
         "backward, not layer by layer beside it, and keeps the gathered weights between "
         "micro-batches: ZeRO-1's traffic and memory, plan.zero_stage 1, with "
         "training.grad_reduce_after_last_backward)",
         lambda c: (z(c) >= 2) & (c["pp"] > 1)),
        ("torchtitan", "zero_2", "ZeRO-2 with more than one micro-batch (FSDP without resharding "
         "gathers the weights every micro-batch)", lambda c: (z(c) == 2) & (c["m"] > 1)),
        ("torchtitan", "data_parallel", "plain data parallelism (DDP) together with tp, pp or cp",
         lambda c: (z(c) == 0) & (c["dp"] > 1) & (c["tp"] * c["pp"] * c["cp"] > 1)),
        ("torchtitan", "data_parallel", "plain data parallelism (DDP) with gradient accumulation "
         "(its replicate() all-reduces every micro-batch's gradients, the plan one a step: "
         "torchtitan/models/llama3/infra/parallelize.py apply_ddp, no no_sync)",
         lambda c: (z(c) == 0) & (c["dp"] > 1) & (c["m"] > 1)),
        ("torchtitan", "fewer_microbatches_than_stages", "2 to pp - 1 micro-batches a step "
         "(the GPipe schedule it runs when there are fewer micro-batches than stages keeps "
         "all of them in flight on every stage; the plan's 1F1B memory keeps pp - i on "
         "stage i)", lambda c: (c["pp"] > 1) & (c["m"] > 1) & (c["m"] < c["pp"])),
        ("torchtitan", "context_parallel", "context parallelism without ZeRO (torchtitan shards "
         "the weights over the CP ranks whenever cp > 1: ParallelDims.fsdp_enabled is "
         "dp_shard_enabled or cp_enabled)", lambda c: (z(c) == 0) & (c["cp"] > 1)),
        ("torchtitan", "mixed_precision_without_sharding", "16-bit or fp8 training with TP or "
         "PP and nothing FSDP-sharded (dp shard x cp = 1): torchtitan then trains in fp32 "
         "(distributed/utils.py maybe_enable_amp: 'Mixed precision training is disabled'); "
         "only training.master_weights false, its training.dtype bfloat16, trains in bf16 there",
         lambda c: ((c["tp"] > 1) | (c["pp"] > 1)) & (_titan_shard(c) * c["cp"] == 1)
         & np.full(c["n"], c["mixed"] and not c["pure_bf16"])),
        ("torchtitan", "tensor_parallel", "tensor parallelism without sequence parallelism",
         lambda c: (c["tp"] > 1) & (c["sp"] == 0)),
        ("torchtitan", "recompute_selective", "selective recompute of Megatron-LM's modules "
         "(training.selective_recompute 'modules'; torchtitan runs 'per_op')",
         lambda c: (c["rec"] == 1) & ~c["per_op"]),
        ("megatron", "recompute_selective", "torchtitan's per-op selective recompute "
         "(training.selective_recompute 'per_op')", lambda c: (c["rec"] == 1) & c["per_op"]),
        ("megatron", "pipeline_parallel", "pipeline sends split over the TP ranks without "
         "sequence parallelism (training.p2p_scatter_gather; Megatron-Core sends the whole "
         "activation)", lambda c: c["p2p_split"] & (c["pp"] > 1) & (c["tp"] > 1)
         & (c["sp"] == 0)),
        ("torchtitan", "recompute_partial", "block recompute of the first N layers of each "
         "chunk", lambda c: c["rnl"] > 0),
        ("torchtitan", "dropout", "dropout (training.dropout: its decoder models have none, so "
         "it would store no masks and run none of the dropout kernels costed)",
         lambda c: np.full(c["n"], c["dropout"])),
        ("torchtitan", "interleaved_schedule", "an interleaved schedule whose micro-batches "
         "its rounds do not divide (ScheduleInterleaved1F1B runs max(1, m // pp) rounds and "
         "raises unless they divide the micro-batches)",
         lambda c: (c["vpp"] > 1) & (c["m"] % _titan_rounds(c) != 0)),
        ("torchtitan", "interleaved_schedule", "an interleaved schedule whose micro-batch "
         "groups are not its rounds' (ScheduleInterleaved1F1B sends m / max(1, m // pp) "
         "micro-batches through a model chunk together, its microbatches_per_round)",
         lambda c: (c["vpp"] > 1) & (c["m"] % _titan_rounds(c) == 0)
         & (c["group"] != c["m"] // _titan_rounds(c))),
        ("torchtitan", "interleaved_schedule", "an interleaved schedule whose sends block "
         "(training.overlap_p2p_comm false; torch.distributed.pipelining posts its receives "
         "ahead and waits for its sends at the end of the step)",
         lambda c: (c["vpp"] > 1) & ~c["p2p_overlap"]),
        ("torchtitan", "grouped_query_attention", "K and V expanded to every query head "
         "where it costs something, eager kernels or PyTorch's ring attention "
         "(training.repeat_kv; v0.2.2's models pass them to SDPA at their own head count, "
         "enable_gqa, models/llama3/model/model.py)",
         lambda c: np.full(c["n"], c["repeat_kv"] and c["gqa"])
         & (np.full(c["n"], c["eager"]) | ((c["cp"] > 1) & c["torch_ring"]))),
        ("torchtitan", "fp16", "fp16 training", lambda c: np.full(c["n"], c["fp16"])),
        ("torchtitan", "bf16_gradient_reduce", "bf16 gradient reduction",
         lambda c: np.full(c["n"], c["bf16_reduce"])),
        ("megatron", "low_precision_optimizer_states", "optimizer states below fp32 without "
         "the distributed optimizer (Megatron-Core raises '--use-precision-aware-optimizer "
         "only supported with distributed optimizer')",
         lambda c: c["low_states"] & (z(c) == 0)),
        ("torchtitan", "low_precision_optimizer_states", "optimizer states below fp32 beside "
         "fp32 master weights (training.optimizer_state_dtype; only training.dtype "
         "\"bfloat16\" keeps them in bf16, with no master copy)",
         lambda c: np.full(c["n"], c["low_states"] and not c["no_master"])),
        ("megatron", "no_master_weights", "no fp32 master weights (training.master_weights)",
         lambda c: np.full(c["n"], c["no_master"])),
        ("torchtitan", "no_master_weights", "no master weights but as its training.dtype "
         "\"bfloat16\" runs them under FSDP (training.master_weights: bf16 gradients reduced "
         "in fp32 by fully_shard's mixed_precision_reduce, bf16 optimizer states, ZeRO-2/3, or "
         "ZeRO-1 under a pipeline; without sharding its DDP would reduce them in bf16)",
         lambda c: c["no_master"] & ~(c["pure_bf16"] & _titan_fsdp(c))),
        ("deepspeed", "no_master_weights", "no master weights (training.master_weights; "
         "bf16_master_weights_and_grads keeps a bf16 copy)",
         lambda c: np.full(c["n"], c["no_master"])),
        ("deepspeed", "low_precision_optimizer_states", "optimizer states below fp32 beside "
         "fp32 master weights (training.optimizer_state_dtype)",
         lambda c: np.full(c["n"], c["low_states"])),
        ("torchtitan", "microbatch_gradient_upcast", "FSDP under a pipeline without "
         "training.microbatch_grad_upcast (FSDP2 adds every micro-batch's bf16 unsharded "
         "gradients into fp32 ones, its reduce dtype)",
         lambda c: c["pipelined_fsdp"] & ~c["upcast"]),
        *[(fw, "microbatch_gradient_upcast", "FSDP2's fp32 accumulation of every micro-batch's "
           "unsharded gradients under a pipeline (training.microbatch_grad_upcast)",
           lambda c: c["pipelined_fsdp"] & c["upcast"]) for fw in ("megatron", "deepspeed")],
        ("torchtitan", "multi_token_prediction", "multi-token prediction "
         "(model.mtp_num_layers)", lambda c: np.full(c["n"], c["mtp"])),
        ("deepspeed", "multi_token_prediction", "multi-token prediction "
         "(model.mtp_num_layers)", lambda c: np.full(c["n"], c["mtp"])),
        ("megatron", "microbatch_gradient_copy", "a copy of every micro-batch's gradients "
         "into fp32 (training.microbatch_grad_copy)", lambda c: np.full(c["n"], c["grad_copy"])),
        ("torchtitan", "microbatch_gradient_copy", "a copy of every micro-batch's gradients "
         "into fp32 (training.microbatch_grad_copy)", lambda c: np.full(c["n"], c["grad_copy"])),
        ("deepspeed", "microbatch_gradient_copy", "ZeRO-1 with 16-bit weights and fp32 "
         "gradients without training.microbatch_grad_copy (DeepSpeed adds every micro-batch's "
         "16-bit gradients into fp32 ones: its BF16_Optimizer, or ZeRO-1's grad_accum)",
         lambda c: separate_accumulation(c) & ~c["grad_copy"]),
        ("deepspeed", "microbatch_gradient_copy", "training.microbatch_grad_copy where "
         "DeepSpeed makes no such copy (it does only for ZeRO-1 with 16-bit weights and fp32 "
         "gradients; the rest accumulate in place or on their shards)",
         lambda c: c["grad_copy"] & ~separate_accumulation(c)),
        ("megatron", "separate_column_parallel_inputs", "column-parallel linears that "
         "all-reduce their input gradients one by one, other than its fused QKV and fc1 "
         "(training.tp_column_parallel_inputs not 2)",
         lambda c: (c["col_inputs"] != 2) & (c["tp"] > 1) & (c["sp"] == 0)),
        ("deepspeed", "separate_column_parallel_inputs", "column-parallel inputs other than "
         "the ones AutoTP wraps for this model (training.tp_column_parallel_inputs: 5 for a "
         "dense SwiGLU layer, its q, k, v, gate and up projections)",
         lambda c: (c["col_inputs"] != c["autotp"]) & np.full(c["n"], c["autotp"] > 0)
         & (c["tp"] > 1) & (c["sp"] == 0)),
        ("megatron", "blocking_tp_allreduce", "a blocking backward TP all-reduce or "
         "reduce-scatter (training.async_tensor_model_parallel_allreduce false; Megatron-Core "
         "overlaps it with the weight-gradient GEMM)",
         lambda c: ~c["async_ar"] & (c["tp"] > 1)),
        ("torchtitan", "blocking_tp_allreduce", "tensor parallelism with the backward "
         "reduce-scatter overlapped (DTensor's sequence-parallel TP keeps the gathered input "
         "and reduce-scatters its gradient before going on: training."
         "async_tensor_model_parallel_allreduce false)",
         lambda c: c["async_ar"] & (c["tp"] > 1)),
        ("megatron", "attention_kernel", "FlashAttention v1 or the Triton FlashAttention "
         "(training.attention_kernel, to replay older software)",
         lambda c: np.full(c["n"], c["kernel"] in ("flash1", "flash_triton"))),
        ("torchtitan", "attention_kernel", "a named attention kernel (training.attention_kernel; "
         "torchtitan runs SDPA's, cuDNN first: the 'default' kernel)",
         lambda c: np.full(c["n"], c["kernel"] != "default")),
        ("deepspeed", "attention_kernel", "a named attention kernel (training.attention_kernel; "
         "DeepSpeed leaves attention to the model code)",
         lambda c: np.full(c["n"], c["kernel"] != "default")),
        ("megatron", "softmax_fusion", "an unfused softmax in fp8 or fp4 or with context "
         "parallelism (the local transformer implementation that runs it has neither: fp8 "
         "layers and the CP ring attention are Transformer Engine's)",
         lambda c: c["unfused_softmax"] & (c["fp8"] | c["fp4"] | (c["cp"] > 1))),
        ("torchtitan", "softmax_fusion", "an unfused softmax (training.softmax_fusion false "
         "without FlashAttention; torchtitan's attention is SDPA or FlexAttention)",
         lambda c: np.full(c["n"], c["unfused_softmax"])),
        ("megatron", "norm_fusion", "the reference eager RMSNorm (training.norm_fusion false; "
         "Megatron's norms are fused kernels or torch.nn.RMSNorm)",
         lambda c: np.full(c["n"], c["unfused_norm"])),
        ("torchtitan", "norm_fusion", "the reference eager RMSNorm (training.norm_fusion false; "
         "torchtitan's norms are torch.nn.RMSNorm)",
         lambda c: np.full(c["n"], c["unfused_norm"])),
        *[(fw, "vocab_parallel_loss", "the loss over logits gathered from every TP rank "
           "(training.vocab_parallel_loss false)",
           lambda c: np.full(c["n"], c["gathered_loss"])) for fw in ("megatron", "torchtitan")],
        ("megatron", "zero_grad_allreduce", "ZeRO-1/2 all-reducing the gradients "
         "(training.zero_grad_allreduce; the distributed optimizer reduce-scatters them)",
         lambda c: c["zero_ar"] & ((z(c) == 1) | (z(c) == 2))),
        ("torchtitan", "zero_grad_allreduce", "ZeRO-1/2 all-reducing the gradients "
         "(training.zero_grad_allreduce; FSDP2 reduce-scatters them)",
         lambda c: c["zero_ar"] & ((z(c) == 1) | (z(c) == 2))),
        ("deepspeed", "vocab_parallel_loss", "a vocabulary-parallel loss under tensor "
         "parallelism (AutoTP gives every TP rank the whole logits: training."
         "vocab_parallel_loss false)",
         lambda c: np.full(c["n"], not c["gathered_loss"]) & (c["tp"] > 1)),
        ("deepspeed", "zero_grad_allreduce", "ZeRO-1/2 reduce-scattering the gradients "
         "(DeepSpeed all-reduces every bucket since 0.12.4: zero_optimization."
         "use_multi_rank_bucket_allreduce; training.zero_grad_allreduce)",
         lambda c: ~c["zero_ar"] & ((z(c) == 1) | (z(c) == 2)) & (c["nd"] > 1)),
        *[(fw, "grad_reduce_dtype", "a gradient reduction in another dtype than the "
           "gradients accumulate in (training.grad_reduce_dtype)",
           lambda c: np.full(c["n"], c["grad_cast"])) for fw in ("megatron", "deepspeed")],
        ("torchtitan", "grad_reduce_dtype", "a gradient reduction in another dtype than the "
         "gradients accumulate in (training.grad_reduce_dtype; only its training.dtype "
         "\"bfloat16\" reduces bf16 gradients in fp32, under FSDP)",
         lambda c: c["grad_cast"] & ~(c["pure_bf16"] & _titan_fsdp(c))),
        ("deepspeed", "grad_reduce_overlap", "the gradient reduction overlapped with the "
         "backward (training.overlap_grad_reduce) without ZeRO, with pipeline stages or on its "
         "BF16_Optimizer (ZeRO-1, bf16 weights, fp32 gradients): DeepSpeed reduces after the "
         "backward there (with pipeline stages and ZeRO, after each stage's last backward: "
         "training.grad_reduce_after_last_backward costs that)",
         lambda c: c["dp_overlap"] & (c["nd"] > 1)
         & ((z(c) == 0) | (c["pp"] > 1) | bf16_optimizer(c))
         & ~(reduced_after(c) & c["after_bwd"])),
        ("torchtitan", "grad_reduce_overlap", "the gradient reduction left until after the "
         "backward (training.overlap_grad_reduce false): FSDP2 reduce-scatters each layer's "
         "gradients and DDP all-reduces each bucket as the backward produces them (under a "
         "pipeline, after each stage's last backward: training.grad_reduce_after_last_backward)",
         lambda c: ~c["dp_overlap"] & (c["nd"] > 1)),
        ("torchtitan", "param_gather_overlap", "the ZeRO-1/2 weight gather before the forward "
         "(training.overlap_param_gather false): FSDP2 gathers each layer's weights in the "
         "forward, the next layer's prefetched",
         lambda c: ~c["param_overlap"] & ((z(c) == 1) | (z(c) == 2)) & (c["nd"] > 1)),
        ("deepspeed", "param_gather_overlap", "the ZeRO-1/2 weight gather overlapped with "
         "the next forward (training.overlap_param_gather): DeepSpeed gathers the updated "
         "weights at the end of its optimizer step",
         lambda c: c["param_overlap"] & ((z(c) == 1) | (z(c) == 2)) & (c["nd"] > 1)),
        ("deepspeed", "zero_1", "reduce-scattered fp32 gradients with bf16 weights "
         "(training.zero_grad_allreduce false): DeepSpeed runs that ZeRO-1 as its "
         "BF16_Optimizer, which all-reduces them", lambda c: bf16_optimizer(c) & ~c["zero_ar"]
         & (c["nd"] > 1)),
        ("deepspeed", "pipeline_parallel", "bf16 pipeline stages without ZeRO: its engine "
         "runs them with its BF16_Optimizer (_do_optimizer_sanity_check), whose per-micro-batch "
         "gradient accumulation into a buffer of its own is not costed",
         lambda c: c["bf16"] & (z(c) == 0) & (c["pp"] > 1)),
        ("deepspeed", "data_parallel", "16-bit weights with fp32 gradients without ZeRO "
         "(DeepSpeed's engine refuses that mix: 'unsupported mix of model_dtype and "
         "grad_accum_dtype')", lambda c: c["fp32_grads_16bit"] & (z(c) == 0)),
        ("deepspeed", "context_parallel", "ring context parallelism", lambda c: c["cp"] > 1),
        ("megatron", "context_parallel", "PyTorch's ring attention (training.ring_attention "
         "'torch' or 'torch_allgather'; Megatron-Core runs Transformer Engine's, its ring or "
         "its all-to-all)",
         lambda c: (c["cp"] > 1) & np.full(c["n"], c["torch_ring"])),
        ("torchtitan", "context_parallel", "a ring attention other than PyTorch's with its "
         "default K,V all-gather (training.ring_attention 'te', 'torch' or 'a2a'; torchtitan v0.2.2 "
         "trains with PyTorch's context_parallel and never sets its rotate method: "
         "'torch_allgather')", lambda c: (c["cp"] > 1) & (c["ring"] != "torch_allgather")),
        ("deepspeed", "sequence_parallel", "Megatron sequence parallelism", lambda c: c["sp"] == 1),
        ("deepspeed", "interleaved_schedule", "an interleaved pipeline schedule",
         lambda c: c["vpp"] > 1),
        ("deepspeed", "pipeline_parallel", "pipeline parallelism with ZeRO-2/3",
         lambda c: (c["pp"] > 1) & (z(c) >= 2)),
        ("deepspeed", "pipeline_parallel", "pipeline and tensor parallelism together",
         lambda c: (c["pp"] > 1) & (c["tp"] > 1)),
        ("deepspeed", "uneven_stages", "uneven pipeline stages",
         lambda c: (c["pp"] > 1) & ~c["even"]),
        ("deepspeed", "recompute_selective", "selective recompute", lambda c: c["rec"] == 1),
        ("deepspeed", "recompute_partial", "block recompute of the first N layers of each "
         "chunk", lambda c: c["rnl"] > 0),
        ("deepspeed", "fp8", "fp8 training", lambda c: np.full(c["n"], c["fp8"])),
        ("deepspeed", "fp4", "fp4 training", lambda c: np.full(c["n"], c["fp4"])),
        ("torchtitan", "fp4", "NVFP4 training (its quantisation converters run float8 and "
         "MXFP8: components/quantization/float8.py, mx.py)",
         lambda c: np.full(c["n"], c["fp4"])),
        ("megatron", "moe_tensor_parallel", "MoE layers with tensor parallelism but no "
         "sequence parallelism", lambda c: c["moe"] & (c["tp"] > 1) & (c["sp"] == 0)),
        ("torchtitan", "expert_parallel", "this expert layout (EP borrows from FSDP and TP: "
         "with etp 1, ep a multiple of cp * tp up to dp_shard * cp * tp; with etp = tp, of cp up "
         "to dp_shard * cp; dp_shard = dp, or one replica's, where FSDP runs: ZeRO-2/3, or "
         "ZeRO-1 under a pipeline; else 1; and dp_shard * cp above 1, whose FSDP mesh the "
         "experts are sharded from)", _titan_ep_refused),
        ("deepspeed", "moe_token_copies", "expert parallelism without AutoEP's layer "
         "(training.moe_routing 'autoep': DeepSpeed spreads experts over ranks only through "
         "AutoEP)", lambda c: (c["ep"] > 1) & np.full(c["n"], c["moe"]
                                                       and c["routing"] != "autoep")),
        ("megatron", "moe_token_copies", "a MoE layer copying its tokens other than by "
         "Megatron-Core's fused permutation (training.moe_routing 'fused')",
         lambda c: np.full(c["n"], c["moe"] and c["routing"] != "fused")),
        ("torchtitan", "moe_token_copies", "a MoE layer copying its tokens other than by "
         "torchtitan's own gathers and fp32 combine (training.moe_routing 'torchtitan')",
         lambda c: np.full(c["n"], c["moe"] and c["routing"] != "torchtitan")),
        ("deepspeed", "expert_parallel", "expert parallelism in this layout (AutoEP runs etp "
         "1 only, and ep > 1 neither with AutoTP, whose folding all-gathers the experts' outputs over the TP "
         "ranks, nor with pipelines, nor with MiCS hybrid sharding)",
         lambda c: (c["etp"] > 1) | ((c["ep"] > 1) & ((c["tp"] > 1) | (c["pp"] > 1)
                                                      | (c["rep"] > 1)))),
        ("megatron", "moe_a2a_overlap", "EP all-to-all overlap here (Megatron-Core asserts "
         "ep > 1, no full recompute, and interleaving when pp > 1)",
         lambda c: c["a2a_overlap"] & c["moe"] & ((c["ep"] == 1) | (c["rec"] == 2)
                                                  | ((c["pp"] > 1) & (c["vpp"] == 1)))),
        ("torchtitan", "moe_a2a_overlap", "EP all-to-all overlap outside DualPipeV",
         lambda c: c["a2a_overlap"] & c["moe"] & (c["ep"] > 1)),
        ("megatron", "moe_expert_gemm", "one grouped-GEMM kernel for all local experts "
         "(training.moe_expert_gemm 'grouped'; Transformer Engine's GroupedLinear launches one "
         "GEMM per expert)", expert_launch(grouped=True)),
        ("deepspeed", "moe_expert_gemm", "one grouped-GEMM kernel for all local experts "
         "without expert parallelism (training.moe_expert_gemm 'grouped'; DeepSpeed's Experts "
         "loop over them)", lambda c: expert_launch(grouped=True)(c) & (c["ep"] == 1)),
        ("deepspeed", "moe_expert_gemm", "one GEMM per local expert under expert parallelism "
         "(training.moe_expert_gemm 'per_expert'; AutoEP's experts run grouped GEMMs, "
         "use_grouped_mm)", lambda c: expert_launch(grouped=False)(c) & (c["ep"] > 1)),
        ("torchtitan", "moe_expert_gemm", "one GEMM per local expert (training.moe_expert_gemm "
         "'per_expert'; torchtitan's experts run torch._grouped_mm)", expert_launch(grouped=False)),
    ]


def _titan_fsdp(c) -> np.ndarray:
    """Plans torchtitan runs under FSDP (fully_shard, its mixed-precision policy): ZeRO-2/3,
    or ZeRO-1 under a pipeline over more than one rank (``pipelined_fsdp``)."""
    return (c["zero"] >= 2) | c["pipelined_fsdp"]


def _titan_rounds(c) -> np.ndarray:
    """Rounds of torch.distributed.pipelining's ScheduleInterleaved1F1B for each plan:
    max(1, m // pp) (``number_of_rounds``), each of m / rounds micro-batches
    (``microbatches_per_round``, the planner's microbatch group); it raises unless the rounds
    divide m."""
    return np.maximum(1, c["m"] // np.maximum(c["pp"], 1))


def _titan_shard(c) -> np.ndarray:
    """torchtitan's data_parallel_shard_degree for each plan: the data-parallel degree
    wherever it runs FSDP (ZeRO-2/3, and ZeRO-1 under a pipeline), one replica's under HSDP;
    else 1."""
    fsdp = (c["zero"] >= 2) | ((c["zero"] == 1) & (c["pp"] > 1))
    return np.where(fsdp, c["dp"] // c["rep"], 1)


def _titan_ep_refused(c) -> np.ndarray:
    """torchtitan v0.2.2's expert mesh (``ParallelDims``): efsdp = dp_shard * cp * tp /
    (etp * ep), with etp in {1, tp}; and its MoE models (deepseek_v3, llama4) build the
    experts' sharding from the "fsdp" mesh whenever ep > 1 (``parallelize``: ``if
    parallel_dims.fsdp_enabled or parallel_dims.ep_enabled: ... get_mesh(["fsdp"])``), which
    raises where dp_shard * cp is 1."""
    ep, etp, tp, cp = c["ep"], c["etp"], c["tp"], c["cp"]
    shard = _titan_shard(c)
    unit = np.where(etp == 1, cp * tp, cp)
    top = np.where(etp == 1, shard * cp * tp, shard * cp)
    ok = (ep == 1) & (etp == 1) | ((ep % unit == 0) & (ep <= top) & ((etp == 1) | (etp == tp))
                                   & (shard * cp > 1))
    return ~ok


RULES = _rules()


def refusal_rules() -> list[dict]:
    """The rules as data: which framework, which capability, what a plan then lacks."""
    return [{"framework": fw, "capability": cap, "lacks": message}
            for fw, cap, message, _ in RULES]


def model_rule_args(model) -> tuple[bool, bool, int, bool]:
    """What the rules read of a model, in the order the rule functions take it after the
    plan's facts: (moe: expert layers, mtp: multi-token prediction modules, autotp:
    ``autotp_column_inputs``, gqa: fewer K,V heads than query heads, outside MLA)."""
    return (model.is_moe, model.mtp_num_layers > 0, autotp_column_inputs(model),
            model.grouped_query)


def autotp_column_inputs(model) -> int:
    """The column-parallel linears DeepSpeed's AutoTP runs a layer of this model with, each
    all-reducing its input gradient (``TrainingSpec.tp_column_parallel_inputs``), where the
    planner knows them: 5 for a dense SwiGLU layer of the Llama family (q, k, v, gate and up
    projections, each a LinearLayer: deepspeed/module_inject/auto_tp.py); 0 otherwise (the
    Hugging Face layouts of other models differ)."""
    return 5 if model.ffn_type == "swiglu" and not model.is_moe else 0


def rules_context(plans, m, even, training, group=None, moe: bool = False, mtp: bool = False,
                  autotp: int = 0, gqa: bool = False) -> dict:
    """The rules' inputs; ``group`` is the interleaved schedule's micro-batch group per plan
    (default: the smallest valid one, ``microbatch_group``, what the step model costs an
    interleaved plan with; pp where pp divides the micro-batches); ``moe``:
    the model has expert layers; ``mtp``: multi-token prediction modules; ``autotp``: the
    column-parallel inputs DeepSpeed's AutoTP runs a layer of the model with
    (``autotp_column_inputs``; 0 where the planner does not know them); ``gqa``: grouped-query
    attention, fewer K,V heads than query heads (``model_rule_args``)."""
    # Imported here, as in reasons_by_framework: planner.cost imports this module.
    from planner.cost.batch import pipelined_fsdp

    return {"group": (microbatch_groups(m, plans.pp, plans.vpp) if group is None
                      else np.asarray(group)),
            "dp": plans.dp, "tp": plans.tp, "pp": plans.pp, "cp": plans.cp, "vpp": plans.vpp,
            "rec": plans.rec, "zero": plans.zero, "sp": plans.sp, "nd": plans.dp * plans.cp,
            "rnl": plans.rnl, "off": plans.off, "rep": plans.rep, "ep": plans.ep,
            "etp": plans.etp, "moe": bool(moe), "mtp": bool(mtp), "autotp": int(autotp),
            "gqa": bool(gqa), "repeat_kv": training.repeat_kv,
            "torch_ring": training.ring_attention in ("torch", "torch_allgather"),
            "m": np.asarray(m), "even": np.asarray(even, dtype=bool), "n": len(plans),
            "fp16": training.precision == "fp16", "fp8": training.precision == "fp8",
            "fp4": training.precision == "fp4",
            "bf16_reduce": (training.grad_reduce_dtype or training.grad_dtype) == "bf16",
            "bf16": np.full(len(plans), training.precision == "bf16"),
            "mixed": training.precision in ("bf16", "fp16", "fp8", "fp4"),
            "deepep": training.moe_dispatcher == "deepep",
            "routing": training.moe_routing,
            "seq": training.seq_length,
            "dropout": training.dropout,
            "grad_copy": np.full(len(plans), training.microbatch_grad_copy),
            "upcast": np.full(len(plans), training.microbatch_grad_upcast),
            "pipelined_fsdp": pipelined_fsdp(plans),
            "async_ar": np.full(len(plans), training.async_tensor_model_parallel_allreduce),
            "tp_overlap": np.full(len(plans), training.tp_comm_overlap),
            "col_inputs": np.full(len(plans), training.tp_column_parallel_inputs),
            "low_states": training.optimizer_state_dtype != "fp32",
            "per_op": np.full(len(plans), training.selective_recompute == "per_op"),
            "p2p_split": np.full(len(plans), training.p2p_scatter_gather),
            "p2p_overlap": np.full(len(plans), training.overlap_p2p_comm),
            "z3_copies": np.full(len(plans), training.zero3_per_rank_copies),
            "per_param": np.full(len(plans), training.zero3_per_parameter),
            "sharded": plans.data_sharded(bool(moe)),
            "early_stop": np.full(len(plans), training.recompute_early_stop),
            "head_rerun": np.full(len(plans), training.recompute_head),
            "dsa": np.full(len(plans), training.distribute_saved_activations),
            "hsdp_every": np.full(len(plans), training.hsdp_all_reduce_every_microbatch),
            "after_bwd": np.full(len(plans), training.grad_reduce_after_last_backward),
            "eager": training.eager_elementwise,
            "fp8_recipe": training.fp8_recipe,
            "fp8_gather": np.full(len(plans), training.fp8_param_gather),
            "fp8_modules": (training.precision == "fp8" and training.fp8_recipe == "delayed"
                            and bool({"moe_act", "layernorm"} & set(training.recompute_modules))),
            "a2a_overlap": np.full(len(plans), training.moe_a2a_overlap),
            "grouped_gemm": training.moe_expert_gemm == "grouped",
            "kernel": training.attention_kernel,
            "ring": training.ring_attention,
            "unfused_softmax": not (training.flash_attention or training.softmax_fusion),
            "unfused_norm": not training.norm_fusion,
            "zero_ar": np.full(len(plans), training.zero_grad_allreduce),
            "dp_overlap": np.full(len(plans), training.overlap_grad_reduce),
            "param_overlap": np.full(len(plans), training.overlap_param_gather),
            "fp32_grads_16bit": np.full(len(plans), training.precision in ("bf16", "fp16")
                                        and training.grad_dtype == "fp32"),
            "gathered_loss": not training.vocab_parallel_loss,
            "grad_cast": training.grad_reduce_bytes != training.grad_bytes,
            "no_master": training.no_master_copy,
            # torchtitan's training.dtype "bfloat16": bf16 weights, gradients and states, the
            # gradients reduced in fp32 (mixed_precision_reduce, float32 only).
            "pure_bf16": (training.no_master_copy and training.precision == "bf16"
                          and training.grad_dtype == "bf16"
                          and training.optimizer_state_dtype == "bf16"
                          and training.grad_reduce_dtype == "fp32")}


def runs_mask(framework: str, plans, m, even, training, moe: bool = False,
              mtp: bool = False, autotp: int = 0, gqa: bool = False) -> np.ndarray:
    """For each plan of the arrays: whether ``framework`` runs it as predicted."""
    ctx = rules_context(plans, m, even, training, moe=moe, mtp=mtp, autotp=autotp, gqa=gqa)
    return rules_mask(framework, ctx)


def rules_mask(framework: str, ctx: dict, only: np.ndarray | None = None) -> np.ndarray:
    """``runs_mask`` over the rules' inputs ``ctx`` (``rules_context``), for the plans ``only``
    marks (the others come back False). The framework's rules run in order over the plans
    none has refused yet: whenever a quarter of those is refused, the inputs are narrowed to
    the rest (``_Narrowed``; a rule that refuses most of a large space, Megatron-LM's ZeRO-2/3
    under a pipeline, spares the others those plans)."""
    n = ctx["n"]
    idx = np.arange(n)                                      # the plans ``ctx`` holds
    bad = np.zeros(n, dtype=bool) if only is None else ~only    # refused among them
    for fw, _, _, pred in RULES:
        if fw != framework:
            continue
        if 4 * np.count_nonzero(bad) >= len(idx):
            keep = ~bad
            idx, ctx, bad = idx[keep], _Narrowed(ctx, keep), bad[keep]
            if not len(idx):
                break
        bad |= np.asarray(pred(ctx), dtype=bool)
    ok = np.zeros(n, dtype=bool)
    ok[idx[~bad]] = True
    return ok


class _Narrowed(dict):
    """The rules' inputs of the plans ``keep`` marks: each per-plan array of ``base`` narrowed
    when a rule first reads it (most rules read a few of the inputs)."""

    def __init__(self, base: dict, keep: np.ndarray):
        super().__init__(n=int(np.count_nonzero(keep)))
        self._base, self._keep, self._of = base, keep, base["n"]

    def __missing__(self, key: str):
        v = self._base[key]
        if isinstance(v, np.ndarray) and v.shape == (self._of,):
            v = v[self._keep]
        self[key] = v
        return v

    # (A rule may ask ``key in c`` or ``c.get(key)``: both see every input, narrowed.)
    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self._base

    def get(self, key: str, default=None):
        return self[key] if key in self else default


def universal_refusals(framework: str, plans, m, even, training, moe: bool = False,
                       mtp: bool = False, autotp: int = 0, gqa: bool = False) -> list[str]:
    """The messages of ``framework``'s rules that refuse every plan of the arrays (what a
    request asks that the framework cannot run at all, whatever the degrees)."""
    ctx = rules_context(plans, m, even, training, moe=moe, mtp=mtp, autotp=autotp, gqa=gqa)
    return [message for fw, _, message, pred in RULES
            if fw == framework and bool(np.all(np.asarray(pred(ctx), dtype=bool)))]


def reasons_by_framework(plan, grad_accum_steps: int, even: bool, training,
                         group: int | None = None, moe: bool = False, mtp: bool = False,
                         autotp: int = 0, gqa: bool = False) -> dict[str, list[str]]:
    """For one plan (a ParallelPlan or a PlanEstimate): each framework's missing pieces (an
    empty list: it runs the plan as predicted). ``group``: its interleaved micro-batch group;
    ``moe``: the model has expert layers; ``mtp``: multi-token prediction modules."""
    # Imported here: the step model imports this module (cost.step -> frameworks), so a module
    # level import of planner.cost would close a cycle whenever frameworks is imported first.
    from planner.cost.batch import PlanArrays

    ctx = rules_context(PlanArrays.from_plans([plan]), [grad_accum_steps], [even], training,
                        None if group is None else [group], moe, mtp, autotp, gqa)
    return {fw: [message for f, _, message, pred in RULES
                 if f == fw and bool(np.asarray(pred(ctx), dtype=bool)[0])]
            for fw in FRAMEWORKS}


def frameworks_for(plan, grad_accum_steps: int, even: bool, training,
                   group: int | None = None, moe: bool = False, mtp: bool = False,
                   autotp: int = 0, gqa: bool = False) -> list[str]:
    """The frameworks that run one plan as predicted."""
    reasons = reasons_by_framework(plan, grad_accum_steps, even, training, group, moe, mtp,
                                   autotp, gqa)
    return [fw for fw in FRAMEWORKS if not reasons[fw]]
