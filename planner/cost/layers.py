"""Work of one transformer layer (and of the embedding and LM head) on one GPU, one micro-batch,
as kernel times from their shapes (``kernels.py``).

Linear layers: QKV and MLP-up (+gate) are column parallel (N split by tp), attention-out and
MLP-down row parallel (K split by tp) (Narayanan et al. SC'21 section 2.3); each forward GEMM
(M, N, K) has two backward GEMMs, dgrad (M, K, N) and wgrad (K, N, M). With fp8 (or NVFP4)
training the linear GEMMs run at the fp8 (fp4) rate and their inputs are cast (``CAST_BYTES``);
attention and the LM head stay in 16 bits (Transformer Engine's recipe in Megatron-LM).

Attention: fused (FlashAttention) does the causal half of the score matrix, 2 b a_t d s^2 / cp
FLOPs forward on each rank of a load-balanced context-parallel ring, 2.5 times that backward
(``kernels.py``); unfused attention (2021-era kernels) runs two batched GEMMs over the whole
s x s matrix and streams the scores through a fused scale-mask-softmax (or, without softmax
fusion, through a scale, a masked_fill and a softmax: two more passes over the scores each
way). Model FLOPs, for
``tflops_per_gpu`` and ``mfu``, follow the published convention of Narayanan et al. SC'21
eq. (3): 24 b s h^2 + 4 b s^2 h per GPT layer forward (generalised to GQA and SwiGLU), attention
counted without the causal saving, backward twice the forward.

Memory-bound kernels (forward, reads + writes): two norms, two residual adds (on the whole
hidden state per TP rank unless sequence parallelism splits it), the MLP activation, dropout
masks; backward moves twice those bytes. Every kernel also pays the fixed per-kernel overhead.

Activation memory per layer follows Korthikanti et al., MLSys'23, section 4 (34 s b h + 5 a s^2 b
bytes for a 16-bit GPT layer without parallelism), generalised the same way: every tensor the
backward pass needs is counted with its width, so GQA shrinks K and V and SwiGLU stores three
f-wide tensors instead of two.

MLA (DeepSeek-V3): the query and key/value down-projections are replicated over the TP ranks
(Megatron-Core's MLA builds them unsplit), the up-projections column parallel; attention core
FLOPs use the query/key width (nope + rope) for Q K^T and the value width for P V.
Sliding-window layers attend to min(window, s) keys (``ModelSpec.attention_keys``).

MoE layers (Megatron-Core's alltoall dispatcher, MoE Parallel Folding: Liu et al. 2025, arXiv
2504.14960): each GPU routes its tokens (T / tp of them: the TP ranks split the dispatch) to
top-k experts; ``pairs = T k / tp`` token copies leave it over the EP all-to-all, and the
busiest GPU of the EP group receives ``pairs * load`` of them (``TrainingSpec.moe_load``:
routing imbalance, capped by a capacity factor). Its E / ep local experts run as one grouped
GEMM of (pairs etp ep / E) * load tokens each on a 1 / etp slice of the expert width (the ETP
ranks share the same tokens). Shared experts are a TP-split dense MLP on every token. A model
with dense and MoE layers is costed as its mean layer (each quantity mixed by the share of MoE
layers), which spreads DeepSeek-V3's three dense layers evenly over the pipeline stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

from planner.cost.efficiency import DEFAULT_ATTENTION_HALF_SEQ, EfficiencyModel
from planner.cost.kernels import KernelModel
from planner.cost.moe_routing import chunk_sort_bytes, routing_applies, routing_bytes
from planner.cost.ring import received_kv_width, torch_ring_extras, uses_torch_ring
from planner.cost.ulysses import (
    A2A_CALLS_PER_PASS,
    COPIES_PER_TENSOR,
    a2a_copy_bytes,
    cp_split,
    uses_a2a,
)
from planner.specs import GPUSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.gpu import Precision
from planner.vocabulary import RECOMPUTE


class LayerShape(NamedTuple):
    """The plan variables a layer's work depends on (a ParallelPlan also has them)."""

    tp: int = 1
    cp: int = 1
    micro_batch_size: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    ep: int = 1
    etp: int = 1


@dataclass(frozen=True)
class LayerWork:
    """Seconds and bytes of one layer for one micro-batch on one GPU."""

    fwd_s: float            # forward compute (GEMMs, attention, memory-bound kernels)
    bwd_s: float            # backward compute
    recompute_s: float      # extra forward work caused by the recompute mode
    attn_core_fwd_s: float  # attention core forward (what CP's ring exchanges hide behind)
    fwd_flops: float        # model FLOPs of the forward pass (published convention)
    recompute_flops: float  # model FLOPs re-executed by the recompute mode
    stored_bytes: float     # activations kept for backward, per micro-batch
    working_bytes: float    # full activations of the layer while it is recomputed/backpropagated
    elementwise_bytes: float = 0.0  # bytes the memory-bound kernels move, forward
    attn_core_bwd_s: float = 0.0    # attention core backward
    dgrad_colpar_s: float = 0.0     # dgrad GEMMs of QKV and MLP-up (hide SP's input re-gather)
    wgrad_colpar_s: float = 0.0     # their wgrad GEMMs (hide the input gradient's reduction)


class TPRecompute(Protocol):
    """What ``distributes_saved_input`` reads of a plan (a ParallelPlan, a LayerShape or a
    PlanEstimate)."""

    @property
    def tp(self) -> int: ...
    @property
    def sequence_parallel(self) -> bool: ...
    @property
    def recompute(self) -> str: ...


def distributes_saved_input(training: TrainingSpec, plan: TPRecompute) -> bool:
    """Whether full recompute keeps 1/tp of each checkpointed layer's input per rank and
    all-gathers it before the recompute (``TrainingSpec.distribute_saved_activations``): only
    with tensor parallelism, without sequence parallelism (Megatron-LM refuses the two
    together: TransformerConfig raises 'distribute_saved_activations ... must be false when
    sequence parallel is enabled'; its checkpoint already keeps the split input) and under
    full recompute (megatron/training/arguments.py asserts recompute_granularity 'full')."""
    return (training.distribute_saved_activations and plan.tp > 1
            and not plan.sequence_parallel and plan.recompute == "full")


def tokens_per_gpu(plan: ParallelPlan | LayerShape, training: TrainingSpec) -> int:
    """Tokens of one micro-batch handled by one GPU (context parallelism splits the sequence)."""
    return plan.micro_batch_size * training.seq_length // plan.cp


def attention_gemms(model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape
                    ) -> tuple[list[tuple[float, float, float]], list[int]]:
    """The attention block's linear GEMMs (M, N, K) on one GPU for one micro-batch, and the
    indices of the column-parallel ones (split on N) before the core; the output projection
    (row parallel, split on K) comes last."""
    t, h = plan.tp, model.hidden_size
    T = tokens_per_gpu(plan, training)
    if model.kv_lora_rank is not None:       # MLA
        rq, rkv = model.q_lora_rank, model.kv_lora_rank
        a = model.num_attention_heads
        q: list[tuple[float, float, float]] = (
            [(T, rq, h), (T, model.q_width / t, rq)] if rq else [(T, model.q_width / t, h)])
        gemms = q + [(T, rkv + model.qk_rope_head_dim, h),
                     (T, a * (model.d_head + model.v_dim) / t, rkv)]
        colpar = [i for i, g in enumerate(gemms) if g[2] == rq or g[2] == rkv] + (
            [0] if not rq else [])
    else:
        gemms, colpar = [(T, (model.q_width + 2 * model.kv_width) / t, h)], [0]
    return gemms + [(T, h, model.o_width / t)], colpar


def mlp_gemms(model: ModelSpec, tokens: float, tp: int, width: float
              ) -> list[tuple[float, float, float]]:
    """A TP-split MLP of ``width`` on ``tokens``: up (+gate; column parallel), down (row)."""
    up = (model.mlp_matrices - 1) * width     # gate+up fused for SwiGLU, fc1 for GELU
    return [(tokens, up / tp, model.hidden_size), (tokens, model.hidden_size, width / tp)]


def linear_gemms(model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape
                 ) -> list[tuple[float, float, float]]:
    """A dense layer's linear forward GEMMs on one GPU for one micro-batch: (M, N, K) with the
    TP split on N (column parallel: QKV, MLP up) or K (row parallel: attention out, MLP down)."""
    gemms, _ = attention_gemms(model, training, plan)
    return gemms + mlp_gemms(model, tokens_per_gpu(plan, training), plan.tp, model.ffn)


def moe_tokens(model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape
               ) -> tuple[float, float]:
    """(pairs, tokens per local expert): the routed token copies one GPU dispatches per MoE
    layer and micro-batch (T k / tp), and the tokens each of its E / ep experts computes on the
    busiest GPU ((pairs etp ep / E) * load)."""
    pairs = tokens_per_gpu(plan, training) * model.top_k / plan.tp
    return pairs, pairs * plan.etp * plan.ep / model.experts * training.moe_load


def expert_gemms(model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape
                 ) -> list[tuple[float, float, float, float]]:
    """A MoE layer's GEMMs beside attention on one GPU: the router (M, E, h), the local experts
    as grouped GEMMs (M_e, N, K, E / ep), the shared experts (TP-split MLP); (M, N, K, count)."""
    T = tokens_per_gpu(plan, training)
    h, fe, E = model.hidden_size, model.expert_ffn, model.experts
    _, m_e = moe_tokens(model, training, plan)
    local = E / plan.ep
    router_tokens = T / plan.tp if plan.sequence_parallel else T
    out = [(router_tokens, E, h, 1.0),
           (m_e, (model.mlp_matrices - 1) * fe / plan.etp, h, local),
           (m_e, h, fe / plan.etp, local)]
    if model.shared_ffn:
        out += [(m, n, k, 1.0) for m, n, k in mlp_gemms(model, T, plan.tp, model.shared_ffn)]
    return out


# Kernels Transformer Engine launches to quantise one tensor for an fp8 GEMM, by recipe, when
# it quantises a GroupedLinear's per-expert tensors one by one (``multi_tensor_quantize_impl``
# in transformer_engine/pytorch/csrc/extensions/cast.cpp, TE 2.8: only delayed scaling has the
# fused multi-tensor cast-transpose): Float8CurrentScalingQuantizer::quantize computes the
# amax, the scale from it and the cast (3 kernels); Float8BlockQuantizer::quantize and
# MXFP8Quantizer::quantize are one each.
PER_EXPERT_QUANTISE_KERNELS = {"delayed": 0, "tensorwise": 3, "blockwise": 1, "mxfp8": 1,
                               "nvfp4": 2}

# HBM bytes per 16-bit element of a GEMM input quantised for fp8, by recipe: read 2 and write
# 1; per-tensor current scaling reads it once more for the amax (2 more); MXFP8 writes both
# the rowwise and the columnwise quantisation from one read, each with an E8M0 scale per 32
# elements (Transformer Engine's MXFP8BlockScaling: "when Transformer Engine needs both the
# MXFP8 tensor and its transpose ... both versions are computed from the high precision
# input"; transformer_engine/common/recipe/__init__.py). NVFP4 (precision 'fp4') reads the
# input once for the per-tensor amax its fp32 second-level scale needs, once more to quantise,
# and writes both directions at half a byte with an E4M3 scale per 16 elements (the same
# file's NVFP4BlockScaling: "a 2 level block scaling strategy ... both versions are computed
# from the high precision input"; the random Hadamard transform it applies to the wgrad
# operands is costed inside those passes).
CAST_BYTES = {"delayed": 3.0, "tensorwise": 5.0, "blockwise": 3.0, "mxfp8": 2 + 2 * (1 + 1 / 32),
              "nvfp4": 2 + 2 + 2 * (0.5 + 1 / 16)}


def quantisation(training: TrainingSpec) -> str | None:
    """How the linear GEMMs' inputs are quantised: the fp8 recipe, 'nvfp4' in fp4, None in
    16 or 32 bits."""
    if training.precision == "fp4":
        return "nvfp4"
    return training.fp8_recipe if training.precision == "fp8" else None


def per_expert_kernels(model: ModelSpec, training: TrainingSpec,
                       plan: ParallelPlan | LayerShape) -> tuple[float, float]:
    """Kernels a MoE layer launches, forward and backward, beyond one per routed-expert GEMM
    and pass, when its local experts run one GEMM each (``TrainingSpec.moe_expert_gemm``
    'per_expert': Transformer Engine's GroupedLinear issues ``num_gemms`` cuBLAS calls over
    its compute streams, ``multi_stream_cublas_gemm`` in common/gemm/cublaslt_gemm.cu). The
    two routed GEMMs (up/gate, down) run once forward and twice backward (dgrad, wgrad) per
    expert; in fp8 each expert's two GEMM inputs (forward) and two output gradients
    (backward) are quantised separately."""
    if not model.is_moe or training.moe_expert_gemm == "grouped" or model.experts <= plan.ep:
        return 0.0, 0.0
    recipe = quantisation(training)
    quant = PER_EXPERT_QUANTISE_KERNELS[recipe] if recipe else 0
    extra = model.experts / plan.ep - 1
    return extra * 2 * (1 + quant), extra * 2 * (2 + quant)


def hbm_bytes_per_s(gpu: GPUSpec, eff: EfficiencyModel) -> float:
    """The HBM bandwidth memory-bound kernels reach, with the efficiency model's overrides."""
    return (gpu.memory_bandwidth_gb_per_s * 1e9 * (eff.hbm_efficiency or gpu.hbm_efficiency)
            * eff.compute_scale)


@lru_cache(maxsize=8)
def kernel_model(gpu: GPUSpec, training: TrainingSpec, eff: EfficiencyModel,
                 gemm_precision: Precision | None = None) -> KernelModel:
    """The GPU's rates for this training's precision, with the efficiency model's overrides
    (a pure function of its frozen arguments: the most recent 8 are kept)."""
    prec: Precision = gemm_precision or training.precision
    fp8 = prec in ("fp8", "fp4")                   # quantised GEMMs (fp8, or NVFP4)
    base: Precision = "bf16" if fp8 or prec == "bf16" else prec
    attn_prec: Precision = (base if gpu.peak_tflops.model_dump().get(base)
                            else training.precision)
    if not fp8:
        rate = gpu.matmul_efficiency
    elif prec == "fp4":
        rate = gpu.fp4_matmul_efficiency or gpu.matmul_efficiency
    elif training.fp8_recipe == "mxfp8" and gpu.mxfp8_matmul_efficiency is not None:
        rate = gpu.mxfp8_matmul_efficiency          # block-scaled GEMMs (Blackwell)
    else:
        rate = gpu.fp8_matmul_efficiency or gpu.matmul_efficiency
    matmul = eff.compute_scale * (eff.matmul_peak_fraction or rate)
    # The main loop's fixed cost (filling the tile pipeline, writing the output) takes the same
    # time whatever the tensor cores' speed, so in units of K it grows with the rate of one SM:
    # ``matmul_half_dim`` is given for an A100 SM (312 TFLOP/s over 108 SMs).
    peak = gpu.peak_flops(prec)
    k0 = eff.matmul_half_dim
    if gpu.sm_count:
        k0 *= (peak / gpu.sm_count) / (312e12 / 108)
    # The attention kernel: the GPU's default (its attention_efficiency, the efficiency model's
    # half sequence and head-size curve) or a named one's published rates, which the efficiency
    # model's fields override for both passes where a request sets them.
    kernel = gpu.attention_rate(training.attention_kernel)
    half = eff.attention_half_seq
    scale = eff.compute_scale
    attention = (
        {"attention_efficiency": scale * (eff.attention_fraction or gpu.attention_efficiency),
         "attention_half_seq": DEFAULT_ATTENTION_HALF_SEQ if half is None else half}
        if kernel is None else
        {"attention_efficiency": scale * (eff.attention_fraction or kernel.forward),
         "attention_half_seq": kernel.forward_half_seq if half is None else half,
         "attention_bwd_efficiency": scale * (eff.attention_fraction or kernel.backward),
         "attention_bwd_half_seq": kernel.backward_half_seq if half is None else half,
         "attention_head_half": kernel.head_dim_half})
    return _shared(KernelModel(
        peak_flops=peak,
        attention_peak_flops=gpu.peak_flops(attn_prec),
        matmul_efficiency=matmul,
        **attention,
        attention_tiled=training.attention_kernel != "flash1",
        hbm_bytes_per_s=hbm_bytes_per_s(gpu, eff),
        sm_count=gpu.sm_count,
        k_overhead=k0,
        kernel_overhead_s=eff.kernel_overhead_us * 1e-6,
    ))


@lru_cache(maxsize=8)
def _shared(km: KernelModel) -> KernelModel:
    """One instance per distinct kernel model (the most recent 8: each may hold
    ``kernels.GEMM_MEMO`` GEMM times), so that its memoised GEMM times (``KernelModel.gemm``)
    serve every layer costed on it."""
    return km


def layer_work(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> LayerWork:
    """One layer's work under the plan's recompute mode (``layer_works``)."""
    return layer_works(model, training, plan, gpu, eff)[plan.recompute]


def layer_works(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> dict[str, LayerWork]:
    """One layer's seconds and bytes for one micro-batch under each recompute mode ('none',
    'selective', 'full'; the plan's own ``recompute`` is not read): the GEMMs, attention and
    memory-bound kernels are the same in all, only what the backward reruns and what the
    forward stores differ, so they are costed once."""
    t, cp, b = plan.tp, plan.cp, plan.micro_batch_size
    T = tokens_per_gpu(plan, training)
    s = training.seq_length
    h, f = model.hidden_size, model.ffn
    heads = model.num_attention_heads / t
    e = training.activation_bytes
    recipe = quantisation(training)
    fp8 = recipe is not None                       # quantised linear GEMMs (fp8, or NVFP4)
    km = kernel_model(gpu, training, eff)          # linear GEMMs (fp8/fp4 when training so)
    k16 = kernel_model(gpu, training, eff, "bf16") if fp8 else km
    phi = model.moe_share                          # share of MoE layers in the mean layer

    # Linear layers: forward, and backward as dgrad + wgrad per GEMM; (M, N, K, count, share
    # of the mean layer). Column-parallel GEMMs hide SP's input re-gather and the input
    # gradient's reduction.
    attn, colpar = attention_gemms(model, training, plan)
    dense_mlp = mlp_gemms(model, T, t, f)
    gemms = [(m, n, k, 1.0, 1.0) for m, n, k in attn]
    gemms += [(m, n, k, 1.0, 1.0 - phi) for m, n, k in dense_mlp]
    colpar = colpar + [len(attn)]
    if phi:
        gemms += [(m, n, k, c, phi) for m, n, k, c in expert_gemms(model, training, plan)]
        if model.shared_ffn:
            colpar.append(len(gemms) - 2)
    gemm_flops = [w * 2 * m * n * k * c for m, n, k, c, w in gemms]
    gemm_fwd = [w * km.gemm(m, n, k, c) for m, n, k, c, w in gemms]
    linear_flops, fwd_lin = sum(gemm_flops), sum(gemm_fwd)
    dgrad = [w * km.gemm(m, k, n, c) for m, n, k, c, w in gemms]
    wgrad = [w * km.gemm(k, n, m, c) for m, n, k, c, w in gemms]
    # fp8 casts of the GEMM inputs (``CAST_BYTES`` by ``TrainingSpec.fp8_recipe``); per-tensor
    # current scaling launches its amax and scale kernels besides.
    current = recipe in ("tensorwise", "nvfp4")    # an amax pass before each cast
    cast_bytes = (CAST_BYTES[recipe] * sum(w * m * k * c for m, _, k, c, w in gemms)
                  if recipe else 0.0)
    routed_excess = 0.0
    if phi:   # model FLOPs count the mean routed load, the kernels the busiest rank's
        pairs, m_e = moe_tokens(model, training, plan)
        routed_excess = phi * 2 * model.experts / plan.ep * m_e * (
            1 - 1 / training.moe_load) * model.expert_params / plan.etp
        linear_flops -= routed_excess

    # Attention core: Q K^T over the query/key width, P V over the value width.
    unfused_bytes, unfused_kernels = 0.0, 0
    width = model.qk_head_dim + model.v_dim
    model_attn_flops = 2 * b * heads * (s / cp) * model.attention_keys(s) * width
    if training.flash_attention:
        exec_flops = 2 * b * heads * (s / cp) * model.attention_keys(s, causal=True) * width
        d_attn = width / 2                  # MLA: the mean of its query/key and value heads
        # Each of the c ring steps is one call over an s / c chunk on heads / a heads, its
        # grid sized as a causal chunk's (the load-balanced steps' half chunks do the same
        # work): a ring of cp ranks (a = 1, c = cp), all-to-all context parallelism one call
        # over the whole sequence on heads / cp heads (a = cp, c = 1), the hierarchy between
        # (ulysses.cp_split).
        a2a, ring_steps = cp_split(training, cp)
        keys, calls, grid = s / ring_steps, ring_steps, b * heads / a2a
        attn_f = k16.attention(exec_flops, keys, kernels=calls, head_dim=d_attn,
                               batch_heads=grid)
        attn_b = k16.attention(2.5 * exec_flops, keys, kernels=calls, head_dim=d_attn,
                               backward=True, batch_heads=grid)
        attn_bytes = 0.0
    else:
        d = model.d_head
        attn_f = (k16.gemm(s / cp, s, d, b * heads) + k16.gemm(s / cp, d, s, b * heads))
        attn_b = 2 * attn_f
        score_elems = b * heads * (s / cp) * s
        attn_bytes = score_elems * (2 * e + (2.5 * e if training.dropout else 0))
        if not training.softmax_fusion:
            # Scale and mask as kernels of their own (x * scale; masked_fill), each reading and
            # writing the scores forward and their gradient backward; the softmax is the
            # fused kernel's own pass.
            unfused_bytes, unfused_kernels = 4 * e * score_elems, 2

    # Memory-bound kernels, forward (reads + writes). Norms and residual adds act on the whole
    # hidden state on every TP rank unless sequence parallelism splits them.
    sp_div = t if plan.sequence_parallel else 1
    hidden = T * h / sp_div
    norm_bytes = 2 * 2 * hidden * e                          # 2 norms: read + write
    residual_bytes = 2 * 3 * hidden * e                      # 2 adds: read 2, write 1
    act_factor = 3 if model.ffn_type == "swiglu" else 2
    act_bytes = (1 - phi) * T * f / t * e * act_factor
    moe_store = moe_act_out = moe_shared = 0.0
    routed = expert_act = router = shared_act = routing_bwd_extra = 0.0
    if phi:
        # Routed tokens: permuted and unpermuted around the all-to-all (read + write each),
        # the experts' activation function, the router's fp32 scores and top-k; shared
        # experts' activation like a dense MLP's.
        expert_tokens = m_e * model.experts / plan.ep
        router_tokens = T / t if plan.sequence_parallel else T
        # The copies around the experts as the layer's code makes them (moe_routing.py;
        # Megatron-Core's fused permutation: 4 e a copy), the backward's beyond twice the
        # forward's apart.
        kind = routing_applies(training.moe_routing, training.moe_dispatcher, plan.ep)
        routed, routed_b = routing_bytes(kind, pairs * training.moe_load * h, T * h / t, e)
        sorts = chunk_sort_bytes(training.moe_routing, training.moe_dispatcher,
                                 model.experts / plan.ep, expert_tokens * h, e)
        routed, routed_b = routed + sorts, routed_b + sorts
        routing_bwd_extra = phi * (routed_b - 2 * routed)
        expert_act = expert_tokens * model.expert_ffn / plan.etp * e * act_factor
        router = 3 * router_tokens * model.experts * 4
        shared_act = T * model.shared_ffn / t * e * act_factor
        act_bytes += phi * (routed + expert_act + router + shared_act)
        # Stored for backward: router scores, the routed tokens (expert inputs, and their
        # outputs for the weighted combine), the experts' up/gate outputs and activation, the
        # shared experts' like a dense MLP.
        lin = training.quantised_bytes if fp8 else e   # the experts' GEMM inputs kept quantised
        moe_act_out = phi * expert_tokens * model.expert_ffn / plan.etp * lin
        moe_shared = phi * T * model.shared_ffn / t * (e * (act_factor - 1) + lin)
        moe_store = (phi * (2 * router_tokens * model.experts * 4
                            + expert_tokens * h * (e + lin)
                            + expert_tokens * model.expert_ffn / plan.etp * e * (act_factor - 1))
                     + moe_act_out + moe_shared)
    dropout_bytes = 2 * hidden * 1 if training.dropout else 0.0   # masks, 1 byte each
    elem_bytes = norm_bytes + residual_bytes + act_bytes + dropout_bytes + attn_bytes + cast_bytes
    elem_kernels = 5 + (4 if fp8 else 0) + (4 if current else 0) + (
        2 if not training.flash_attention else 0) + (
        6 * phi)
    eager_f, eager_b, eager_k = (eager_elementwise_bytes(model, T, t, e, phi, expert_act,
                                                          training.repeat_kv)
                                 if training.eager_elementwise else (0.0, 0.0, 0))
    # The layer's two norms run as eager ops (``TrainingSpec.norm_fusion`` false).
    norm = norm_work(training, 2 * hidden)
    norm_f, norm_kf = norm.fwd_bytes, 2 * norm.fwd_kernels
    norm_b, norm_kb = norm.bwd_bytes, 2 * norm.bwd_kernels
    elem_f = km.memory(elem_bytes + eager_f + unfused_bytes + norm_f,
                       kernels=elem_kernels + eager_k + unfused_kernels + norm_kf)
    elem_b = km.memory(2 * elem_bytes + eager_b + unfused_bytes + norm_b + routing_bwd_extra,
                       kernels=2 * (elem_kernels + eager_k) + unfused_kernels + norm_kb)
    # PyTorch's ring attention merges and accumulates in fp32 with eager kernels (ring.py),
    # part of the attention op (a per-op policy keeps its output); its SDPA receives K and V
    # at every query head under ``repeat_kv``, else at their own. Costed with whatever kernel
    # the ring calls, as its exchanges are (tables.cp_uses).
    ring_f = ring_b = 0.0
    if uses_torch_ring(training, cp):
        ring = torch_ring_extras(T * model.o_width / t, T * received_kv_width(model, training) / t,
                                 cp)
        ring_f = km.memory(ring.fwd_bytes, kernels=ring.fwd_kernels)
        ring_b = km.memory(ring.bwd_bytes, kernels=ring.bwd_kernels)
    elif uses_a2a(training, cp):
        # The copies around the all-to-alls (ulysses.py), every pass.
        copies = a2a_copy_bytes(model, T, t, e)
        kernels = A2A_CALLS_PER_PASS * COPIES_PER_TENSOR
        ring_f = ring_b = km.memory(copies, kernels=kernels)

    # Local experts launched one GEMM (and fp8 quantisation) each: their fixed costs.
    pe_f, pe_b = (phi * n * km.kernel_overhead_s
                  for n in per_expert_kernels(model, training, plan))
    fwd_s = fwd_lin + attn_f + elem_f + pe_f + ring_f
    bwd_s = sum(dgrad) + sum(wgrad) + attn_b + elem_b + pe_b + ring_b
    # The host's floor (``EfficiencyModel.layer_host_floor_us``): a pass takes at least the
    # time an eager stack needs to issue it, a third of the layer's floor forward (and in a
    # full recompute's rerun), two thirds backward.
    floor = eff.layer_host_floor_us * 1e-6
    fwd_s, bwd_s = max(fwd_s, floor / 3), max(bwd_s, 2 * floor / 3)
    fwd_flops = linear_flops + model_attn_flops

    # What each mode runs again in the backward: (seconds, model FLOPs).
    full_s, full_flops = fwd_s, fwd_flops
    if training.recompute_early_stop:
        # Nothing the backward reads comes after the MLP's input to its down projection
        # (``TrainingSpec.recompute_early_stop``): the second residual add is not rerun,
        # nor, where no dropout mask follows it, the dense MLP's down projection.
        full_s -= km.memory(residual_bytes / 2, kernels=1)
        if not training.dropout:
            down = len(attn) + 1
            full_s -= gemm_fwd[down]
            full_flops -= gemm_flops[down]
    per_op = training.selective_recompute == "per_op"
    if per_op:
        # torchtitan's per-op policy counts a block's matmuls in call order (wq, wk, wv, wo,
        # then w1, w3, w2 with SwiGLU or w1, w2 without) and recomputes every second one (wk,
        # wo, and w3 or w2) with every op that is not a matmul or the attention kernel: the
        # memory-bound kernels.
        sixth = (km.gemm(T, f / t, h) if model.ffn_type == "swiglu"
                 else gemm_fwd[len(attn) + 1])                 # w3, or the down projection
        selective = (km.gemm(T, model.kv_width / t, h) + gemm_fwd[len(attn) - 1] + sixth
                     + elem_f,
                     2 * T * model.kv_width / t * h + gemm_flops[len(attn) - 1]
                     + 2 * T * f / t * h)
    else:
        # Each of Megatron-LM's modules: (its forward GEMMs, indices into ``gemms``; its
        # memory-bound forward seconds; model FLOPs beyond its GEMMs'). ``moe`` recomputes the
        # whole MoE layer, its activation and shared experts included.
        a = len(attn)
        shared = tuple(range(a + 5, len(gemms))) if phi and model.shared_ffn else ()
        shared_act_s = km.memory(phi * shared_act, kernels=1) if shared else 0.0
        moe_s = (km.memory(phi * (routed + expert_act + router), kernels=4) + shared_act_s
                 + pe_f if phi else 0.0)
        work: dict[str, tuple[tuple[int, ...], float, float]] = {
            "core_attn": ((), attn_f + ring_f + (km.memory(attn_bytes, kernels=1)
                                                 if attn_bytes else 0.0), model_attn_flops),
            "layernorm": ((), km.memory(norm_bytes + norm_f, kernels=2 + norm_kf), 0.0),
            "mla_up_proj": (_up_projections(model), 0.0, 0.0),
            "mlp": ((a, a + 1), km.memory((1 - phi) * T * f / t * e * act_factor, kernels=1),
                    0.0),
            "moe": ((a + 2, a + 3, a + 4) + shared if phi else (), moe_s, -routed_excess),
            "moe_act": ((), km.memory(phi * expert_act, kernels=1) if phi else 0.0, 0.0),
            "shared_experts": (shared, shared_act_s, 0.0),
        }
        subsumed = {"moe_act", "shared_experts"} if "moe" in training.recompute_modules else set()
        again = [work[m] for m in training.recompute_modules if m not in subsumed]
        selective = (sum(sum(gemm_fwd[i] for i in idx) + s_ for idx, s_, _ in again),
                     sum(sum(gemm_flops[i] for i in idx) + fl for idx, _, fl in again))
    rerun = {"none": (0.0, 0.0), "selective": selective, "full": (full_s, full_flops)}
    distributed = distributes_saved_input(
        training, LayerShape(t, cp, b, "full", plan.sequence_parallel))
    # The forward keeps a fresh copy of its 1/tp share of the input (Megatron-LM's
    # split_tensor_into_1d_equal_chunks(new_buffer=True): read and write it); the recompute
    # does not split again.
    fwd_full = fwd_s + km.memory(2 * T * h * e / t, kernels=1) if distributed else fwd_s

    # Stored activations (Korthikanti et al. section 4.1, generalised; bytes). In fp8 training
    # Transformer Engine keeps a linear layer's input for its weight gradient as the fp8 copy
    # it cast for the forward GEMM (``_Linear.forward`` saves ``inputmat``, not
    # ``inputmat_no_fp8``, when fp8 is on): the norms' outputs, the attention output and the
    # MLP activation's output take 1 byte per element.
    mask = 1 if training.dropout else 0
    lin = training.quantised_bytes if fp8 else e
    # The norms' outputs, the column-parallel layers' inputs: sequence-parallel shards that
    # the backward gathers again, or, where the backward does not overlap its TP collectives
    # (``TrainingSpec.async_tensor_model_parallel_allreduce`` false), kept gathered.
    kept_gathered = plan.sequence_parallel and not training.async_tensor_model_parallel_allreduce
    out_div = 1 if kept_gathered else sp_div
    norm_out = 2 * lin * T * h / out_div
    replicated_store = ((2 * e + 2 * mask) * T * h / sp_div + norm_out    # norm in/out, masks
                        + norm.stored_bytes)            # eager norms' fp32
    # K and V as the attention op saves them: at every query head where the code expands
    # them first (``TrainingSpec.repeat_kv``; the expansion's input is not kept).
    kv_saved = received_kv_width(model, training)
    split_store = (T * (model.q_width + 2 * kv_saved) * e         # Q, K, V
                   + T * model.o_width * lin                      # attention output
                   + (1 - phi) * T * f * (e * (act_factor - 1) + lin)) / t + moe_store
    if training.flash_attention:
        core_store = b * heads * (s / cp) * 4               # softmax log-sum-exp, fp32
    else:
        core_store = b * heads * (s / cp) * s * (e + (mask + e) * mask)
    full_layer = replicated_store + split_store + core_store
    # The layer input only: split over the TP ranks by sequence parallelism, or by
    # distributing the saved input (``distributes_saved_input``).
    stored = {"none": full_layer, "full": T * h * e / (t if distributed else sp_div)}
    if per_op:
        # Kept: the block's input, the outputs of wq, wv, w1 (and with SwiGLU of w2, the
        # seventh matmul) and of the attention kernel (with its softmax statistics).
        kept_down = h / sp_div if model.ffn_type == "swiglu" else 0.0
        kept = e * T * (h / sp_div + kept_down + (model.q_width + model.kv_width
                                                  + model.o_width + f) / t) + core_store
    else:
        mods = training.recompute_modules
        kept = replicated_store + split_store
        if "core_attn" not in mods:
            kept += core_store
        if "layernorm" in mods:              # both norms' outputs (and eager ones' fp32 copy)
            kept -= norm_out + norm.stored_bytes
        if "mlp" in mods:                                    # a dense MLP keeps its input
            kept -= (1 - phi) * T * f * (e * (act_factor - 1) + lin) / t
        if "moe" in mods:                                    # a MoE layer keeps its input
            kept -= moe_store
        else:
            kept -= (moe_act_out if "moe_act" in mods else 0.0) + (
                moe_shared if "shared_experts" in mods else 0.0)
        if "mla_up_proj" in mods and model.mla:   # Q, K, V replaced by their latents
            kept += T * ((model.q_lora_rank or 0) + (model.kv_lora_rank or 0)
                         + model.qk_rope_head_dim) * e - T * (
                model.q_width + 2 * model.kv_width) * e / t
    stored["selective"] = kept
    dgrad_colpar, wgrad_colpar = sum(dgrad[i] for i in colpar), sum(wgrad[i] for i in colpar)
    return {mode: LayerWork(fwd_full if mode == "full" else fwd_s, bwd_s, rerun[mode][0], attn_f,
                            fwd_flops, rerun[mode][1], stored[mode], full_layer, elem_bytes,
                            attn_core_bwd_s=attn_b, dgrad_colpar_s=dgrad_colpar,
                            wgrad_colpar_s=wgrad_colpar)
            for mode in RECOMPUTE}


def eager_elementwise_bytes(model: ModelSpec, T: float, t: int, e: int, phi: float,
                            expert_act: float, repeat_kv: bool = True
                            ) -> tuple[float, float, int]:
    """HBM bytes (forward, backward) and kernels (per pass) that eager PyTorch's elementwise
    ops move beyond the fused kernels the layer is otherwise costed with
    (``TrainingSpec.eager_elementwise``), as torchtitan's Llama code runs them uncompiled:

    - rotary embeddings (``apply_rotary_emb``): ``x.float()`` (read e, write 4 bytes), the
      complex product with the frequencies (read 4, write 4), ``type_as`` back (read 4,
      write e), on every element of Q and K; autograd runs the same three backward. Fused
      kernels are not charged for the rotation at all, so all of it is extra. MLA rotates
      only its rotary part (qk_rope_head_dim per query head and one shared key head).
    - SwiGLU (``w2(F.silu(w1(x)) * w3(x))``): SiLU (read e, write e) and the product (read 2e,
      write e) instead of one fused kernel (read 2e, write e): 2e more an element forward;
      backward the product's two gradients (read 2e, write e each) and SiLU's (read 2e,
      write e), 9e against the fused 6e. Dense MLP, routed and shared experts alike.
    - grouped-query attention (``repeat_kv``, where the model code repeats them,
      ``TrainingSpec.repeat_kv``): K and V expanded to every query head and copied (read the
      kv heads, write all heads); backward sums the copies back."""
    if model.mla:
        rope = T * model.qk_rope_head_dim * (model.num_attention_heads / t + 1)
        repeat = 0.0
    else:
        rope = T * model.d_head * (model.num_attention_heads + model.kv_heads) / t
        repeat = (2 * T * model.d_head * (model.num_attention_heads + model.kv_heads) / t * e
                  if repeat_kv and model.grouped_query else 0.0)
    rope_bytes = rope * (2 * e + 16)
    swiglu = 0.0
    if model.ffn_type == "swiglu":
        swiglu = (1 - phi) * T * model.ffn / t + phi * expert_act / (3 * e)
        if phi and model.shared_ffn:
            swiglu += phi * T * model.shared_ffn / t
    fwd = rope_bytes + 2 * e * swiglu + repeat
    bwd = rope_bytes + 3 * e * swiglu + repeat
    kernels = 6 + (1 if swiglu else 0) + (2 if repeat else 0)
    return fwd, bwd, kernels


@dataclass(frozen=True)
class EagerNorm:
    """What one RMSNorm over ``elements`` values costs beyond the fused kernel the layer is
    otherwise costed with (``TrainingSpec.norm_fusion`` false): HBM bytes and kernels of the
    forward and of the backward, and bytes more kept for the backward."""

    fwd_bytes: float
    bwd_bytes: float
    fwd_kernels: int
    bwd_kernels: int
    stored_bytes: float


EAGER_NORM_FWD_KERNELS = 8     # cast, pow, mean, add, rsqrt, product, cast, weight product
EAGER_NORM_BWD_KERNELS = 14    # autograd's backward of each of them (eager_norm_work)


def norm_work(training: TrainingSpec, elements: float) -> EagerNorm:
    """What norms over ``elements`` values cost beyond fused kernels: nothing when they are
    fused (``TrainingSpec.norm_fusion``), ``eager_norm_work`` otherwise."""
    if training.norm_fusion:
        return EagerNorm(0.0, 0.0, 0, 0, 0.0)
    return eager_norm_work(elements, training.activation_bytes)


def eager_norm_work(elements: float, e: int) -> EagerNorm:
    """The reference RMSNorm as eager PyTorch runs it, op by op (Meta's Llama
    ``RMSNorm.forward``: ``self._norm(x.float()).type_as(x) * self.weight`` with ``_norm(x) =
    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``; torchtitan's ``norm_type
    'rmsnorm'`` before 2025 is the same code), bytes per element with e-byte activations and
    fp32 (4-byte) intermediates; per-row values (the mean, the reciprocal root) are h times
    smaller and left out:

    - forward: ``x.float()`` read e write 4; ``pow(2)`` read 4 write 4; ``mean`` read 4; the
      product with the root read 4 write 4; ``type_as`` read 4 write e; the weight product read
      e write e: 28 + 4e in 8 kernels, against the fused kernel's read e write e;
    - backward (autograd's formulas, ``derivatives.yaml``): the weight product's input
      gradient (read e, write e) and weight gradient (the product read 2e write e, its row sum
      read e); the cast back to fp32 (read e write 4); the root product's two gradients
      (read 4 write 4; read 8 write 4 and the row sum read 4); the mean's gradient expanded
      (write 4); ``pow``'s (``self.pow(1)`` read 4 write 4, times 2 read 4 write 4, times the
      gradient read 8 write 4); the sum of the input's two gradients (read 8 write 4); the
      cast back to e bytes (read 4 write e): 76 + 8e in 14 kernels, against the fused
      backward's 4e as the layer costs it (read and write, twice the forward);
    - kept for backward: the fp32 copy of the input (``pow`` and the product save it) in place
      of the e-byte input the fused kernel keeps: 4 - e more.

    In bf16: 36 and 92 bytes an element against 4 and 8."""
    return EagerNorm(
        fwd_bytes=(28 + 4 * e - 2 * e) * elements,
        bwd_bytes=(76 + 8 * e - 4 * e) * elements,
        fwd_kernels=EAGER_NORM_FWD_KERNELS - 1,
        bwd_kernels=EAGER_NORM_BWD_KERNELS - 2,
        stored_bytes=max(4 - e, 0) * elements,
    )


def _up_projections(model: ModelSpec) -> tuple[int, ...]:
    """Indices of MLA's up projections among the attention GEMMs (``attention_gemms``: what
    mla_up_proj recomputes: the query's up projection, or its only projection without a query
    LoRA, and the key/value up projection); none for other attention."""
    if not model.mla:
        return ()
    return (1, 3) if model.q_lora_rank else (0, 2)


def loss_peak_bytes(implementation: str, e: int) -> int:
    """Bytes a logit of memory at the cross-entropy's peak, the ``e``-byte logits included
    (``TrainingSpec.loss_implementation``). Megatron-Core's vocab-parallel cross-entropy
    (tensor_parallel/cross_entropy.py) casts the logits to an fp32 copy and works on it in place
    (max, subtraction, exp, division; the backward's update and product too) while the caller
    holds the 16-bit logits, and its gradient is cast back beside the fp32 one: e + 4.
    PyTorch's ``F.cross_entropy`` over ``logits.float()`` (torchtitan's loss) holds the logits,
    their fp32 copy and log_softmax's fp32 output at once: e + 8. A fused kernel keeps nothing
    but the logits, over which it writes their gradient: e (Transformer Engine's
    ``parallel_cross_entropy``, pytorch/triton/cross_entropy.py: an online softmax over the
    16-bit input, three fp32 values a row kept, the gradient stored into the input; the loss
    under ``torch.compile``). ``tests/test_loss_memory.py`` measures Megatron-Core's, PyTorch's
    and the compiled one on bf16 logits (6, 10 and 2) from the allocator's events. fp32 logits
    (``e`` 4) need no fp32 copy: ``.float()`` returns them as they are."""
    copy = 4 if e < 4 else 0
    return e + {"megatron": copy, "eager": copy + 4, "fused": 0}[implementation]


def costed_loss(training: TrainingSpec) -> str:
    """The cross-entropy a plan is costed with: ``training.loss_implementation``, but PyTorch's
    eager one over gathered logits (``vocab_parallel_loss`` false), where Megatron's cannot run."""
    if training.loss_implementation == "megatron" and not training.vocab_parallel_loss:
        return "eager"
    return training.loss_implementation


CE_FWD_BYTES = 38     # bytes moved per logit by the cross-entropy forward (``head_work``)
CE_BWD_BYTES = 14     # and by its backward


class GatheredLoss(NamedTuple):
    """Per logit of the whole vocabulary: HBM bytes and kernels of a loss over gathered
    logits, forward and backward, and the bytes kept for the backward."""

    fwd_bytes: float
    bwd_bytes: float
    fwd_kernels: int
    bwd_kernels: int
    kept_bytes: float
    gather_bytes: float = 0.0     # of fwd_bytes: the gather's copies and concatenation,
    gather_kernels: int = 0       # which a recomputed LM head runs again (recompute_head)


def gathered_loss(e: int, t: int) -> GatheredLoss:
    """A loss over logits gathered from the TP ranks (``TrainingSpec.vocab_parallel_loss``
    false): every rank gathers the e-byte logits and runs ``torch.nn.functional.cross_entropy``
    on them upcast to fp32. Both implementations on record cast first: Aleph Alpha's trainer
    (``output.activations.float()`` in its loss function, ``src/scaling/transformer/model/
    model.py``, later ``losses/cross_entropy.py``) and torchtitan without loss parallel
    (``pred.flatten(0, 1).float()``, ``torchtitan/components/loss.py``).

    Forward: at tp > 1 the gather into a list of per-rank tensors (Aleph Alpha's
    ``all_concat``: ``torch.distributed.all_gather(tensor_list, ...)``, which ProcessGroupNCCL
    runs into one flat buffer and copies out rank by rank: read e, write e, t kernels) and
    their ``torch.cat`` (read e, write e); the cast (read e, write 4); fp32 ``log_softmax``
    (its max-and-sum pass reads 4, its output pass reads 4 and writes 4) and the NLL. Backward:
    the NLL gradient filled over the vocabulary (write 4) and scattered, ``log_softmax``'s
    backward (its sum pass reads 4, then the gradient and the output are read and the result
    written: 16), the cast's gradient back to e bytes (read 4, write e) and, at tp > 1, each
    rank's copy of its own slice (read and write e / t). Kept for the backward: the gathered
    logits (e) and the fp32 ``log_softmax`` output (4). Aleph Alpha's loss function also takes
    an ``argmax`` over the fp32 logits for its accuracy metric (4 bytes more forward): its
    own metric, not charged."""
    gather, gather_k = (4 * e, t + 1) if t > 1 else (0, 0)
    shard, shard_k = (2 * e / t, 1) if t > 1 else (0.0, 0)
    return GatheredLoss(fwd_bytes=gather + (e + 4) + 12, bwd_bytes=4 + 16 + (4 + e) + shard,
                        fwd_kernels=gather_k + 3, bwd_kernels=4 + shard_k, kept_bytes=e + 4,
                        gather_bytes=gather, gather_kernels=gather_k)


@dataclass(frozen=True)
class HeadWork:
    """The LM head and loss (last stage), and the embedding lookup (first stage)."""

    head_fwd_s: float
    head_bwd_s: float
    head_flops: float
    logits_bytes: float           # kept for the backward between the loss and its gradient
    embed_s: float
    gathered_bytes: float = 0.0   # the logits all-gathered over TP before a non-parallel loss
    # The head's forward without the loss, which ``TrainingSpec.recompute_head`` reruns in the
    # backward: the final norm, the GEMM and, before a gathered loss, the gather's copies and
    # concatenation (the tables add the all-gather itself). The logits it rebuilds are
    # transient and not added to the stage's memory.
    rerun_s: float = 0.0
    # Memory at the loss's peak (``loss_peak_bytes``), the kept logits included: what the last
    # stage holds on top of its stored activations while the loss runs.
    loss_peak_bytes: float = 0.0


def head_work(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> HeadWork:
    t = plan.tp
    T = tokens_per_gpu(plan, training)
    h = model.hidden_size
    # Megatron-LM pads the vocabulary to a multiple of 128 * tp (--make-vocab-size-divisible-by).
    V = -(-model.vocab_size // (128 * t)) * 128 * t
    km = kernel_model(gpu, training, eff, "bf16" if quantisation(training) else None)
    gemm_f = km.gemm(T, V / t, h)
    gemm_b = km.gemm(T, h, V / t) + km.gemm(h, V / t, T)
    flops = 2 * T * (V / t) * h
    # Final norm, and Megatron-Core's vocab-parallel cross-entropy over the logits
    # (tensor_parallel/cross_entropy.py), bytes per logit: forward, the cast of the 16-bit
    # logits to fp32 (read 2, write 4), the max (read 4), the in-place subtraction of it, the
    # exp and the division by the sum (read 4, write 4 each) and the sum (read 4): 38 in six
    # kernels; backward, the in-place product with the output gradient (read 4, write 4) and
    # the cast's gradient back to 16 bits (read 4, write 2): 14 in two.
    logits = T * V / t
    e = training.activation_bytes
    norm_bytes = 2 * T * h * e
    norm = norm_work(training, T * h)
    if training.vocab_parallel_loss:
        ce_f, ce_b, k_f, k_b = CE_FWD_BYTES * logits, CE_BWD_BYTES * logits, 7, 3
        peak = loss_peak_bytes(costed_loss(training), e) * logits
        # Korthikanti et al.: 4 s b v / t for the fp32 logits (a fused loss keeps no more
        # than its peak)
        kept = min(4 * logits, peak)
        gathered = 0.0
        rerun_bytes, rerun_k = 0.0, 0
    else:                             # every rank: the whole vocabulary, upcast to fp32
        g = gathered_loss(e, t)
        ce_f, ce_b = g.fwd_bytes * T * V, g.bwd_bytes * T * V
        k_f, k_b = g.fwd_kernels, g.bwd_kernels
        rerun_bytes, rerun_k = g.gather_bytes * T * V, g.gather_kernels
        peak = loss_peak_bytes(costed_loss(training), e) * T * V
        # the gathered logits and the fp32 log_softmax output
        kept = min(g.kept_bytes * T * V, peak)
        gathered = e * T * V if t > 1 else 0.0
    loss_f = km.memory(ce_f + norm_bytes + norm.fwd_bytes, kernels=k_f + norm.fwd_kernels)
    loss_b = km.memory(ce_b + norm_bytes + norm.bwd_bytes, kernels=k_b + norm.bwd_kernels)
    embed_s = km.memory(2 * T * h * e, kernels=1)
    return HeadWork(
        head_fwd_s=gemm_f + loss_f,
        head_bwd_s=gemm_b + loss_b,
        head_flops=flops,
        logits_bytes=kept,
        embed_s=embed_s,
        gathered_bytes=gathered,
        rerun_s=gemm_f + km.memory(norm_bytes + norm.fwd_bytes + rerun_bytes,
                                   kernels=norm.fwd_kernels + rerun_k),
        loss_peak_bytes=peak,
    )


@dataclass(frozen=True)
class MtpWork:
    """One multi-token prediction module's own work, its transformer layer (costed as the
    model's mean layer) and its pass through the LM head and loss (``head_work``) apart."""

    fwd_s: float
    bwd_s: float
    flops: float


MTP_FWD_BYTES = 11    # bytes per hidden value moved by an MTP module's forward (``mtp_work``)
MTP_BWD_BYTES = 15    # and by its backward


def mtp_work(
    model: ModelSpec, training: TrainingSpec, plan: ParallelPlan | LayerShape, gpu: GPUSpec,
    eff: EfficiencyModel,
) -> MtpWork:
    """Megatron-LM's ``MultiTokenPredictionLayer._concat_embeddings``: the embedding of the
    shifted tokens, its norm and the hidden state's (enorm, hnorm), their concatenation, the
    column-parallel projection eh_proj (T x 2h by 2h x h / t), and the module's final norm.
    Memory-bound bytes per hidden value (sequence-parallel tokens): forward, the lookup
    (write 1), two norms (read 1 write 1 each), the concatenation (read 2 write 2) and the
    final norm (2): 11 in five kernels; backward, three norms' gradients (read 2 write 1 each),
    the concatenation's split (4) and the embedding gradient's scatter-add (2): 15 in six."""
    t, h = plan.tp, model.hidden_size
    T = tokens_per_gpu(plan, training)
    km = kernel_model(gpu, training, eff)
    gemm_f = km.gemm(T, h / t, 2 * h)
    gemm_b = km.gemm(T, 2 * h, h / t) + km.gemm(2 * h, h / t, T)
    values = (T / t if plan.sequence_parallel else T) * h * training.activation_bytes
    return MtpWork(
        fwd_s=gemm_f + km.memory(MTP_FWD_BYTES * values, kernels=5),
        bwd_s=gemm_b + km.memory(MTP_BWD_BYTES * values, kernels=6),
        flops=2 * T * (h / t) * 2 * h,
    )
