"""The project's vocabularies, each defined once: the names requests, results, the CLI and
the API share (DESIGN.md's contract). Tuples of the values come from the Literals."""

from __future__ import annotations

from typing import Literal, get_args

Collective = Literal["broadcast", "reduce", "all_reduce", "scatter", "gather", "all_gather",
                     "reduce_scatter", "all_to_all", "send_recv"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)

Tier = Literal["intra_node", "inter_node"]

Recompute = Literal["none", "selective", "full"]
RECOMPUTE: tuple[Recompute, ...] = get_args(Recompute)
# What Megatron-LM's selective recompute recomputes (--recompute-modules; transformer_config.py).
RecomputeModule = Literal["core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts",
                          "mla_up_proj"]
RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = get_args(RecomputeModule)
# Whose selective recompute a plan's "selective" is: Megatron-LM's modules, or torchtitan's
# per-op policy (activation_checkpoint.selective_ac_option = "op").
SelectiveRecompute = Literal["modules", "per_op"]
# Which fused attention kernel the software runs: the GPU's default (its attention_efficiency),
# or a named one whose published rates the GPU spec carries (GPUSpec.attention_kernels).
AttentionKernel = Literal["default", "flash1", "flash2", "flash_triton"]
ATTENTION_KERNELS: tuple[AttentionKernel, ...] = get_args(AttentionKernel)
# Whose ring attention runs context parallelism: Transformer Engine's (Megatron-Core), or
# PyTorch's experimental context_parallel (torch.distributed.tensor.experimental), torchtitan's,
# rotating K and V step by step (rotate method "alltoall") or all-gathering them ("allgather");
# or no ring: all-to-all context parallelism (DeepSpeed-Ulysses' scheme, Transformer Engine's
# cp_comm_type "a2a").
RingAttention = Literal["te", "torch", "torch_allgather", "a2a", "a2a+p2p"]
RING_ATTENTIONS: tuple[RingAttention, ...] = get_args(RingAttention)
# Tensor parallelism's communication overlap (planner/cost/tp_overlap.py): none, Transformer
# Engine's userbuffers (Megatron-LM --tp-comm-overlap), or PyTorch's micro-pipelined TP on
# symmetric memory (torchtitan's AsyncTP).
TpCommOverlap = Literal["none", "te", "async_tp"]
# How a MoE layer copies its tokens around the experts: Megatron-Core's fused permutation,
# torchtitan's eager one, DeepSpeed's AutoEP layer (planner/cost/moe_routing.py).
MoeRouting = Literal["fused", "torchtitan", "autoep"]
# How the cross-entropy loss runs over the logits: Megatron-Core's (an fp32 copy worked in
# place), PyTorch's eager F.cross_entropy over an fp32 copy, or a fused kernel over the 16-bit
# logits (planner/cost/layers.py loss_peak_bytes).
LossImplementation = Literal["megatron", "eager", "fused"]

Strategy = Literal["DP", "TP", "PP", "CP", "EP", "ZeRO"]

ValidationMode = Literal["full", "sampled"]
ValidationModeChoice = Literal["auto", "full", "sampled"]
VALIDATION_MODES: tuple[ValidationModeChoice, ...] = get_args(ValidationModeChoice)
ProbeCompute = Literal["auto", "gemm", "emulate"]
PROBE_COMPUTE: tuple[ProbeCompute, ...] = get_args(ProbeCompute)
