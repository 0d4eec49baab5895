"""How close kernels get to the datasheet: the one documented efficiency model of the planner.

A GEMM of shape (M, N, K) runs at

    peak * matmul_peak_fraction * sat(M) * sat(N) * sat(K),    sat(x) = x / (x + matmul_half_dim)

so large GEMMs reach ``matmul_peak_fraction`` of the dense peak (cuBLAS reaches 75-85% on A100
and H100 at LLM shapes; 0.75 by default) and small per-GPU shapes (a thin TP shard, a short
micro-batch, a 64-wide attention head) lose efficiency smoothly; this is the roofline-style
saturation used by analytic planners such as Calculon (size-dependent efficiency tables).
Memory-bound kernels (norms, activations, softmax, residual adds, the optimizer) move their bytes at
``hbm_efficiency`` of the HBM bandwidth. Fused attention (FlashAttention) runs its matmuls at
``attention_fraction`` of the GEMM efficiency (its backward recomputes the scores).

The defaults were set once, for every GPU and every row together, against the published
Megatron-LM runs of Narayanan et al. SC'21 Table 1 (``benchmarks/published_accuracy.py``); a
request can override any of them (``"efficiency": {...}``) and calibration replaces them with
measured rates.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EfficiencyModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    matmul_peak_fraction: float = Field(
        0.75, ge=1e-3, le=1, description="Fraction of dense peak reached by large GEMMs."
    )
    matmul_half_dim: float = Field(
        64.0, ge=0, le=1e6,
        description="GEMM dimension at which that dimension halves the efficiency."
    )
    attention_fraction: float = Field(
        0.7, ge=1e-3, le=1, description="Fused-attention matmul rate relative to a GEMM's."
    )
    hbm_efficiency: float = Field(
        0.8, ge=1e-3, le=1,
        description="Fraction of HBM bandwidth reached by memory-bound kernels."
    )
    tp_comm_overlap: float = Field(
        0.0, ge=0, le=1, description="Fraction of TP collectives hidden under compute (0: "
        "Megatron default; ~0.5-0.8 with Transformer Engine's tp-comm-overlap)."
    )
    memory_reserve_gib: float = Field(
        1.5, ge=0, le=1e4,
        description="Per-GPU memory for the CUDA context, cuBLAS and NCCL workspaces."
    )
    memory_fragmentation: float = Field(
        0.1, ge=0, le=1, description="Allocator fragmentation, as a fraction of activation memory."
    )

    def gemm_efficiency(self, m: float, n: float, k: float) -> float:
        h = self.matmul_half_dim
        sat = (m / (m + h)) * (n / (n + h)) * (k / (k + h))
        return self.matmul_peak_fraction * sat

    def gemm_time(self, m: float, n: float, k: float, peak_flops: float, count: float = 1) -> float:
        """Seconds for ``count`` GEMMs of shape (m, n, k): 2mnk FLOPs each."""
        if m <= 0 or n <= 0 or k <= 0:
            return 0.0
        return count * 2 * m * n * k / (peak_flops * self.gemm_efficiency(m, n, k))

    def memory_time(self, num_bytes: float, hbm_bytes_per_s: float) -> float:
        return num_bytes / (hbm_bytes_per_s * self.hbm_efficiency)
