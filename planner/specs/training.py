"""What is being trained: batch, sequence, number formats and framework behaviour."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.specs.gpu import Precision
from planner.vocabulary import (
    RECOMPUTE_MODULES,
    AttentionKernel,
    LossImplementation,
    MoeRouting,
    RecomputeModule,
    RingAttention,
    SelectiveRecompute,
    TpCommOverlap,
)

Optimizer = Literal["adam", "adamw", "sgd"]
GradDtype = Literal["fp32", "bf16", "fp16"]
StateDtype = Literal["fp32", "bf16", "fp16", "fp8"]

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


class TrainingSpec(BaseModel):
    """One optimizer step's shape and the framework's relevant switches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    global_batch_size: int = Field(ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_length: int = Field(ge=1, le=100_000_000, description="Tokens per sequence.")
    precision: Precision = Field(
        "bf16", description="Math precision of the matmuls. bf16/fp16/fp8/fp4 imply mixed "
        "precision (16-bit weights, fp32 master weights and optimizer states); fp32/tf32 keep "
        "fp32 weights. fp4 is NVFP4 (Transformer Engine's NVFP4BlockScaling, Megatron-LM "
        "--fp4-format e2m1 --fp4-recipe nvfp4, Blackwell only): the linear layers' forward, "
        "dgrad and wgrad GEMMs in 4 bits, 1x16 blocks with E4M3 scales under a per-tensor fp32 "
        "scale, attention and the output layer in bf16."
    )
    fp8_recipe: Literal["delayed", "tensorwise", "blockwise", "mxfp8"] = Field(
        "delayed", description="fp8 scaling recipe (Megatron-LM --fp8-recipe, Transformer "
        "Engine's recipes). 'delayed': the scale comes from the amax history, one read of each "
        "tensor to quantise it. 'tensorwise': per-tensor current scaling (Float8CurrentScaling, "
        "Megatron-Bridge's H100 'FP8-CS' recipes, torchao's float8 training), which reads each "
        "tensor twice, once for its amax and once to cast (Transformer Engine, 'FP8 Delayed "
        "Scaling': 'FP8 Current Scaling requires two tensor reads per quantization'): 2 more "
        "bytes a 16-bit element and one more kernel a cast. 'blockwise': 1x128 / 128x128 block "
        "scales (DeepSeek-V3's recipe), costed as one read (the block amax is taken in the "
        "quantising pass). 'mxfp8': Transformer Engine's MXFP8BlockScaling (Blackwell only, "
        "the GPU's mxfp8_matmul_efficiency; Megatron-Bridge's 'FP8-MX'/'MXFP8' recipes, "
        "torchao's mxfp8_cublas): 1x32 blocks with E8M0 scales, one kernel that reads the "
        "16-bit input once and writes both the rowwise and the columnwise quantisation, "
        "since the two are not each other's transpose (4 + 2/32 bytes written and read a "
        "16-bit element). Megatron-LM recomputes layernorm and moe_act under fp8 only with a "
        "recipe other than delayed.")
    optimizer: Optimizer = Field("adamw", description="adam/adamw: 2 fp32 states; sgd: 1 (momentum).")
    grad_dtype: GradDtype = Field(
        "fp32", description="Gradient accumulation and reduction dtype (Megatron keeps fp32 main "
        "grads by default; bf16 halves the DP traffic and gradient memory)."
    )
    grad_reduce_dtype: GradDtype | None = Field(
        None, description="The dtype the data-parallel gradient reduction runs in when it is "
        "not grad_dtype: the gradients accumulate in grad_dtype and are cast for the "
        "reduction, bucket by bucket (Aleph Alpha's trainer accumulates bf16 gradients on its "
        "bf16 parameters and all-reduces them in fp32, ``allreduce_tensor_in_float32``). "
        "Null: grad_dtype.")
    optimizer_state_dtype: StateDtype = Field(
        "fp32", description="Storage dtype of Adam's two moments (Megatron-LM "
        "--use-precision-aware-optimizer --exp-avg-dtype / --exp-avg-sq-dtype, Transformer "
        "Engine's FusedAdam; the update itself runs in fp32): bf16 halves them, 8 instead of "
        "12 bytes of optimizer state per parameter with fp32 master weights.")
    master_weights: bool = Field(
        True, description="Mixed precision keeps an fp32 master copy of the weights, which the "
        "optimizer updates (Megatron-LM, DeepSpeed, FSDP over fp32 parameters: 4 bytes a "
        "parameter, ZeRO-sharded with the optimizer states). False: the optimizer updates the "
        "16-bit weights themselves, with no fp32 copy: torchtitan's training.dtype = "
        "\"bfloat16\" (\"all parameters, gradients, and optimizer states in bfloat16, without "
        "an extra copy of fp32 weights\"), or torch.optim on a model built in bf16 (NeMo "
        "AutoModel's MoE recipes); set grad_dtype and optimizer_state_dtype to bf16 with it, "
        "and grad_reduce_dtype fp32 where FSDP2 reduces in fp32 and casts back. No effect with "
        "fp32 or tf32 precision, which keeps no copy.")
    flash_attention: bool = Field(
        True, description="Fused attention (FlashAttention): no s x s score matrix is stored or "
        "streamed through HBM. False models the 2021-era fused-softmax kernels."
    )
    softmax_fusion: bool = Field(
        True, description="Without FlashAttention (flash_attention false): the scores' scaling, "
        "causal mask and softmax run as one fused kernel (Megatron-LM's FusedScaleMaskSoftmax, "
        "the default). False: as three kernels, as plain PyTorch attention code runs them "
        "(minGPT, nanoGPT's non-flash path; Megatron-LM --no-masked-softmax-fusion), two more "
        "reads and writes of the s x s scores each way.")
    norm_fusion: bool = Field(
        True, description="Each RMSNorm runs as one fused kernel forward and one backward "
        "(Transformer Engine's, Apex's, FlashAttention's RMS kernel, a Triton or compiled "
        "one). False: as the reference implementation's eager PyTorch ops (Meta's Llama and "
        "torchtitan's pre-2025 ``RMSNorm``: ``x.float()``, ``pow(2).mean(-1)``, ``rsqrt``, two "
        "products and a cast back): 36 bytes of HBM traffic per element forward and 92 "
        "backward in bf16, against 4 and 8 fused, in 8 and 14 kernels "
        "(``planner.cost.layers.eager_norm_work``), and an fp32 copy of the input kept for "
        "backward. Plain PyTorch LayerNorm (``nn.LayerNorm``) is a fused kernel: leave this "
        "true for it.")
    vocab_parallel_loss: bool = Field(
        True, description="The loss runs on each TP rank's share of the vocabulary "
        "(Megatron-LM's vocab-parallel cross-entropy, in fp32; torchtitan's loss parallel). "
        "False: the LM head's output is all-gathered over the TP ranks and every rank runs "
        "torch.nn.functional.cross_entropy over the whole vocabulary, upcast to fp32 (Aleph "
        "Alpha's trainer: its LM head is a ColumnParallelLinear with parallel_output false, "
        "whose all_concat gathers the logits rank by rank, and its loss casts them with "
        ".float() first).")
    loss_implementation: LossImplementation = Field(
        "megatron", description="How the cross-entropy runs over the logits, which sets the "
        "memory the last stage needs at the loss on top of its stored activations (bytes a "
        "logit with 16-bit logits, those included; planner/cost/layers.py loss_peak_bytes): "
        "'megatron', Megatron-Core's vocab-parallel cross-entropy (Megatron-LM's default, and "
        "its 'native' fusion), which copies the logits to fp32 and works in place (6); "
        "'eager', PyTorch's torch.nn.functional.cross_entropy over an fp32 copy, whose "
        "log_softmax output is a second fp32 tensor (10): torchtitan with its loss uncompiled "
        "(compile off, or before April 2025), Hugging Face-style loops; 'fused', a kernel "
        "that reads the 16-bit logits and writes their gradient over them (2): Transformer "
        "Engine's parallel_cross_entropy (Megatron-Core's cross_entropy_fusion_impl 'te', set "
        "by Megatron-Bridge's performance recipes), torchtitan's loss under torch.compile. A "
        "loss that is not vocab-parallel (vocab_parallel_loss false) runs PyTorch's loss over "
        "the gathered logits: 'megatron' is read as 'eager' there.")
    attention_kernel: AttentionKernel = Field(
        "default", description="Which fused attention kernel runs (with flash_attention): "
        "'default', the GPU's attention_efficiency (FlashAttention-2 on A100, cuDNN's fused "
        "attention as Transformer Engine runs it on H100/H200); 'flash2', FlashAttention-2 "
        "(flash-attn 2.x, PyTorch's SDPA flash backend); 'flash1', FlashAttention v1 "
        "(flash-attn 1.x); 'flash_triton', FlashAttention in Triton (2022-23, MPT's attn_impl "
        "'triton'). v1 and Triton run forward + backward at under half of FlashAttention-2's "
        "rate on A100. Named kernels take the GPU's attention_kernels rates.")
    ring_attention: RingAttention = Field(
        "te", description="Whose ring attention runs context parallelism (cp > 1): 'te', "
        "Transformer Engine's (Megatron-Core): K and V at their own head count passed ring "
        "step by ring step beside each step's attention, the partial outputs merged inside the "
        "kernels; 'torch', PyTorch's experimental context_parallel as torchtitan runs it with "
        "context_parallel_rotate_method 'alltoall': K and V (at the head count SDPA receives, "
        "repeat_kv) passed step by step, their gradients passed around the ring in fp32, the partial "
        "outputs and gradients merged and accumulated in fp32 by eager kernels "
        "(planner/cost/ring.py); 'torch_allgather', the same with rotate method 'allgather' "
        "(torchtitan's default of 2024): K and V all-gathered once per pass, behind the first "
        "step only; 'a2a', no ring: all-to-all context parallelism (DeepSpeed-Ulysses' scheme, "
        "Megatron-Core's --cp-comm-type a2a through Transformer Engine): Q, K, V and the "
        "output regrouped from tokens to heads and back by four exposed all-to-alls a pass, "
        "the attention run once over the whole sequence on heads / cp heads; needs the heads "
        "of a tensor-parallel rank (query and K,V) divisible by cp and fused attention "
        "(planner/cost/ulysses.py); 'a2a+p2p', both (Megatron-Core's --cp-comm-type a2a+p2p "
        "through Transformer Engine): the all-to-alls over groups of cp_a2a_size consecutive "
        "CP ranks, then Transformer Engine's ring over the cp / cp_a2a_size groups, each step "
        "on heads / cp_a2a_size heads; the head rule holds for cp_a2a_size.")
    cp_a2a_size: int | None = Field(
        None, ge=2, le=1024, validate_default=True, description="ring_attention 'a2a+p2p': the CP ranks each "
        "all-to-all spans (Megatron-LM --hierarchical-context-parallel-sizes cp_a2a_size "
        "cp/cp_a2a_size; consecutive CP ranks, so inside a node while tp x cp_a2a_size fits "
        "one). A plan's cp must be a multiple of it (at cp = cp_a2a_size Transformer Engine "
        "runs the all-to-all alone).")
    repeat_kv: bool = Field(
        False, description="Grouped-query attention: the model code expands K and V to every "
        "query head before the attention op (Meta's reference Llama and torchtitan through v0.2.1, "
        "``repeat_kv``; Hugging Face's eager attention), a copy each way that eager kernels "
        "pay (eager_elementwise), and PyTorch's ring attention (ring_attention 'torch', "
        "'torch_allgather') then passes, merges and accumulates K and V at every query head. "
        "False: the attention op takes them at their own head count (SDPA's enable_gqa, as "
        "torchtitan v0.2.2 calls it; Transformer Engine). Nothing changes without GQA.")
    dropout: bool = Field(False, description="Dropout layers are active (stores their masks).")
    recompute_modules: tuple[RecomputeModule, ...] = Field(
        ("core_attn",), min_length=1, max_length=7,
        description="What a plan's 'selective' recompute recomputes in backward (Megatron-LM "
        "--recompute-granularity selective --recompute-modules, default core_attn): "
        "core_attn (attention core), mlp (a dense MLP), moe (a whole MoE layer, its "
        "all-to-alls included), shared_experts, keeping only their inputs; layernorm (both "
        "norms), moe_act (the experts' activation function) and mla_up_proj (MLA's up "
        "projections) discard their outputs and recompute them.")
    selective_recompute: SelectiveRecompute = Field(
        "modules", description="Whose selective recompute a plan's 'selective' is: 'modules' "
        "(Megatron-LM, recompute_modules) or 'per_op' (torchtitan's activation_checkpoint "
        "selective_ac_option = \"op\": it keeps the outputs of the matmuls but every second "
        "one and of the attention kernel, and recomputes everything else; dense models).")
    overlap_grad_reduce: bool = Field(
        True, description="The DP gradient reduction overlaps the backward pass, bucket by bucket."
    )
    zero_grad_allreduce: bool = Field(
        False, description="ZeRO-1/2 all-reduce the gradients over the data-parallel group "
        "(every rank receives the whole sum and keeps its shard) instead of reduce-scattering "
        "them: twice the bytes on the wire. Aleph Alpha's trainer (``Optimizer."
        "allreduce_gradients`` with zero, in fp32 buckets) and DeepSpeed with "
        "``zero_optimization.reduce_scatter: false`` (``average_tensor``'s "
        "``gradient_reduction_w_predivide``) run it; Megatron-LM's distributed optimizer "
        "reduce-scatters.")
    overlap_param_gather: bool = Field(
        True, description="ZeRO-1/2: the all-gather of the updated weights overlaps the next "
        "step's forward pass (Megatron-LM --overlap-param-gather)."
    )
    fp8_param_gather: bool = Field(
        False, description="fp8 training: the data-parallel gathers of the transformer layers' "
        "weights (the distributed optimizer's once per step, ZeRO-3/FSDP's per layer) move "
        "fp8, 1 byte a weight instead of 2 (Megatron-LM --fp8-param-gather, which builds the "
        "layers under Transformer Engine's fp8_model_init, routed experts included; "
        "torchtitan quantize.linear.float8.enable_fsdp_float8_all_gather, which casts each "
        "Float8Linear weight's shard before FSDP's all-gather, dense models). Embeddings and "
        "the output layer gather in 16 bits. Memory "
        "is costed as without it: on Hopper an fp8 weight keeps a transposed fp8 copy beside "
        "its own for the backward (Transformer Engine's Float8Tensor ``_transpose``), 2 bytes "
        "a weight as the 16-bit copy was. Needs precision fp8, or fp4: NVFP4 weights gathered "
        "at half a byte and their E4M3 scales (Megatron-LM --fp4-param-gather).")
    zero3_prefetch_layers: float = Field(
        1.0, ge=0, le=64, description="ZeRO-3/FSDP: how many layers ahead the weights are "
        "gathered (FSDP2 and Megatron-FSDP: 1; 0: gathered on demand, e.g. DeepSpeed's default "
        "prefetch bucket of 5e7 parameters on layers far larger than that)."
    )
    zero3_gathers_per_layer: int = Field(
        1, ge=1, le=1000, description="ZeRO-3/FSDP: collective calls per layer per pass (1: one "
        "coalesced call per layer, FSDP2 and Megatron-FSDP; DeepSpeed gathers each submodule)."
    )
    zero3_max_reuse_params: float | None = Field(
        None, gt=0, le=1e15, description="ZeRO-3, dense models: DeepSpeed's "
        "stage3_max_reuse_distance (its default 1e9). A weight matrix released after a use is "
        "gathered again at its next use when at least this many parameters run in between, "
        "so under full recompute a layer's large matrices are gathered for the recompute and "
        "again for the backward (planner/cost/reuse.py). Null: a layer gathered for its "
        "backward stays gathered through its recompute and backward (FSDP, Megatron-FSDP; "
        "the planner's DeepSpeed configs set the distance to keep it so).")
    zero3_per_rank_copies: bool = Field(
        False, description="ZeRO-3: each gather writes into a list of per-rank views "
        "(torch.distributed.all_gather with a list output, as DeepSpeed's ZeRO-3 did in 2021: "
        "`_allgather_param`), so PyTorch's NCCL backend copies the gathered buffer out one "
        "rank at a time: group-size copies per call, each issued by the host "
        "(EfficiencyModel.copy_call_us); the lists are built in a Python loop, a view or two "
        "a rank (EfficiencyModel.view_call_us), and each gather's buffer is zero-filled "
        "first. False: one flat output buffer "
        "(all_gather_into_tensor: FSDP, Megatron-FSDP, DeepSpeed since 2022)."
    )
    zero3_per_parameter: bool = Field(
        False, description="ZeRO-2/3 shards every parameter on its own (PyTorch FSDP2's "
        "fully_shard, what torchtitan runs): each gather is copied out of the flat all-gather "
        "buffer into the parameters (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py "
        "`foreach_all_gather_copy_out`, split_with_sizes_copy) and each reduce-scatter's "
        "input is copied from the gradients into the reduce dtype "
        "(`foreach_reduce_scatter_copy_in`, chunk_cat), both on the compute stream: 4 bytes "
        "of HBM traffic a 16-bit parameter per gather and 2 + grad_dtype bytes per "
        "reduce-scatter. False: collectives read and write flat buffers in place (Megatron-LM's "
        "distributed optimizer and Megatron-FSDP, FSDP1's flat parameters, DeepSpeed).")
    hsdp_all_reduce_every_microbatch: bool = Field(
        False, description="Hybrid sharding (plan.dp_replicate) of ZeRO-2/3 without a pipeline: "
        "the replicas all-reduce every micro-batch's reduced gradients, not once a step. PyTorch "
        "FSDP2's HSDP does so unless set_requires_all_reduce(False) is called between "
        "micro-batches (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py "
        "all_reduce_grads, True by default), and torchtitan never calls it; under a pipeline "
        "torch.distributed.pipelining reduces at the last micro-batch either way. False: once "
        "a step (Megatron-LM's distributed optimizer instances and Megatron-FSDP at the last "
        "micro-batch, DeepSpeed's MiCS at the accumulation boundary).")
    grad_reduce_after_last_backward: bool = Field(
        False, description="With pipeline stages and ZeRO 1-3 (FSDP), each model chunk's "
        "once-a-step gradient reduction (and hybrid sharding's all-reduce across the replicas) "
        "starts after that chunk's last backward has finished, not bucket by bucket beside it: "
        "torch.distributed.pipelining turns FSDP's gradient sync off for every backward and "
        "runs FSDP's post-backward, its reduce-scatters, in a REDUCE_GRAD action after the "
        "stage's last backward (torch/distributed/pipelining/stage.py perform_reduce_grad, "
        "schedules.py _add_reduce_grad; in earlier releases at the end of "
        "backward_maybe_with_nosync's last backward), as torchtitan's pipelined FSDP runs. "
        "Without interleaving the whole reduction of the stage that finishes last is exposed; "
        "interleaved, each chunk's starts as its backwards end, as costed either way. False: "
        "buckets launch as their gradients are ready (Megatron-LM --overlap-grad-reduce). "
        "Moot when overlap_grad_reduce is false.")
    recompute_early_stop: bool = Field(
        False, description="Full recompute stops once every tensor the backward needs is "
        "rebuilt (PyTorch's non-reentrant torch.utils.checkpoint, early stop on by default "
        "since PyTorch 2.1; torchtitan's activation_checkpoint.early_stop, its default before "
        "August 2025): a layer's last ops, the residual add and, without dropout, the MLP's "
        "down projection, whose outputs no backward reads, are not run again. False: the "
        "whole layer forward reruns (Megatron-LM's and DeepSpeed's reentrant checkpoint "
        "functions, torchtitan since then).")
    distribute_saved_activations: bool = Field(
        False, description="Full recompute keeps only 1/tp of each checkpointed layer's input "
        "on each tensor-parallel rank and all-gathers it back before the layer is recomputed "
        "(Megatron-LM's --distribute-saved-activations: CheckpointFunction splits it with "
        "split_tensor_into_1d_equal_chunks and gathers it with gather_split_1d_tensor, "
        "megatron/core/tensor_parallel/random.py; DeepSpeed's activation_checkpointing."
        "partition_activations; metaseq's --distribute-checkpointed-activations, which "
        "OPT-175B trained with). Acts only where it changes something and where Megatron-LM "
        "accepts it: tensor parallelism without sequence parallelism (which splits the input "
        "already) under full recompute; one blocking all-gather of the layer's input per "
        "recomputed layer and micro-batch, and a copy of its 1/tp share in the forward.")
    recompute_head: bool = Field(
        False, description="Full recompute also reruns the input embedding, the final norm "
        "and the LM head (with its logits gather when the loss is not vocab-parallel) in the "
        "backward: Aleph Alpha's trainer's 'every_layer' activation checkpointing wraps each "
        "layer of its pipeline module, those among them, in its non-reentrant checkpoint "
        "(src/scaling/core/nn/parallel_module/parallel_module.py). False: only the "
        "transformer layers are recomputed (Megatron-LM, torchtitan, DeepSpeed).")
    eager_elementwise: bool = Field(
        False, description="The model code's elementwise work runs as PyTorch eager kernels, "
        "one op at a time (torchtitan without torch.compile, Aleph Alpha's trainer; "
        "torchtitan/models/llama "
        "`apply_rotary_emb`, `FeedForward.forward`, `repeat_kv`): rotary embeddings through "
        "fp32 complex tensors (a cast, a complex product, a cast back: 20 bytes of HBM "
        "traffic per element of Q and K in each pass), SwiGLU's SiLU and product as two "
        "kernels (10 bytes an element forward, 18 backward, against 6 and 12 fused), and "
        "grouped-query K and V copied out to every head. False: fused kernels (Transformer "
        "Engine's and Megatron-LM's fused RoPE and SwiGLU, torch.compile). Norms are costed "
        "as training.norm_fusion says.")
    microbatch_grad_copy: bool = Field(
        False, description="After every micro-batch's backward each parameter's 16-bit "
        "gradient is added into its fp32 main gradient, one parameter at a time: DeepSpeed's "
        "BF16_Optimizer (bf16 with fp32 gradient accumulation, ZeRO 0-1; "
        "deepspeed/runtime/bf16_optimizer.py `hp_grad.add_(lp.grad.to(fp32))`, per "
        "micro-batch from the pipeline engine since 2022, from grad hooks with "
        "`immediate_grad_update`), 18 bytes of HBM traffic a parameter and two kernels a "
        "parameter tensor. False: the weight-gradient GEMMs accumulate into the main "
        "gradients (Megatron-LM's gradient accumulation fusion) or autograd in place.")

    microbatch_grad_upcast: bool = Field(
        False, description="Under a pipeline, FSDP2 keeps each stage's unsharded gradients "
        "between micro-batches (torch.distributed.pipelining turns gradient sync off for every "
        "backward and reduce-scatters after the last) and accumulates each micro-batch's 16-bit "
        "gradients into fp32 ones, its reduce dtype (torch/distributed/fsdp/_fully_shard/"
        "_fsdp_param.py to_accumulated_grad_if_needed, accumulate_unsharded_grad_if_needed): "
        "10 bytes of HBM traffic a parameter and one kernel a parameter tensor per "
        "micro-batch, on the compute stream, for plans whose FSDP shards (dp x cp > 1) under "
        "pp > 1; torchtitan's, whose reduce dtype is always fp32. False: the weight-gradient "
        "GEMMs accumulate in place (Megatron-LM) or DeepSpeed's copy "
        "(microbatch_grad_copy).")
    async_tensor_model_parallel_allreduce: bool = Field(
        True, description="Without sequence parallelism, TP's backward all-reduce of each "
        "column-parallel layer's input gradient runs beside that layer's weight-gradient GEMM "
        "(Megatron-LM's LinearWithGradAccumulationAndAsyncAllreduce, "
        "--async-tensor-model-parallel-allreduce; Megatron-Core always). False: it blocks "
        "the backward (ColumnParallelLinear's copy_to_tensor_model_parallel_region before "
        "F.linear: Megatron-LM of 2021, the SC'21 runs, and the Megatron-DeepSpeed forks "
        "that trained MT-NLG and BLOOM). With sequence parallelism, False: the norm's output "
        "is gathered in the forward and kept gathered for the backward, which reduce-scatters "
        "the input gradient before it goes on (Aleph Alpha's trainer: RMSNorm's "
        "gather_from_sequence_parallel_region, whose backward reduce-scatters); True: "
        "Megatron-LM's re-gather beside the dgrad GEMM and reduce-scatter beside the wgrad "
        "GEMM.")
    tp_comm_overlap: TpCommOverlap = Field(
        "none", description="Whether and how the run pipelines tensor parallelism's "
        "all-gathers and reduce-scatters with the GEMMs that consume or produce them: 'te', "
        "Megatron-LM --tp-comm-overlap (Transformer Engine's userbuffers; "
        "megatron/training/arguments.py refuses it without --sequence-parallel); 'async_tp', "
        "torchtitan's parallelism.enable_async_tensor_parallel (PyTorch's micro-pipelined TP "
        "on symmetric memory; 'Async TP requires torch.compile', "
        "torchtitan/models/llama3/infra/parallelize.py); 'none'. true and false read as 'te' "
        "and 'none'. DeepSpeed has neither. Costed on sequence-parallel plans whose TP group "
        "sits inside a node: efficiency.tp_comm_overlap of the collectives that would block "
        "(default 0.8) hidden under the GEMMs, and the overlap's buffers in memory "
        "(planner/cost/tp_overlap.py).")
    tp_column_parallel_inputs: int = Field(
        2, ge=1, le=16, description="Without sequence parallelism: the column-parallel "
        "linears of a transformer layer that each bring their input into the TP region on "
        "their own (Megatron's f operator), so that each all-reduces its input gradient in "
        "the backward. 2 in Megatron-LM (one QKV and one fc1 GEMM, gate and up fused); 3 in "
        "Aleph Alpha's scaling trainer, whose SwiGLU runs dense_in and siglu_weight as two "
        "ColumnParallelLinear on the same input (src/scaling/core/nn/mlp.py, QKV fused by its "
        "default attention_qkv_in_one); 5 where q, k, v, gate and up are five linears, as "
        "DeepSpeed's AutoTP wraps a Hugging Face Llama layer (deepspeed/module_inject/"
        "layers.py LinearLayer: ColumnParallel's backward all-reduces per linear). With "
        "sequence parallelism the input is gathered once per block and its gradient "
        "reduce-scattered once, whatever this count.")
    p2p_scatter_gather: bool = Field(
        False, description="Pipeline sends split over the TP ranks even without sequence "
        "parallelism (Megatron-LM's 2021 scatter/gather optimisation, SC'21 section 4.1; "
        "DeepSpeed's pipeline engine partitions activations alike). False: Megatron-Core "
        "sends each TP rank's whole [s/cp, b, h] activation unless sequence parallelism "
        "splits it.")
    overlap_p2p_comm: bool = Field(
        True, description="The interleaved schedule's pipeline sends and receives run beside "
        "the next chunk's compute (Megatron-LM's overlap_p2p_comm: opt-in as "
        "--overlap-p2p-communication from May 2023, the default from October 2023, "
        "--no-overlap-p2p-communication turns it off; Megatron-Bridge's CommOverlapConfig "
        "turns it on with virtual stages). False: every exchange blocks its stage "
        "(Megatron-Core's batched send_forward_backward_recv_forward_backward): one after each "
        "warm-up forward, one after each backward of a model chunk, as Megatron-LM ran "
        "interleaving before that option, and as Megatron-Core's own ModelParallelConfig "
        "defaults. Plain 1F1B always blocks.")

    moe_load_imbalance: float = Field(
        1.1, ge=1.0, le=64.0, description="MoE: tokens the busiest expert-parallel rank "
        "receives over the mean (it sets the pace of the grouped GEMMs and the all-to-all). "
        "Wang et al. 2024 (arXiv 2408.15664, Table 2) measured the busiest expert at 1.04x the "
        "mean with loss-free balancing and 1.52-1.72x with an auxiliary loss over a whole "
        "validation set; a rank holding several experts averages their loads. NVIDIA's "
        "published MoE benchmarks force-balance the routing (1.0).")
    moe_capacity_factor: float | None = Field(
        None, gt=0, le=64.0, description="MoE: expert capacity as a multiple of the mean load "
        "(Megatron-LM --moe-expert-capacity-factor); tokens beyond it are dropped, so the "
        "busiest rank computes at most this share. Null: dropless.")

    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        "alltoall", description="MoE token dispatch: 'alltoall' (Megatron-LM "
        "--moe-token-dispatcher-type alltoall, torchtitan's standard backend, DeepSpeed's "
        "AutoEP: one copy per routed expert) or 'deepep' (DeepEP / HybridEP kernels, "
        "Megatron-LM's flex dispatcher and torchtitan's deepep backend: a token crosses the "
        "network once per destination node and fans out over NVLink).")
    moe_routing: MoeRouting = Field(
        "fused", description="How the MoE layer copies its tokens around the experts "
        "(planner/cost/moe_routing.py): 'fused', Megatron-Core's fused permute and unpermute "
        "(--moe-permute-fusion) "
        "(4 bytes a routed copy forward in bf16); 'torchtitan', its eager gathers, padded "
        "permutation and put-backs and an fp32 combine over the k copies (32 bytes; not "
        "under DeepEP, whose wrapper's copies are near the fused ones); 'autoep', "
        "DeepSpeed's AutoEP layer, the same with a zeroed unpermutation and a two-op fp32 "
        "combine (42 bytes; where ep > 1).")
    moe_a2a_overlap: bool = Field(
        False, description="MoE: the EP all-to-alls of one micro-batch overlap another's "
        "compute (Megatron-LM --overlap-moe-expert-parallel-comm --delay-wgrad-compute).")
    moe_expert_gemm: Literal["per_expert", "grouped"] = Field(
        "per_expert", description="MoE: how the local experts' GEMMs launch. 'per_expert': "
        "one cuBLAS GEMM per local expert, spread over 4 streams (Transformer Engine's "
        "GroupedLinear, which Megatron-Core's TEGroupedMLP runs under --moe-grouped-gemm: "
        "nvte_multi_stream_cublas_gemm, TE 1.9 to 2.x), and under fp8 without delayed scaling "
        "each expert's GEMM inputs and output gradients quantised one by one (tensorwise: "
        "amax, scale and cast, 3 kernels; blockwise: 1); a for-loop over the experts "
        "(torchtitan use_grouped_mm = false) launches alike. 'grouped': one grouped-GEMM "
        "kernel for all local experts (torchtitan's torch._grouped_mm, the default).")

    @field_validator("tp_comm_overlap", mode="before")
    @classmethod
    def _overlap_as_a_flag(cls, v: object) -> object:
        """true / false: Megatron-LM's flag (Transformer Engine's userbuffers) or none."""
        return {True: "te", False: "none"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("recompute_modules")
    @classmethod
    def _modules_once(cls, v: tuple[RecomputeModule, ...]) -> tuple[RecomputeModule, ...]:
        dup = sorted({m for m in v if v.count(m) > 1})
        if dup:
            raise ValueError(f"{', '.join(dup)} listed more than once")
        return tuple(sorted(v, key=RECOMPUTE_MODULES.index))

    @model_validator(mode="after")
    def _fp8_gather_needs_fp8(self) -> TrainingSpec:
        if self.fp8_param_gather and self.precision not in ("fp8", "fp4"):
            raise ValueError(f"fp8_param_gather needs precision fp8 (got {self.precision}): "
                             "only fp8 (or fp4) weights can be gathered in fp8 (or fp4)")
        return self

    @field_validator("cp_a2a_size")
    @classmethod
    def _hierarchy_needs_its_size(cls, size: int | None, info: ValidationInfo) -> int | None:
        # A field's own check (not the model's), so a refusal names training.cp_a2a_size.
        ring = info.data.get("ring_attention")
        if ring == "a2a+p2p" and size is None:
            raise ValueError("ring_attention 'a2a+p2p' needs cp_a2a_size: the CP ranks each "
                             "all-to-all spans (Megatron-LM --hierarchical-context-parallel-"
                             "sizes)")
        if size is not None and ring is not None and ring != "a2a+p2p":
            raise ValueError(f"cp_a2a_size applies to ring_attention 'a2a+p2p' only (got "
                             f"{ring!r})")
        return size

    @model_validator(mode="after")
    def _states_need_adam(self) -> TrainingSpec:
        if self.optimizer_state_dtype != "fp32" and self.optimizer == "sgd":
            raise ValueError("optimizer_state_dtype other than fp32 needs Adam (Megatron-LM's "
                             "precision-aware optimizer is Transformer Engine's FusedAdam)")
        return self

    @property
    def moe_load(self) -> float:
        """The busiest expert-parallel rank's tokens over the mean."""
        if self.moe_capacity_factor is None:
            return self.moe_load_imbalance
        return min(self.moe_load_imbalance, self.moe_capacity_factor)

    @property
    def param_bytes(self) -> int:
        """Bytes of the working copy of each weight (fp8 training keeps bf16 weights)."""
        return 4 if self.precision in ("fp32", "tf32") else 2

    @property
    def quantised_bytes(self) -> float:
        """Bytes an element of a tensor quantised for the low-precision GEMMs: fp8 1; NVFP4
        half a byte and an E4M3 scale per 16 elements."""
        return 0.5 + 1 / 16 if self.precision == "fp4" else 1.0

    @property
    def layer_gather_bytes(self) -> float:
        """Bytes per weight of a transformer layer on the wire of a data-parallel weight gather
        (``fp8_param_gather``: the quantised weights, ``quantised_bytes``)."""
        return self.quantised_bytes if self.fp8_param_gather else self.param_bytes

    @property
    def activation_bytes(self) -> int:
        return 4 if self.precision in ("fp32", "tf32") else 2

    @property
    def grad_bytes(self) -> int:
        return DTYPE_BYTES[self.grad_dtype]

    @property
    def grad_reduce_bytes(self) -> int:
        """Bytes per gradient on the wire of the data-parallel reduction."""
        return DTYPE_BYTES[self.grad_reduce_dtype or self.grad_dtype]

    @property
    def optimizer_state_bytes(self) -> int:
        """Bytes per parameter of optimizer state (Rajbhandari et al. SC'20, K in 2+2+K).

        Mixed precision Adam: fp32 master weights + momentum + variance = 12 (K=12);
        mixed precision SGD with momentum: master + momentum = 8; fp32 training has no master
        copy: Adam 8, SGD 4. Moments stored in ``optimizer_state_dtype`` (bf16: Adam 4 + 4).
        Without ``master_weights`` no copy either: pure bf16 Adam with bf16 moments 4.
        """
        return self._states * DTYPE_BYTES[self.optimizer_state_dtype] + 4 * self._master

    @property
    def _states(self) -> int:
        return 2 if self.optimizer in ("adam", "adamw") else 1

    @property
    def _master(self) -> int:
        return int(self.master_weights and self.precision not in ("fp32", "tf32"))

    @property
    def no_master_copy(self) -> bool:
        """16-bit weights updated in place (``master_weights`` false)."""
        return not self.master_weights and self.precision not in ("fp32", "tf32")

    @property
    def optimizer_step_bytes(self) -> int:
        """HBM bytes the optimizer step moves per parameter it updates: it reads the gradient,
        the master weight and the states and writes the master weight, the states and the
        16-bit working copy (mixed-precision Adam with fp32 states: 4 + 4 + 8 read, 4 + 8 + 2
        written = 30; with bf16 moments 22); without a master copy it reads and writes the
        weight itself."""
        states = 2 * self._states * DTYPE_BYTES[self.optimizer_state_dtype]
        weights = 4 + 4 + self.param_bytes if self._master else 2 * self.param_bytes
        return self.grad_bytes + states + weights


def reduced_after_backward(pp, zero, vpp):
    """The plans (scalars or numpy arrays of their degrees) whose once-a-step gradient
    reduction ``TrainingSpec.grad_reduce_after_last_backward`` moves after the last backward:
    pipelined ZeRO 1-3 plans without interleaving (interleaved, each chunk's reduction is
    released after its last backward either way; DDP and plans without a pipeline reduce
    beside the backward)."""
    return (pp > 1) & (zero >= 1) & (vpp == 1)
