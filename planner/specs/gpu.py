"""Accelerator description: dense peak FLOP/s per precision, memory and HBM bandwidth.

Preset numbers are the vendors' datasheet figures for dense (not 2:4 sparse) math:
- V100 SXM2 32 GB: 125 TFLOP/s fp16 tensor cores, 15.7 fp32, 900 GB/s HBM2 (no bf16, tf32, fp8).
- A100 SXM4 40/80 GB: 312 bf16/fp16, 156 tf32, 19.5 fp32; 1,555 / 2,039 GB/s (no fp8).
- H100 SXM5 80 GB: 989 bf16/fp16, 1,979 fp8, 494.7 tf32, 66.9 fp32; 3,350 GB/s.
- H200 SXM 141 GB: the H100's compute; 4,800 GB/s HBM3e.
- ``cpu``: a two-core development VM running gloo, so that plans for this machine's loopback
  cluster can be estimated and probed (rough, documented guesses, meant to be calibrated).

Achieved rates (``planner.cost.kernels`` turns them into kernel times):
- ``matmul_efficiency``: the fraction of the dense peak large, well-shaped GEMMs *sustain* through
  a training step (A100 0.75, H100 0.61, H100 fp8 0.61). A short burst does better ("maximum
  achievable matmul FLOPS", stas00/ml-engineering compute/accelerator/README.md, brute-force
  shape search: A100 SXM bf16 271.2 of 312 TFLOP/s = 0.869; H100 SXM bf16 794.5 of 989 = 0.803,
  H200 the same; H100 SXM fp8 1402.6 of 1979 = 0.709), which bounds the sustained value from
  above; the sustained values are the one fitted constant per GPU and precision, chosen on the
  ``fit`` runs of ``benchmarks/data/published_runs.json`` by ``benchmarks/fit_constants.py``
  and never on its held-out runs. Ordinary shapes lose more to tile and wave quantisation
  (``sm_count``: 108 on A100, 132 on H100/H200, 80 on V100).
- ``attention_efficiency``: fused attention forward + backward at long sequences, head dim 128,
  causal, as a fraction of the bf16 peak: A100 FlashAttention-2 194 TFLOP/s (0.62; the
  FlashAttention repository's benchmark figures); H100 cuDNN fused attention (what Transformer
  Engine runs) about 559 forward and 539 backward TFLOP/s (FlashAttention-3 paper, figures 5-6),
  0.50 with a 10% derate from benchmark to training; FlashAttention-2 on H100 reaches only 0.34.
- ``hbm_efficiency``: streaming kernels' share of the HBM bandwidth (RRZE-HPC/gpu-benches
  gpu-stream: A100 80GB 1776-1894 of 2039 GB/s, 0.87; H100 about 0.90).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from planner.specs._preset import PresetSpec

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]


class PeakTflops(PresetSpec):
    """Dense peak TFLOP/s per math precision; a precision the GPU lacks is left out (null)."""

    fp32: float = Field(ge=1e-6, le=1e6, description="Dense FP32 peak, TFLOP/s.")
    tf32: float | None = Field(None, ge=1e-6, le=1e6,
                               description="Dense TF32 tensor-core peak, TFLOP/s.")
    bf16: float | None = Field(None, ge=1e-6, le=1e6, description="Dense BF16 peak, TFLOP/s.")
    fp16: float | None = Field(None, ge=1e-6, le=1e6, description="Dense FP16 peak, TFLOP/s.")
    fp8: float | None = Field(None, ge=1e-6, le=1e6, description="Dense FP8 peak, TFLOP/s.")


_GPU_PRESETS: dict[str, dict[str, Any]] = {
    "v100-32gb": {
        "name": "v100-32gb", "memory_gib": 32, "memory_bandwidth_gb_per_s": 900,
        "peak_tflops": {"fp32": 15.7, "fp16": 125}, "sm_count": 80,
        "attention_efficiency": 0.45,
    },
    "a100-40gb": {
        "name": "a100-40gb", "memory_gib": 40, "memory_bandwidth_gb_per_s": 1555,
        "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, "sm_count": 108,
        "matmul_efficiency": 0.75, "attention_efficiency": 0.62, "hbm_efficiency": 0.87,
    },
    "a100-80gb": {
        "name": "a100-80gb", "memory_gib": 80, "memory_bandwidth_gb_per_s": 2039,
        "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, "sm_count": 108,
        "matmul_efficiency": 0.75, "attention_efficiency": 0.62, "hbm_efficiency": 0.87,
    },
    "h100-sxm": {
        "name": "h100-sxm", "memory_gib": 80, "memory_bandwidth_gb_per_s": 3350,
        "peak_tflops": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                        "fp8": 1978.9}, "sm_count": 132,
        "matmul_efficiency": 0.61, "fp8_matmul_efficiency": 0.61,
        "attention_efficiency": 0.50, "hbm_efficiency": 0.90,
    },
    "h200-sxm": {
        "name": "h200-sxm", "memory_gib": 141, "memory_bandwidth_gb_per_s": 4800,
        "peak_tflops": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                        "fp8": 1978.9}, "sm_count": 132,
        "matmul_efficiency": 0.61, "fp8_matmul_efficiency": 0.61,
        "attention_efficiency": 0.50, "hbm_efficiency": 0.90,
    },
    "cpu": {
        "name": "cpu", "memory_gib": 8, "memory_bandwidth_gb_per_s": 20,
        "peak_tflops": {"fp32": 0.1, "bf16": 0.05, "fp16": 0.05},
        "matmul_efficiency": 0.75, "attention_efficiency": 0.5, "hbm_efficiency": 0.8,
    },
}


class GPUSpec(PresetSpec):
    """One accelerator. Give a preset name (``"h100-sxm"``), a preset with overrides
    (``{"preset": "a100-80gb", "memory_gib": 64}``) or every field."""

    _presets: ClassVar[dict[str, dict[str, Any]]] = _GPU_PRESETS

    name: str = Field(min_length=1, max_length=200, description="Label shown in results.")
    memory_gib: float = Field(ge=1e-6, le=65536, description="Device memory, GiB (2^30 bytes).")
    peak_tflops: PeakTflops = Field(description="Dense peak TFLOP/s per precision.")
    memory_bandwidth_gb_per_s: float = Field(
        ge=1e-3, le=1e6, description="HBM bandwidth, GB/s (1e9 bytes/s), datasheet figure."
    )
    sm_count: int | None = Field(
        None, ge=1, le=100_000, description="Streaming multiprocessors (GEMM tiles run one wave "
        "of them at a time). Null: no tile or wave quantisation."
    )
    matmul_efficiency: float = Field(
        0.8, ge=1e-3, le=1, description="Fraction of the dense peak the best-shaped GEMMs reach "
        "(maximum achievable matmul FLOPS)."
    )
    fp8_matmul_efficiency: float | None = Field(
        None, ge=1e-3, le=1,
        description="The same for fp8 GEMMs. Default: matmul_efficiency."
    )
    attention_efficiency: float = Field(
        0.5, ge=1e-3, le=1, description="Fraction of the 16-bit peak fused causal attention "
        "(forward + backward, head dim 128) reaches on long sequences."
    )
    hbm_efficiency: float = Field(
        0.85, ge=1e-3, le=1, description="Fraction of HBM bandwidth memory-bound kernels reach."
    )

    def peak_flops(self, precision: Precision) -> float:
        """Dense peak in FLOP/s for ``precision``; raises ValueError if the GPU lacks it."""
        value = getattr(self.peak_tflops, precision)
        if value is None:
            have = [p for p in ("fp32", "tf32", "bf16", "fp16", "fp8")
                    if getattr(self.peak_tflops, p) is not None]
            raise ValueError(
                f"GPU {self.name!r} has no {precision} peak; it supports {', '.join(have)}"
            )
        return value * 1e12

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30
