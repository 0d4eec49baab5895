"""Kernel times from shapes: GEMMs with tile and wave quantisation, fused attention, memory-bound
kernels.

GEMM (M, N, K), 2MNK FLOPs. cuBLAS splits the output into tiles, one thread block (CTA) per tile,
and runs them in waves of one CTA per streaming multiprocessor; a tile is paid in full at the
matrix edge, and a partly empty last wave costs more than its share (NVIDIA, "Matrix
Multiplication Background User's Guide", tile and wave quantisation). cuBLAS's split-K and
stream-K kernels spread part of the last wave's work over the idle SMs, so the empty part of
the last wave costs ``WAVE_TAIL`` of a wave rather than all of it. So

    t = overhead + min over tiles (BM, BN, eta) of  waves * 2 BM BN (K + k0) / (r eta a)
    waves = c / SMs + WAVE_TAIL (ceil(c / SMs) - c / SMs),   c = ceil(M/BM) ceil(N/BN)

with r = peak * matmul_efficiency / SMs the rate one SM sustains on large GEMMs, eta the relative
efficiency of a tile shape (larger tiles reuse more data), k0 the main loop's prologue and
epilogue in units of K, a = ``MISALIGNED`` when N or K is not a multiple of 64 elements (tensor
cores then fall back to narrower loads: a SwiGLU width of 10922 ran 46% slower than 10944 on H100,
stas00/ml-engineering training/performance; BLOOM's 14400-wide candidates ran ~25% below the
13824-wide ones on the same A100s, bigscience tr11 chronicles), and a fixed per-kernel overhead
(launch, ramp-up and tail). Taking the best tile is what cuBLAS's heuristics do; the result is
not monotonic in M: a micro-batch that leaves a last wave nearly empty runs slower per token
than a larger one.

Fused attention (FlashAttention): the forward of a causal head over s queries and s keys does
2 * 2 * s^2 * d / 2 FLOPs (QK^T and PV, half the score matrix under the causal mask; Dao,
FlashAttention-2, 2023, section 4.1 counts them this way) and the backward 2.5 times that (five
matmuls instead of two). It runs at ``attention_efficiency * s / (s + s_half) * g(d)`` of the
peak: the efficiency rises with the sequence (the kernel's work per launch and per tile) and
saturates at the GPU's value (FlashAttention-2 on A100, cuDNN / FlashAttention-3 kernels on
H100), measured at head dimension 128. Smaller heads do less matmul work per byte of Q, K, V
and per softmax element, so ``g(d) = min(1, (d / (d + d_half)) / (128 / (128 + d_half)))``:
at long sequences head dim 64 runs at 0.77 (FlashAttention-3), 0.69 (cuDNN) and 0.87
(FlashAttention-2) of head dim 128 on H100 (Shah et al., FlashAttention-3, 2024, figure 5:
497 / 648, 413 / 600 and 323 / 370 TFLOP/s at 8-16K), about 0.8 on average, which
``d_half`` = 43 gives; heads wider than 128 gain nothing (FlashAttention-2 and cuDNN run
head dim 256 slower than 128 there), so g is capped at 1.

Those rates were measured on grids that fill the GPU (the FlashAttention-2 and -3 papers'
benchmarks hold 16K tokens and 2,048 hidden: thousands of tiles). A fused kernel gives one CTA
(or, persistent, one work unit) to each query tile of ``ATTENTION_TILE`` rows of one head of one
sequence (FlashAttention-2 ``dim3 grid(num_m_block, params.b, params.h)``,
``csrc/flash_attn/src/flash_fwd_launch_template.h``; its backward the same over key tiles;
FlashAttention-3's tile schedulers over ``num_blocks * num_head * num_batch``,
``hopper/tile_scheduler.hpp``; cuDNN's fused attention, the H100 and Blackwell default, is closed
source and is taken to tile the same way, its rates coming from the same benchmark grids), and
"this is efficient when the number of thread blocks is large
(e.g., >= 80) ... In the case of long sequences (which usually means small batch sizes or small
number of heads), to make better use of the multiprocessors on the GPU, we now additionally
parallelize over the sequence length dimension" (Dao 2023, section 3.2). Under the causal mask
query tile i of a head does i + 1 tiles of work, so with m tiles a head and B heads x sequences
the kernel cannot finish before its longest tile, m units, nor before its total over the SMs,
B m (m + 1) / 2 / SMs units (FlashAttention-3's scheduler hands "the longest remaining tile ...
to the first SM that's free", which reaches that bound). The time is that bound over the
second: ``attention_fill`` = max(1, 2 SMs / (B (m + 1))), 1 on the benchmarks' grids and
wherever B (m + 1) >= 2 SMs; a 2,048-token micro-batch of 5 heads (Llama 13B at tp 8) on 108
SMs takes 2.54 times as long. FlashAttention v1 (``attention_kernel: flash1``), which splits
the sequence only where its own heuristic does, is left at its benchmark rate.

Memory-bound kernels move their bytes at ``hbm_efficiency`` of the HBM bandwidth, plus the
per-kernel overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# (BM, BN, relative efficiency): the CTA tiles cuBLAS chooses from for 16-bit GEMMs on
# Ampere/Hopper, largest first (the user's guide lists 256x128, 128x128, 128x64, 64x64).
TILES: tuple[tuple[int, int, float], ...] = (
    (256, 128, 1.0), (128, 256, 1.0), (128, 128, 0.95), (128, 64, 0.85), (64, 64, 0.7),
)
# The empty part of a last wave costs this share of a wave (split-K / stream-K fill the rest):
# square 2048^3 GEMMs on an A100-class GPU run at 0.89 of the 8192^3 rate
# (mli/transformers-benchmarks issue 4), which full wave quantisation would put at 0.67.
WAVE_TAIL = 0.25
GEMM_MEMO = 131_072      # GEMM times a kernel model keeps (a dict entry each: tens of MB)
MISALIGNED = 0.7
# Fused attention's rates are quoted at head dimension 128; ``d_half`` of the head-size factor.
ATTENTION_REF_HEAD_DIM = 128
ATTENTION_HALF_HEAD_DIM = 43.0
# Query (forward) or key (backward) rows one CTA of a fused attention kernel owns: kBlockM 128
# of FlashAttention-2's forward on sm80 (Flash_fwd_kernel_traits<128, 128, 64, 4>) and of
# FlashAttention-3's, kBlockN 128 of FlashAttention-2's backward.
ATTENTION_TILE = 128


def attention_fill(seq: float, batch_heads: float, sm_count: int | None) -> float:
    """How many times its benchmark rate's time a causal fused-attention kernel takes on
    ``batch_heads`` (sequences x heads) of ``seq`` queries and keys (module docstring): the
    longest tile against the even share of the SMs, max(1, 2 SMs / (B (m + 1))) with
    m = ceil(seq / ATTENTION_TILE); 1 without an SM count."""
    if not sm_count or batch_heads <= 0 or seq <= 0:
        return 1.0
    tiles = math.ceil(seq / ATTENTION_TILE)
    return max(1.0, 2 * sm_count / (batch_heads * (tiles + 1)))


def attention_head_factor(head_dim: float, d_half: float = ATTENTION_HALF_HEAD_DIM) -> float:
    """Fused attention's rate at ``head_dim`` relative to head dimension 128 (module docstring):
    with the default ``d_half`` 0.80 at 64, 0.92 at 96, 1 from 128 up; a kernel that runs
    head dim 64 no slower has ``d_half`` 0."""
    d, d0, ref = head_dim, d_half, ATTENTION_REF_HEAD_DIM
    return min(1.0, (d / (d + d0)) / (ref / (ref + d0)))


@dataclass(frozen=True)
class KernelModel:
    """The rates of one GPU for one precision, with the overrides of the efficiency model."""

    peak_flops: float               # dense peak of the GEMM precision, FLOP/s
    attention_peak_flops: float     # dense peak of the attention kernels' precision
    matmul_efficiency: float        # large GEMMs' fraction of the peak
    attention_efficiency: float     # long-sequence fused attention's fraction of the peak
    attention_half_seq: float       # sequence at which fused attention reaches half of that
    hbm_bytes_per_s: float          # achieved HBM bandwidth of memory-bound kernels
    sm_count: int | None            # None: no tile or wave quantisation (a CPU, a measurement)
    k_overhead: float               # k0: the GEMM main loop's fixed cost, in units of K
    kernel_overhead_s: float        # per kernel
    attention_head_half: float = ATTENTION_HALF_HEAD_DIM   # d_half of the head-size factor
    attention_tiled: bool = True    # one CTA per query tile and head (``attention_fill``)
    # The backward pass's own rate and half sequence (None: the forward's).
    attention_bwd_efficiency: float | None = None
    attention_bwd_half_seq: float | None = None
    # The GEMM times worked out so far (a search's layers repeat shapes: Megatron's DeepSeek-V3
    # space on 32,768 GPUs asks 888,180 times for 112,511 shapes); not part of the model.
    _gemms: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    def gemm(self, m: float, n: float, k: float, count: float = 1) -> float:
        """Seconds for ``count`` independent GEMMs of shape (m, n, k) in one (batched) kernel."""
        key = (m, n, k, count)
        t = self._gemms.get(key)
        if t is None:
            if len(self._gemms) >= GEMM_MEMO:
                self._gemms.clear()
            t = self._gemms[key] = self._gemm(m, n, k, count)
        return t

    def _gemm(self, m: float, n: float, k: float, count: float) -> float:
        if m <= 0 or n <= 0 or k <= 0 or count <= 0:
            return 0.0
        rate = self.peak_flops * self.matmul_efficiency
        kk = k + self.k_overhead
        if self.sm_count is None:
            return count * 2 * m * n * kk / rate + self.kernel_overhead_s
        per_sm = rate / self.sm_count
        if n % 64 or k % 64:
            per_sm *= MISALIGNED
        best = math.inf
        for bm, bn, eta in TILES:
            ctas = math.ceil(m / bm) * math.ceil(n / bn) * count
            full = ctas / self.sm_count
            waves = full + WAVE_TAIL * (math.ceil(full) - full)
            best = min(best, waves * 2 * bm * bn * kk / (per_sm * eta))
        return best + self.kernel_overhead_s

    def attention(self, flops: float, seq: float, kernels: float = 1,
                  head_dim: float = ATTENTION_REF_HEAD_DIM, backward: bool = False,
                  batch_heads: float = 0.0) -> float:
        """Seconds of fused attention doing ``flops`` on sequences (chunks) of ``seq`` keys with
        heads of ``head_dim``, in the forward or the ``backward`` pass; ``batch_heads`` (the
        sequences times the heads of one call) sizes its grid (``attention_fill``; 0: a full
        grid)."""
        if flops <= 0:
            return 0.0
        rate, half = self.attention_efficiency, self.attention_half_seq
        if backward:
            rate = self.attention_bwd_efficiency or rate
            half = self.attention_half_seq if self.attention_bwd_half_seq is None else (
                self.attention_bwd_half_seq)
        eff = rate * seq / (seq + half) * attention_head_factor(head_dim, self.attention_head_half)
        fill = attention_fill(seq, batch_heads, self.sm_count) if self.attention_tiled else 1.0
        return flops * fill / (self.attention_peak_flops * eff) + kernels * self.kernel_overhead_s

    def memory(self, num_bytes: float, kernels: float = 1) -> float:
        """Seconds of memory-bound kernels moving ``num_bytes`` (reads + writes)."""
        if num_bytes <= 0:
            return 0.0
        return num_bytes / self.hbm_bytes_per_s + kernels * self.kernel_overhead_s
