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


def test_hbm_rates_are_the_mean_of_gpu_streams_scale_and_triad():
    """(809 + 788) / 2 / 900 = 0.887 -> 0.89 on V100; (1737 + 1794) / 2 / 2039 = 0.866 -> 0.87,
    the A100 80GB preset's."""
    for name, want in (("v100-32gb", 0.89), ("a100-80gb", 0.87)):
        scale, triad, peak = STREAM[name]
        gpu = GPUSpec.from_preset(name)
        assert gpu.memory_bandwidth_gb_per_s == peak
        assert round((scale + triad) / 2 / peak, 2) == want == gpu.hbm_efficiency


def test_a_dgx2_of_v100s_is_a_cluster_spec():
    """No V100 preset cluster: a DGX-2 (16 V100 on NVSwitch, 8 x 100 Gb/s) is given in full,
    as the corpus's Megatron-LM 2020 runs give it."""
    dgx2 = ClusterSpec.model_validate({
        "name": "dgx-2", "num_nodes": 2, "gpus_per_node": 16, "gpu": "v100-32gb",
        "intra_node": {"kind": "nvswitch", "bandwidth_gb_per_s": 150, "latency_us": 1.0},
        "inter_node": {"kind": "infiniband", "bandwidth_gb_per_s": 100, "latency_us": 5.0,
                       "nics_per_node": 8}})
    assert (dgx2.num_gpus, dgx2.gpu.name, dgx2.gpu.sm_count) == (32, "v100-32gb", 80)
