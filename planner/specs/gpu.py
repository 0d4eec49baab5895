"""Accelerator description: dense peak FLOP/s per precision, memory and HBM bandwidth.

Preset numbers are the vendors' datasheet figures for dense (not 2:4 sparse) math:
- V100 SXM2 16 and 32 GB: 125 TFLOP/s fp16 tensor cores, 15.7 fp32, 900 GB/s HBM2 (no bf16,
  tf32, fp8); the 16 GB part is the first DGX-1's.
- A100 SXM4 40/80 GB: 312 bf16/fp16, 156 tf32, 19.5 fp32; 1,555 / 2,039 GB/s (no fp8).
- H100 SXM5 80 GB: 989 bf16/fp16, 1,979 fp8, 494.7 tf32, 66.9 fp32; 3,350 GB/s.
- H200 SXM 141 GB: the H100's compute; 4,800 GB/s HBM3e.
- H800 SXM5 80 GB: the H100 SXM5's compute, memory and rates; its NVLink is 400 GB/s
  bidirectional instead of 900 (NVIDIA H800 datasheet), a property of the cluster preset.
- B200 SXM 180 GB (DGX B200, 1,000 W): 2,250 bf16/fp16, 4,500 fp8, 1,125 tf32, 80 fp32;
  8,000 GB/s HBM3e; 148 SMs (74 of 80 per die enabled, Chips and Cheese, "Nvidia's B200:
  Keeping the CUDA Juggernaut Rolling"). Peaks: DGX B200 datasheet as tabulated by
  stas00/ml-engineering compute/accelerator/README.md.
- GB200 (one Blackwell GPU of a GB200 NVL72 rack): 2,500 bf16/fp16, 5,000 fp8, 1,250 tf32,
  80 fp32 (the same table: the NVL72 figures per GPU); 186 GB and 8,000 GB/s (13.4 TB and
  576 TB/s of HBM3e over 72 GPUs, GB200 NVL72 specifications); B200's 148 SMs (the same die).
- B300 SXM 288 GB (DGX B300, Blackwell Ultra): 2,250 bf16/fp16, 4,500 fp8, 1,125 tf32, 80
  fp32 (the same table, DGX B300 datasheet); 288 GB (2.3 TB over 8 GPUs) at 8,000 GB/s; 160
  SMs (Blackwell Ultra enables all 160 of its two dies: 20,480 CUDA cores, 128 a SM).
- AMD Instinct MI250X, one GCD (``mi250x-gcd``): a module holds two graphics compute dies and
  PyTorch, RCCL and Slurm see each as one GPU ("8 GCDs as 8 separate GPUs, each having 64
  GB", OLCF's Frontier user guide), so a preset is one GCD: half the module's 383 bf16/fp16
  and 47.9 fp32 TFLOP/s ("383TFLOPS is reported for 2 GCDs", stas00/ml-engineering
  compute/accelerator/README.md), no tf32 or fp8; 64 GB of HBM2e at half the module's 3.28
  TB/s; 110 compute units (220 a module, ROCm's GPU specifications), which stand for SMs.
- AMD Instinct MI300X: 1,307.4 bf16/fp16, 2,614.9 fp8, 653.7 tf32 and 163.4 fp32 matrix
  TFLOP/s, 5.3 TB/s (ROCm's MI300 architecture page); 192 GB of HBM3, 304 compute units.
  MI325X: the same compute ("MI325X is the same compute as MI300X", stas00/ml-engineering),
  256 GB of HBM3e at 6.0 TB/s.
- GB300 (one Blackwell Ultra GPU of a GB300 NVL72 rack): 2,500 bf16/fp16, 5,000 fp8, 1,250
  tf32, 80 fp32 (the same table); 288 GB and 8,000 GB/s (20.7 TB and 576 TB/s over 72 GPUs,
  GB300 NVL72 specifications); B300's 160 SMs.
- ``cpu``: a two-core development VM running gloo, so that plans for this machine's loopback
  cluster can be estimated and probed (rough, documented guesses, meant to be calibrated).

Achieved rates (``planner.cost.kernels`` turns them into kernel times):
- ``matmul_efficiency``: the fraction of the dense peak large, well-shaped GEMMs *sustain* through
  a training step (A100 0.76, H100 0.61, H100 fp8 0.61). A short burst does better ("maximum
  achievable matmul FLOPS", stas00/ml-engineering compute/accelerator/README.md, brute-force
  shape search: A100 SXM bf16 271.2 of 312 TFLOP/s = 0.869; H100 SXM bf16 794.5 of 989 = 0.803,
  H200 the same; H100 SXM fp8 1402.6 of 1979 = 0.709), which bounds the sustained value from
  above; the sustained values are the one fitted constant per GPU and precision, chosen on the
  ``fit`` runs of ``benchmarks/data/published_runs.json`` by ``benchmarks/fit_constants.py``
  and never on its held-out runs. Blackwell's fp8 rates are fitted the same way, on its four
  fp8 fit runs (the MXFP8 runs that fit that recipe's share, below, which read the fp8 rate
  through ``block_scaled_rates``), each bounded by its GPU's maximum achievable fp8 share (the
  same table: B200 3432.5 of 4500 = 0.763, GB200 3615.6 of 5000 = 0.723; GB300 has no figure
  of its own and takes B300's, 3353.3 of 4500 = 0.745, the same die): B200 0.65 (2 runs),
  GB200 0.65 (1), GB300 0.74 (1, at its bound, where its fit run still measures 9.5% faster
  than predicted). No Blackwell bf16 run is in the fit, so the bf16 rates are *derived*: each
  GPU's maximum achievable matmul FLOPS (B200 1745 of 2250 = 0.776, GB200 1822 of 2500 =
  0.729, B300 1769 of 2250 = 0.786) times the sustained / achievable ratio fitted on H100
  (0.61 / 0.803 = 0.760; Hopper and Blackwell run the same cuBLASLt and Transformer Engine
  generation): B200 0.59, GB200 0.55, B300 0.60, GB300 B300's 0.60. B300 has no fit run and
  takes GB300's fitted fp8 share of its own peak, 0.74 (the same die, as GB300 took B300's
  before): Megatron-Bridge's tables run Qwen3-30B-A3B on 8 B300 and 8 GB300 at one plan in
  MXFP8, B300 at 0.90-0.97 of GB300's tokens a second (26.02.01 to 26.06), which the model
  gives 0.96 with it and 0.91 with the derivation's 0.64 (``tests/test_blackwell.py``). Before
  the fit B200, GB200, B300 and GB300 took that derivation in fp8 too (0.66, 0.62, 0.64 and
  B300's 0.64), and GB300's held-out Megatron-Bridge runs measured 12-21% faster than
  predicted, GB200's 7.5% faster to 4.3% slower (the README's Blackwell section). AMD's are
  derived the same way
  (``_amd``), with no published run to test them: maximum achievable bf16 matmul FLOPS of
  147.0 of 191.5 on one MI250X GCD (0.768; ROCm 6.2, the table's version of 2025-08, commit
  e695968 removed it), 668.4 on MI300X and 784.9 on MI325X (1000 W) of 1,307.4 (0.511 and
  0.600; PyTorch tunable ops on, ROCm 6.3 and 6.2.4) times H100's 0.760: 0.58, 0.39, 0.46;
  no fp8 figure is published, so fp8 takes the bf16 share, as on H100. Ordinary shapes lose
  more to tile and wave quantisation (``sm_count``: 108 on A100, 132 on H100/H200, 148 on
  B200/GB200, 160 on B300/GB300, 80 on V100).
- V100 has no fit run and no maximum-achievable figure either; its rates are derived from
  benchmarks that ran V100 and A100 alike. GEMMs: one benchmark's fp16 ``a @ b`` of 8192 x
  8192 matrices (mli/transformers-benchmarks, README "Micro-Benchmarking Summary",
  micro_bench.ipynb) reaches 95 of 125 TFLOP/s on V100 (0.760) and 230 of 312 on A100
  (0.737); the A100's fitted 0.76 times their ratio is 0.78. HBM: ``hbm_efficiency`` below,
  gpu-stream's scale and triad kernels on V100 (809 and 788 of 900 GB/s, 0.89). Its fused
  attention rate, 0.45, has no source: FlashAttention does not run on V100 (sm70); what does
  is xFormers' CUTLASS kernel, PyTorch SDPA's memory-efficient backend ("a bit slower than
  Flash-Attention, but ... supports any GPU above P100", xformers issue 950), for which no
  V100 figure was found. Runs of the time used unfused attention (``flash_attention`` false).
- ``mxfp8_matmul_efficiency``: MXFP8 GEMMs (training.fp8_recipe 'mxfp8': 1x32 blocks with E8M0
  scales), which only Blackwell's block-scaled tensor cores run (Megatron-LM: "'mxfp8' for
  Blackwell architecture only"; torchtitan asserts CUDA SM100), at ``MXFP8_GEMM_SHARE`` = 0.91
  of the GPU's per-tensor fp8 rate. No GEMM benchmark compares the two scalings on one GPU, but
  published runs of one plan in both recipes do: Megatron-Bridge 25.11 ran Llama 3 8B on 8
  GB300, GB200 and B200 and Llama 3.1 405B on 128 B200 in FP8-CS and FP8-MX, which measured
  3.6-5.6% fewer tokens a second (docs/performance-summary-archive.md, the table's values in
  parentheses). With each recipe's quantisation costed (``cost.layers.CAST_BYTES``: MXFP8's one
  pass writes both directions and needs no amax, so its casts cost less than current
  scaling's), the share of the fp8 rate that gives each pair its measured ratio is 0.89-0.92,
  median 0.911 (``tests/test_mxfp8.py`` solves it); the four MXFP8 rows are the ``fit`` runs
  of this one constant. torchao's independent pair, Llama 3 8B on 8 B200 under torchtitan
  (mxfp8_cublas 9,969 against float8 tensorwise 10,417 tokens a second, ratio 0.957,
  torchao/prototype/mx_formats/README.md), is predicted at 0.945 with it (0.995 without).
- ``fp4_matmul_efficiency``: NVFP4 GEMMs (precision 'fp4': Transformer Engine's NVFP4BlockScaling,
  1x16 blocks with E4M3 scales under a per-tensor fp32 scale), as a fraction of the dense fp4
  peak: stas00/ml-engineering's table gives 10,000 TFLOP/s for B200 (its nvfp4 column, the DGX
  B200 datasheet) and GB200 (the GB200 NVL72 specification), 15,000 for B300 (nvfp4, the DGX
  B300 datasheet) and GB300 (the GB300 NVL72 specification: Blackwell Ultra's 1.5x dense fp4).
  The rate is ``NVFP4_GEMM_SHARE`` = 0.95 of the GPU's fp8 share of its fp8 peak, again from
  published runs of one plan in both recipes: Megatron-Bridge 26.04's table runs Llama 3 70B
  on 64 GB300 and GB200 and Llama 3.1 405B on 256 GB200 in NVFP4 and MXFP8 at one plan each,
  NVFP4 1.56x, 1.28x and 1.43x faster; with both recipes' quantisation costed
  (``cost.layers.CAST_BYTES``) and the fp8 rates fitted above, the shares that give those
  ratios are 0.948, 0.865 and 1.032, median 0.948 (``tests/test_nvfp4.py`` solves them; with
  the fp8 rates derived before, 0.897, 0.856 and 1.016, median 0.90); the three NVFP4 rows
  are the ``fit`` runs of this constant.
- ``attention_efficiency``: fused attention forward + backward at long sequences, head dim 128,
  causal, as a fraction of the bf16 peak: A100 FlashAttention-2 194 TFLOP/s (0.62; the
  FlashAttention repository's benchmark figures); H100 cuDNN fused attention (what Transformer
  Engine runs) about 559 forward and 539 backward TFLOP/s (FlashAttention-3 paper, figures 5-6),
  0.50 with a 10% derate from benchmark to training; FlashAttention-2 on H100 reaches only 0.34.
  B200: FlashAttention-4 reaches up to 1,613 TFLOP/s forward in bf16, "up to 1.3x" cuDNN 9.13
  (FlashAttention-4 paper, 2026, abstract), so cuDNN's fused attention, what Transformer Engine
  runs, is about 1,240 TFLOP/s = 0.55 of 2,250; the same 10% derate gives 0.50, taken for
  GB200 too (the same kernel on the same SMs; its exponential units, the forward's bottleneck,
  scale with the clock as its tensor peak does), and for B300 and GB300, whose doubled
  exponential rate ("2x attention performance") no published kernel figure yet quantifies.
  AMD's fused attention (Composable Kernel's FlashAttention on ROCm) has no published rate
  found; it is taken at the share of the GEMM rate cuDNN's attention has on H100, 0.50 / 0.61.
- ``hbm_efficiency``: streaming kernels' share of the HBM bandwidth (RRZE-HPC/gpu-benches
  gpu-stream: A100 80GB 1776-1894 of 2039 GB/s, 0.87, the mean of its scale and triad kernels,
  the load-and-store streams elementwise training kernels run, 1737 and 1794; V100 the same
  mean, 809 and 788 of 900, 0.89; H100 about 0.90; B200 and GB200: no
  published stream figure was found, H100's 0.90 is assumed, as for B300, GB300 and AMD's).
- ``attention_kernels``: named fused attention kernels older or other software runs
  (``TrainingSpec.attention_kernel``), each pass (forward, backward) as its long-sequence
  fraction of the 16-bit peak (causal, head dim 128) and the keys at which it runs at half
  that, plus its rate at head dim 64 relative to 128: least-squares fits of
  r(s) = e s / (s + s_half) to the FlashAttention-2 paper's benchmark charts (Dao 2023, arXiv
  2307.08691, causal, sequence 512-16k). A100 80GB SXM4, figures 5 (forward) and 6 (backward),
  TFLOP/s at 512 / 2k / 16k keys, head dim 128:
  FlashAttention-2 forward 132 / 187 / 197 (0.666, 275), backward 90 / 145 / 186 (0.606, 570);
  FlashAttention v1 forward 49 / 65 / 71 (0.232, 240), backward 59 / 71 / 89 (0.278, 290);
  FlashAttention in Triton forward 89 / 126 / 148 (0.472, 345), backward 43 / 58 / 67
  (0.217, 300). Forward + backward (figure 4) at 16k: head dim 64 against 128, 171 / 189 for
  FlashAttention-2 (0.91), 97 / 83 and 80 / 80 for v1 and Triton (no slower: 1). H100 80GB
  SXM5, figure 7 gives forward + backward only, used for both passes: FlashAttention-2
  163 / 265 / 328 (0.337, 530; head dim 64 284 at 16k, 0.87), v1 98 / 108 / 137 (0.134, 210;
  head dim 64 faster, 1); no H100 figure for the Triton kernel. The Triton kernel is what
  MosaicML's MPT ran as ``attn_impl: triton`` (flash_attn_triton.py, whose author's docstring
  says what figures 5-6 show: "Triton forward is generally faster than CUDA forward, while
  Triton backward is generally slower than CUDA backward. Overall Triton forward + backward is
  slightly slower than CUDA forward + backward"). The A100's ``attention_efficiency`` (its
  default kernel, 0.62 with half rate at 500 keys for both passes) is FlashAttention-2's
  forward + backward fit (0.620, 485).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.specs._preset import PresetSpec
from planner.vocabulary import ATTENTION_KERNELS, AttentionKernel

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4"]


class PeakTflops(PresetSpec):
    """Dense peak TFLOP/s per math precision; a precision the GPU lacks is left out (null)."""

    fp32: float = Field(ge=1e-6, le=1e6, description="Dense FP32 peak, TFLOP/s.")
    tf32: float | None = Field(None, ge=1e-6, le=1e6,
                               description="Dense TF32 tensor-core peak, TFLOP/s.")
    bf16: float | None = Field(None, ge=1e-6, le=1e6, description="Dense BF16 peak, TFLOP/s.")
    fp16: float | None = Field(None, ge=1e-6, le=1e6, description="Dense FP16 peak, TFLOP/s.")
    fp8: float | None = Field(None, ge=1e-6, le=1e6, description="Dense FP8 peak, TFLOP/s.")
    fp4: float | None = Field(None, ge=1e-6, le=1e6, description="Dense FP4 (NVFP4) peak, "
                              "TFLOP/s.")


# Named attention kernels' rates per GPU (module docstring); H200 has the H100's compute.
_ATTENTION_KERNELS: dict[str, dict[str, dict[str, float]]] = {
    "a100": {
        "flash1": {"forward": 0.232, "forward_half_seq": 240, "backward": 0.278,
                   "backward_half_seq": 290, "head_dim_64": 1.0},
        "flash2": {"forward": 0.666, "forward_half_seq": 275, "backward": 0.606,
                   "backward_half_seq": 570, "head_dim_64": 0.91},
        "flash_triton": {"forward": 0.472, "forward_half_seq": 345, "backward": 0.217,
                         "backward_half_seq": 300, "head_dim_64": 1.0},
    },
    "h100": {
        "flash1": {"forward": 0.134, "forward_half_seq": 210, "backward": 0.134,
                   "backward_half_seq": 210, "head_dim_64": 1.0},
        "flash2": {"forward": 0.337, "forward_half_seq": 530, "backward": 0.337,
                   "backward_half_seq": 530, "head_dim_64": 0.87},
    },
}


# MXFP8 GEMMs' sustained rate as a share of per-tensor fp8's on the same Blackwell GPU (module
# docstring, ``mxfp8_matmul_efficiency``): what published A/B runs of one plan in both
# recipes leave once the two recipes' quantisation passes are costed.
MXFP8_GEMM_SHARE = 0.91
# NVFP4 GEMMs' sustained share of the dense fp4 peak, as a share of per-tensor fp8's of its
# peak on the same GPU (module docstring, ``fp4_matmul_efficiency``): what Megatron-Bridge's
# published NVFP4 / MXFP8 runs of one plan leave once both recipes' quantisation is costed.
NVFP4_GEMM_SHARE = 0.95


def block_scaled_rates(fp8_matmul: float) -> dict[str, float]:
    """A Blackwell GPU's fp8 GEMM share and the block-scaled ones read from it: MXFP8 at
    ``MXFP8_GEMM_SHARE`` of the per-tensor fp8 rate, NVFP4 at ``NVFP4_GEMM_SHARE`` of fp8's
    share of its peak (``benchmarks/fit_constants.py`` moves the three together)."""
    return {"fp8_matmul_efficiency": fp8_matmul,
            "mxfp8_matmul_efficiency": round(fp8_matmul * MXFP8_GEMM_SHARE, 3),
            "fp4_matmul_efficiency": round(fp8_matmul * NVFP4_GEMM_SHARE, 3)}


def _blackwell(name: str, memory_gib: float, bf16: float, sms: int, matmul: float,
               fp8_matmul: float, fp4: float) -> dict[str, Any]:
    """A Blackwell preset (module docstring): 8 TB/s of HBM3e, fp8 at twice and tf32 at half
    the bf16 peak, 80 TFLOP/s fp32, the given dense NVFP4 peak, cuDNN attention at 0.50, H100's
    HBM efficiency; block-scaled tensor cores as ``block_scaled_rates`` derives them."""
    return {"name": name, "memory_gib": memory_gib, "memory_bandwidth_gb_per_s": 8000,
            "peak_tflops": {"fp32": 80, "tf32": bf16 / 2, "bf16": bf16, "fp16": bf16,
                            "fp8": 2 * bf16, "fp4": fp4},
            "sm_count": sms, "matmul_efficiency": matmul, **block_scaled_rates(fp8_matmul),
            "attention_efficiency": 0.50, "hbm_efficiency": 0.90}


# H100's sustained bf16 GEMM rate over its maximum achievable one (module docstring): what a
# training step keeps of a GPU's best-shaped GEMM burst, applied to GPUs without a fit run.
SUSTAINED_OVER_ACHIEVABLE = 0.760
# cuDNN's fused attention rate over the sustained GEMM rate on H100 (0.50 / 0.61), for GPUs
# whose attention kernel has no published rate.
ATTENTION_OVER_MATMUL = 0.50 / 0.61


def _amd(name: str, memory_gib: float, bandwidth_gb_per_s: float, peaks: dict[str, float],
         compute_units: int, achievable_bf16: float) -> dict[str, Any]:
    """An AMD Instinct preset (module docstring): its datasheet peaks and memory, its compute
    units as the GEMM tiles' SMs, the sustained GEMM share of the bf16 peak derived from its
    maximum achievable matmul FLOPS (``achievable_bf16`` of the bf16 peak) as H100's sustained
    share is of its own, fp8 at the same share, fused attention at H100's share of the GEMM
    rate, and H100's HBM efficiency."""
    matmul = round(achievable_bf16 / peaks["bf16"] * SUSTAINED_OVER_ACHIEVABLE, 2)
    return {"name": name, "memory_gib": memory_gib,
            "memory_bandwidth_gb_per_s": bandwidth_gb_per_s, "peak_tflops": peaks,
            "sm_count": compute_units, "matmul_efficiency": matmul,
            "fp8_matmul_efficiency": matmul if "fp8" in peaks else None,
            "attention_efficiency": round(matmul * ATTENTION_OVER_MATMUL, 2),
            "hbm_efficiency": 0.90}


_MI300X_PEAKS = {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}


def _v100(name: str, memory_gib: float) -> dict[str, Any]:
    """A V100 SXM2 preset (module docstring): 125 TFLOP/s fp16, 15.7 fp32, 900 GB/s of HBM2,
    80 SMs, the rates derived from benchmarks beside an A100."""
    return {"name": name, "memory_gib": memory_gib, "memory_bandwidth_gb_per_s": 900,
            "peak_tflops": {"fp32": 15.7, "fp16": 125}, "sm_count": 80,
            "matmul_efficiency": 0.78, "attention_efficiency": 0.45, "hbm_efficiency": 0.89}


_H100: dict[str, Any] = {
    "name": "h100-sxm", "memory_gib": 80, "memory_bandwidth_gb_per_s": 3350,
    "peak_tflops": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                    "fp8": 1978.9}, "sm_count": 132,
    "matmul_efficiency": 0.61, "fp8_matmul_efficiency": 0.61,
    "attention_efficiency": 0.50, "hbm_efficiency": 0.90,
    "attention_kernels": _ATTENTION_KERNELS["h100"],
}

_A100 = {
    "name": "a100-80gb", "memory_gib": 80, "memory_bandwidth_gb_per_s": 2039,
    "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, "sm_count": 108,
    "matmul_efficiency": 0.76, "attention_efficiency": 0.62, "hbm_efficiency": 0.87,
    "attention_kernels": _ATTENTION_KERNELS["a100"],
}

_GPU_PRESETS: dict[str, dict[str, Any]] = {
    "v100-16gb": _v100("v100-16gb", 16),
    "v100-32gb": _v100("v100-32gb", 32),
    "a100-40gb": {**_A100, "name": "a100-40gb", "memory_gib": 40,
                  "memory_bandwidth_gb_per_s": 1555},
    "a100-80gb": _A100,
    # A800 80GB SXM: the A100 80GB's GA100 with its compute, memory and rates, its NVLink cut
    # to 400 GB/s both ways together (A100: 600; Reuters, reported by Tweakers, "Nvidia
    # introduceert nieuwe A800-datacenter-gpu's voor China", November 2022; the cluster
    # preset ``hgx-a800`` carries that).
    "a800-80gb": {**_A100, "name": "a800-80gb"},
    "h100-sxm": _H100,
    # H200: the H100's compute and rates with 141 GB of HBM3e at 4,800 GB/s.
    "h200-sxm": {**_H100, "name": "h200-sxm", "memory_gib": 141,
                 "memory_bandwidth_gb_per_s": 4800},
    # H800 SXM5: the H100 SXM5's GH100 with its compute, 80 GB of HBM3 and rates, its NVLink
    # cut to 400 GB/s (NVIDIA H800 datasheet; the cluster preset ``hgx-h800`` carries that).
    "h800-sxm": {**_H100, "name": "h800-sxm"},
    "b200-sxm": _blackwell("b200-sxm", 180, 2250, 148, 0.59, 0.65, 10000),
    "gb200": _blackwell("gb200", 186, 2500, 148, 0.55, 0.65, 10000),
    "b300-sxm": _blackwell("b300-sxm", 288, 2250, 160, 0.60, 0.74, 15000),
    "gb300": _blackwell("gb300", 288, 2500, 160, 0.60, 0.74, 15000),
    "mi250x-gcd": _amd("mi250x-gcd", 64, 1638.4, {"fp32": 23.95, "bf16": 191.5, "fp16": 191.5},
                       110, 147.0),
    "mi300x": _amd("mi300x", 192, 5300, _MI300X_PEAKS, 304, 668.4),
    "mi325x": _amd("mi325x", 256, 6000, _MI300X_PEAKS, 304, 784.9),
    "cpu": {
        "name": "cpu", "memory_gib": 8, "memory_bandwidth_gb_per_s": 20,
        "peak_tflops": {"fp32": 0.1, "bf16": 0.05, "fp16": 0.05},
        "matmul_efficiency": 0.75, "attention_efficiency": 0.5, "hbm_efficiency": 0.8,
    },
}


class AttentionRate(BaseModel):
    """A fused attention kernel's published rate on one GPU, causal, per pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    forward: float = Field(ge=1e-3, le=1, description="Forward pass: long-sequence fraction of "
                           "the 16-bit peak at head dimension 128.")
    forward_half_seq: float = Field(ge=0, le=1e8, description="Keys per chunk at which the "
                                    "forward pass runs at half its long-sequence rate.")
    backward: float = Field(ge=1e-3, le=1, description="Backward pass: the same.")
    backward_half_seq: float = Field(ge=0, le=1e8, description="Backward pass: the same.")
    head_dim_64: float = Field(1.0, gt=0.5, le=1, description="Its rate at head dimension 64 "
                               "relative to 128 (1: no slower).")

    @property
    def head_dim_half(self) -> float:
        """d_half of ``kernels.attention_head_factor`` that gives ``head_dim_64`` at 64:
        (64 / (64 + d)) / (128 / (128 + d)) = r  =>  d = 128 (1 - r) / (2 r - 1)."""
        r = self.head_dim_64
        return 128 * (1 - r) / (2 * r - 1)


class AttentionKernels(BaseModel):
    """The named attention kernels' rates one GPU has published figures for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flash1: AttentionRate | None = Field(None, description="FlashAttention v1 (flash-attn "
                                         "1.x).")
    flash2: AttentionRate | None = Field(None, description="FlashAttention-2.")
    flash_triton: AttentionRate | None = Field(None, description="FlashAttention in Triton "
                                               "(2022-23; MPT's attn_impl 'triton').")


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
    fp4_matmul_efficiency: float | None = Field(
        None, ge=1e-3, le=1,
        description="The same for NVFP4 GEMMs (precision 'fp4': 1x16 blocks with E4M3 "
        "scales under a per-tensor fp32 scale), as a fraction of the fp4 peak; null: the "
        "precision is refused, as on GPUs without an fp4 peak."
    )
    mxfp8_matmul_efficiency: float | None = Field(
        None, ge=1e-3, le=1,
        description="The same for MXFP8 GEMMs (1x32 blocks with E8M0 scales, "
        "training.fp8_recipe 'mxfp8'), which only block-scaled tensor cores run: Blackwell "
        "(sm100) and later. Null: the GPU has none, and the recipe is refused."
    )
    attention_efficiency: float = Field(
        0.5, ge=1e-3, le=1, description="Fraction of the 16-bit peak fused causal attention "
        "(forward + backward, head dim 128) reaches on long sequences."
    )
    hbm_efficiency: float = Field(
        0.85, ge=1e-3, le=1, description="Fraction of HBM bandwidth memory-bound kernels reach."
    )
    attention_kernels: AttentionKernels = Field(
        default_factory=lambda: AttentionKernels(), description="Named fused attention "
        "kernels' rates on this GPU (training.attention_kernel other than 'default'): presets "
        "carry FlashAttention v1, v2 and in Triton from the FlashAttention-2 paper's benchmark "
        "figures."
    )

    def attention_rate(self, kernel: AttentionKernel) -> AttentionRate | None:
        """The named kernel's rate (None for 'default': ``attention_efficiency``); raises
        ValueError if this GPU has no figure for it."""
        if kernel == "default":
            return None
        rate: AttentionRate | None = getattr(self.attention_kernels, kernel)
        if rate is None:
            have = ", ".join(k for k in ATTENTION_KERNELS[1:]
                             if getattr(self.attention_kernels, k) is not None) or "none"
            raise ValueError(f"GPU {self.name!r} has no rate for attention kernel {kernel!r} "
                             f"(it has: {have}); give its rates in "
                             f"gpu.attention_kernels.{kernel}")
        return rate

    def peak_flops(self, precision: Precision) -> float:
        """Dense peak in FLOP/s for ``precision``; raises ValueError if the GPU lacks it."""
        value = getattr(self.peak_tflops, precision)
        if value is None:
            have = [p for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
                    if getattr(self.peak_tflops, p) is not None]
            raise ValueError(
                f"GPU {self.name!r} has no {precision} peak; it supports {', '.join(have)}"
            )
        return value * 1e12

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30
