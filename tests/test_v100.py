"""V100's rates: no fit run and no maximum-achievable-matmul figure is on V100, so its GEMM and
HBM rates are derived from benchmarks that ran it beside an A100 (``planner/specs/gpu.py``)."""

from planner.specs import ClusterSpec, GPUSpec

# mli/transformers-benchmarks README, "Micro-Benchmarking Summary": fp16 ``a @ b`` of two
# 8192 x 8192 matrices (micro_bench.ipynb), TFLOP/s against the fp16 peak.
MATMUL_FP16 = {"v100-32gb": (95, 125), "a100-80gb": (230, 312)}
# RRZE-HPC/gpu-benches gpu-stream at full occupancy, GB/s: (scale, triad, HBM peak).
STREAM = {"v100-32gb": (809, 788, 900), "a100-80gb": (1737, 1794, 2039)}


def test_v100_gemm_rate_is_the_a100s_fitted_rate_times_their_benchmark_ratio():
    """Worked by hand: 95 / 125 = 0.760 on V100, 230 / 312 = 0.737 on A100; the A100's fitted
    0.76 x 0.760 / 0.737 = 0.784 -> 0.78."""
    a100, v100 = GPUSpec.from_preset("a100-80gb"), GPUSpec.from_preset("v100-32gb")
    share = {k: got / peak for k, (got, peak) in MATMUL_FP16.items()}
    assert (round(share["v100-32gb"], 3), round(share["a100-80gb"], 3)) == (0.76, 0.737)
    assert a100.matmul_efficiency == 0.76
    derived = a100.matmul_efficiency * share["v100-32gb"] / share["a100-80gb"]
    assert round(derived, 3) == 0.784
    assert v100.matmul_efficiency == round(derived, 2) == 0.78
    assert v100.peak_tflops.fp16 == 125 and v100.peak_tflops.bf16 is None
    # The 16 GB part: the same chip and HBM2 rate, half the memory.
    small = GPUSpec.from_preset("v100-16gb")
    assert small.model_dump(exclude={"name", "memory_gib"}) == v100.model_dump(
        exclude={"name", "memory_gib"}) and (small.memory_gib, v100.memory_gib) == (16, 32)


def test_hbm_rates_are_the_mean_of_gpu_streams_scale_and_triad():
    """(809 + 788) / 2 / 900 = 0.887 -> 0.89 on V100; (1737 + 1794) / 2 / 2039 = 0.866 -> 0.87,
    the A100 80GB preset's."""
    for name, want in (("v100-32gb", 0.89), ("a100-80gb", 0.87)):
        scale, triad, peak = STREAM[name]
        gpu = GPUSpec.from_preset(name)
        assert gpu.memory_bandwidth_gb_per_s == peak
        assert round((scale + triad) / 2 / peak, 2) == want == gpu.hbm_efficiency


def test_dgx1_and_dgx2_presets_are_their_datasheets():
    """DGX-1: 8 V100 joined GPU to GPU by NVLink 2 (six links of 25 GB/s each way, 150 GB/s),
    4 x 100 Gb/s EDR (50 GB/s a node); DGX-2: 16 V100 on NVSwitch (the same 150 GB/s to any
    GPU), 8 x 100 Gb/s (100 GB/s)."""
    for name, gpus, kind, network, nics in (("dgx-1", 8, "nvlink", 50, 4),
                                            ("dgx-2", 16, "nvswitch", 100, 8)):
        c = ClusterSpec.model_validate({"preset": name, "num_nodes": 2})
        assert (c.num_gpus, c.gpus_per_node, c.gpu.name, c.gpu.sm_count) == (
            2 * gpus, gpus, "v100-32gb", 80)
        assert (c.intra_node.kind, c.intra_node.bandwidth_gb_per_s) == (kind, 150)
        assert (c.inter_node.bandwidth_gb_per_s, c.inter_node.nics_per_node) == (network, nics)
