"""Work of one transformer layer (and of the embedding and LM head) on one GPU, one micro-batch.

FLOPs are those of the matmuls (2 per multiply-add), as in Narayanan et al. SC'21 eq. (3):
a GPT layer's forward is 24 b s h^2 + 4 b s^2 h; here generalised to GQA (K and V projections of
width kv_heads * head_dim) and SwiGLU (three h x f matrices). Backward is twice the forward.

Activation memory per layer follows Korthikanti et al., MLSys'23, section 4 (34 s b h + 5 a s^2 b
bytes for a 16-bit GPT layer without parallelism), generalised the same way: every tensor the
backward pass needs is counted with its width, so GQA shrinks K and V and SwiGLU stores three
f-wide tensors instead of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from planner.cost.efficiency import EfficiencyModel
from planner.specs import GPUSpec, ModelSpec, ParallelPlan, TrainingSpec


class LayerShape(NamedTuple):
    """The plan variables a layer's work depends on (a ParallelPlan also has them)."""

    tp: int = 1
    cp: int = 1
    micro_batch_size: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False


@dataclass(frozen=True)
class LayerWork:
    """Seconds and bytes of one layer for one micro-batch on one GPU."""

    fwd_s: float            # forward compute (GEMMs, attention, memory-bound kernels)
    bwd_s: float            # backward compute
    recompute_s: float      # extra forward work caused by the recompute mode
    attn_core_fwd_s: float  # attention core (scores and weighted sum) forward, for CP overlap
    fwd_flops: float        # model FLOPs of the forward pass
    recompute_flops: float  # FLOPs re-executed by the recompute mode
    stored_bytes: float     # activations kept for backward, per micro-batch
    working_bytes: float    # full activations of the layer while it is recomputed/backpropagated
    elementwise_bytes: float = 0.0  # bytes the memory-bound kernels move, forward


def tokens_per_gpu(plan: ParallelPlan | LayerShape, training: TrainingSpec) -> int:
    """Tokens of one micro-batch handled by one GPU (context parallelism splits the sequence)."""
    return plan.micro_batch_size * training.seq_length // plan.cp


def linear_gemms(model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape
                 ) -> list[tuple[float, float, float]]:
    """The linear layers' forward GEMMs on one GPU for one micro-batch: (M, N, K) with the TP
    split on N (column parallel) or K (row parallel)."""
    t = plan.tp
    T = tokens_per_gpu(plan, training)
    h, f = model.hidden_size, model.ffn
    up_width = (model.mlp_matrices - 1) * f  # gate+up fused for SwiGLU, fc1 for GELU
    return [
        (T, (model.q_width + 2 * model.kv_width) / t, h),   # QKV projection (column parallel)
        (T, h, model.q_width / t),                          # attention output (row parallel)
        (T, up_width / t, h),                               # MLP up (+gate)
        (T, h, f / t),                                      # MLP down (row parallel)
    ]


def layer_work(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> LayerWork:
    t, cp = plan.tp, plan.cp
    T = tokens_per_gpu(plan, training)
    s_kv = training.seq_length
    h, f = model.hidden_size, model.ffn
    qw, kvw = model.q_width, model.kv_width
    heads = model.num_attention_heads / t
    d = model.d_head
    e = training.activation_bytes
    peak = gpu.peak_flops(training.precision)
    hbm = gpu.memory_bandwidth_gb_per_s * 1e9

    gemms = linear_gemms(model, training, plan)
    linear_flops = sum(2 * m * n * k for m, n, k in gemms)
    linear_s = sum(eff.gemm_time(m, n, k, peak) for m, n, k in gemms)

    # Attention core: Q K^T and P V, per head and sequence: 2 * (s/cp) * s * d each, counted
    # without causal savings as in the paper's 4 b s^2 h.
    b = plan.micro_batch_size
    attn_flops = 2 * 2 * b * heads * (s_kv / cp) * s_kv * d
    if training.flash_attention:
        attn_s = attn_flops / (peak * eff.gemm_efficiency(s_kv / cp, s_kv, d)
                               * eff.attention_fraction)
        attn_bytes = 0.0
    else:
        # Batched GEMMs of (s, s, d) and (s, d, s), plus the fused scale-mask-softmax that reads
        # and writes the s x s scores (and the dropout that reads, masks and writes them).
        attn_s = (eff.gemm_time(s_kv / cp, s_kv, d, peak, b * heads)
                  + eff.gemm_time(s_kv / cp, d, s_kv, peak, b * heads))
        score_elems = b * heads * (s_kv / cp) * s_kv
        attn_bytes = score_elems * (2 * e + (2.5 * e if training.dropout else 0))

    # Memory-bound kernels, forward (reads + writes). Norms and residual adds act on the full
    # hidden state on every TP rank, unless sequence parallelism splits them.
    sp_div = t if plan.sequence_parallel else 1
    replicated_elems = 10 * T * h / sp_div          # 2 norms (r+w) + 2 residual adds (2r+w)
    act_elems = T * f * (3 if model.ffn_type == "swiglu" else 2) / t
    elem_bytes = (replicated_elems + act_elems) * e + attn_bytes
    elem_s = eff.memory_time(elem_bytes, hbm)

    fwd_s = linear_s + attn_s + elem_s
    fwd_flops = linear_flops + attn_flops
    bwd_s = 2 * linear_s + (2.5 if training.flash_attention else 2) * attn_s + 2 * elem_s

    if plan.recompute == "full":
        recompute_s, recompute_flops = fwd_s, fwd_flops
    elif plan.recompute == "selective":
        recompute_s = attn_s + eff.memory_time(attn_bytes, hbm)
        recompute_flops = attn_flops
    else:
        recompute_s, recompute_flops = 0.0, 0.0

    # Stored activations (Korthikanti et al. section 4.1, generalised; bytes).
    mask = 1 if training.dropout else 0
    replicated_store = (4 * e + 2 * mask) * T * h / sp_div   # norm inputs/outputs, dropout masks
    split_store = (T * (qw + 2 * kvw) * e                  # Q, K, V
                   + T * qw * e                            # attention output (O-proj input)
                   + T * f * e * (3 if model.ffn_type == "swiglu" else 2) / 1) / t
    if training.flash_attention:
        core_store = b * heads * (s_kv / cp) * 4            # softmax log-sum-exp, fp32
    else:
        core_store = b * heads * (s_kv / cp) * s_kv * (e + (mask + e) * mask)
    full_layer = replicated_store + split_store + core_store
    if plan.recompute == "full":
        stored = T * h * e / sp_div                          # the layer input only
    elif plan.recompute == "selective":
        stored = replicated_store + split_store
    else:
        stored = full_layer
    return LayerWork(fwd_s, bwd_s, recompute_s, attn_s, fwd_flops, recompute_flops, stored,
                     full_layer, elem_bytes)


@dataclass(frozen=True)
class HeadWork:
    """The LM head and loss (last stage), and the embedding lookup (first stage)."""

    head_fwd_s: float
    head_bwd_s: float
    head_flops: float
    logits_bytes: float
    embed_s: float


def head_work(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> HeadWork:
    t = plan.tp
    T = tokens_per_gpu(plan, training)
    h, V = model.hidden_size, model.vocab_size
    peak = gpu.peak_flops(training.precision)
    hbm = gpu.memory_bandwidth_gb_per_s * 1e9
    gemm_s = eff.gemm_time(T, V / t, h, peak)
    flops = 2 * T * (V / t) * h
    # Cross-entropy over fp32 logits: write, read for softmax, write gradient (4 bytes each).
    loss_s = eff.memory_time(3 * 4 * T * V / t, hbm)
    embed_s = eff.memory_time(2 * T * h * training.activation_bytes, hbm)
    return HeadWork(
        head_fwd_s=gemm_s + loss_s,
        head_bwd_s=2 * gemm_s + loss_s,
        head_flops=flops,
        logits_bytes=4 * T * V / t,   # Korthikanti et al.: 4 s b v / t for the fp32 logits
        embed_s=embed_s,
    )
