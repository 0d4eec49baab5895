"""NVFP4 (``training.precision`` 'fp4'): Transformer Engine's NVFP4BlockScaling on Blackwell.

Its quantisation reads each GEMM input twice (the per-tensor amax of the second-level scale,
then the cast) and writes both directions at half a byte with an E4M3 scale per 16 elements
(bytes worked by hand below); its GEMMs run at the GPU's ``fp4_matmul_efficiency`` of the fp4
peak, ``NVFP4_GEMM_SHARE`` times the fp8 share, which three published NVFP4 / MXFP8 pairs of one
plan set (solved here) and the same configurations in two other releases check; GPUs without
an fp4 peak refuse it; Megatron-LM runs it (its arguments carry it, its logs read back), torchtitan
and DeepSpeed do not."""

from __future__ import annotations

import copy
import re
import statistics
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner.calibration.megatron_log import anchor_run
from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import CAST_BYTES, LayerShape, layer_work
from planner.errors import PlannerInputError
from planner.frameworks import reasons_by_framework
from planner.launch import with_launch
from planner.request import EstimateRequest
from planner.search import answer
from planner.search.plan_request import PlanRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.gpu import NVFP4_GEMM_SHARE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import published_accuracy  # noqa: E402

from tests.test_megatron_log import swap  # noqa: E402

M8 = ModelSpec.from_preset("llama3-8b")
GB200 = ClusterSpec.from_preset("gb200-nvl72", num_nodes=1)
EFF = EfficiencyModel()
RUNS = {r["id"]: r for r in published_accuracy.load_runs()}
FIT = sorted(i for i, r in RUNS.items() if r["training"]["precision"] == "fp4"
             and r["split"] == "fit")
LOG = Path(__file__).resolve().parent / "data" / "megatron" / "llama3-8b-fp8-tp2-cp2.log"


def _training(precision: str, **kw) -> TrainingSpec:
    return TrainingSpec(global_batch_size=64, seq_length=4096, precision=precision, **kw)


def test_two_reads_half_a_byte_each_way_and_16_element_scales():
    assert CAST_BYTES["nvfp4"] == 2 + 2 + 2 * (0.5 + 1 / 16) == 5.125
    fp4, fp8 = _training("fp4"), _training("fp8", fp8_recipe="tensorwise")
    assert (fp4.quantised_bytes, fp8.quantised_bytes) == (0.5625, 1.0)
    # A layer's forward memory-bound bytes against per-tensor current scaling's: 0.125 more an
    # input element (the same two reads, a byte and a quarter written instead of one).
    elements = 4096 * (3 * 4096 + 14336)      # QKV, out, gate/up (4,096 wide), down (14,336)
    a, b = (layer_work(M8, t, LayerShape(), GB200.gpu, EFF) for t in (fp4, fp8))
    assert a.elementwise_bytes - b.elementwise_bytes == pytest.approx(0.125 * elements, rel=1e-9)
    # The GEMMs at the fp4 rate: the forward is faster than fp8's despite the casts.
    assert a.fwd_s < b.fwd_s
    # What the layer keeps for the weight gradients: the quantised inputs at 0.5625 bytes.
    assert a.stored_bytes < b.stored_bytes
    # The weights' gathers under fp8_param_gather (Megatron-LM --fp4-param-gather).
    assert TrainingSpec(global_batch_size=64, seq_length=4096, precision="fp4",
                        fp8_param_gather=True).layer_gather_bytes == 0.5625


def _twin(nv: dict) -> dict:
    """The MXFP8 row of the same plan in the same table: Megatron-Bridge's MXFP8 recipe
    (fp8_param_gather True) and the recipe's own overlap of the weight gather."""
    mx = copy.deepcopy(nv)
    t = mx["training"]
    t.update({"precision": "fp8", "fp8_recipe": "mxfp8", "fp8_param_gather": True})
    t.pop("overlap_param_gather", None)
    return mx


def _ratio(nv_id: str, share: float | None = None) -> float:
    nv = copy.deepcopy(RUNS[nv_id])
    if share is not None:
        gpu = ClusterSpec.model_validate(nv["cluster"]).gpu
        nv["cluster"] = {**nv["cluster"], "gpu": {
            "preset": gpu.name, "fp4_matmul_efficiency": gpu.fp8_matmul_efficiency * share}}
    return (published_accuracy.predict_run(_twin(RUNS[nv_id]))[0].step_time_s
            / published_accuracy.predict_run(nv)[0].step_time_s)


def test_the_share_is_what_the_published_pairs_leave_after_the_casts():
    assert FIT == ["bridge-gb200-llama-3-70b-64-nvfp4", "bridge-gb200-llama-3.1-405b-256-nvfp4",
                   "bridge-gb300-llama-3-70b-64-nvfp4"]
    shares = []
    for nv_id in FIT:
        # The 26.04 table's NVFP4 row and its MXFP8 row of the same plan, both quoted.
        nv_v, mx_v = map(int, re.findall(r"\| n/a \| (\d+) \|", RUNS[nv_id]["quote"]))
        assert RUNS[nv_id]["measured"]["value"] == nv_v
        lo, hi = 0.3, 1.5
        for _ in range(25):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if _ratio(nv_id, mid) > nv_v / mx_v else (mid, hi)
        shares.append(round(mid, 3))
    assert shares == [0.865, 1.032, 0.948]
    assert round(statistics.median(shares), 2) == NVFP4_GEMM_SHARE == 0.95
    for preset, peak in (("b200-sxm", 10000), ("gb200", 10000), ("b300-sxm", 15000),
                         ("gb300", 15000)):
        gpu = ClusterSpec.model_validate({"preset": "dgx-b200", "num_nodes": 1,
                                          "gpu": preset}).gpu
        assert gpu.peak_tflops.fp4 == peak
        assert gpu.fp4_matmul_efficiency == round(gpu.fp8_matmul_efficiency * 0.95, 3)


def test_the_same_configurations_in_other_releases_are_predicted_within_10_percent():
    # Megatron-Bridge 26.02 and 26.04.01 ran the three configurations again in both recipes
    # (NVFP4 / MXFP8 tokens a second a GPU, the archive's tables).
    published = {"bridge-gb200-llama-3-70b-64-nvfp4": (4458 / 3613, 4864 / 3712),
                 "bridge-gb200-llama-3.1-405b-256-nvfp4": (1076 / 786, 1184 / 800),
                 "bridge-gb300-llama-3-70b-64-nvfp4": (6798 / 4596, 7296 / 4864)}
    for nv_id, ratios in published.items():
        predicted = _ratio(nv_id)
        assert all(abs(predicted / r - 1) < 0.10 for r in ratios), (nv_id, predicted, ratios)
    assert [round(_ratio(i), 3) for i in FIT] == [1.346, 1.371, 1.562]


def test_the_held_out_nvfp4_row_misses_where_gb300s_other_rows_do():
    rows = published_accuracy.evaluate_runs([RUNS["bridge-gb300-llama-3.1-405b-256-nvfp4"]])
    assert RUNS["bridge-gb300-llama-3.1-405b-256-nvfp4"]["split"] == "held_out"
    assert round(rows[0]["error_pct"], 1) == -8.2


def test_gpus_without_an_fp4_peak_or_rate_refuse_it():
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 64, "seq_length": 4096, "precision": "fp4"},
            "plan": {"dp": 8}}
    with pytest.raises(ValidationError, match="GPU 'h100-sxm' has no fp4 peak"):
        EstimateRequest.model_validate(body)
    rate = {**body, "cluster": {"preset": "dgx-b200", "num_nodes": 1,
                                "gpu": {"preset": "b200-sxm", "fp4_matmul_efficiency": None}}}
    with pytest.raises(ValidationError, match="no NVFP4 GEMM rate"):
        EstimateRequest.model_validate(rate)
    ok = {**body, "cluster": {"preset": "dgx-b200", "num_nodes": 1}}
    assert EstimateRequest.model_validate(ok).training.precision == "fp4"


def test_megatron_runs_it_and_reads_it_back_the_others_do_not():
    tr = TrainingSpec(global_batch_size=8, seq_length=4096, precision="fp4",
                      fp8_param_gather=True)
    plan = ParallelPlan(dp=8, micro_batch_size=1, zero_stage=1)
    est = estimate(M8, GB200.model_copy(update={"gpus_per_node": 8}), tr, plan)
    assert est.frameworks == ["megatron"]
    reasons = reasons_by_framework(plan, 1, True, tr)
    assert any(r.startswith("NVFP4 training") for r in reasons["torchtitan"])
    assert "fp4 training" in reasons["deepspeed"]
    args = with_launch(est, M8, GB200, tr).launch.megatron_args
    assert args[args.index("--fp4-format") + 1] == "e2m1"
    assert args[args.index("--fp4-recipe") + 1] == "nvfp4"
    assert "--fp4-param-gather" in args and "--bf16" in args and "--fp8-format" not in args
    # A log of such a run: its fp4 arguments read back as precision fp4; another fp4 recipe
    # is refused by name.
    fp4 = swap(swap(swap(LOG.read_text(), "fp8", "None"), "fp4", "e2m1"), "fp4_param_gather",
               "True")
    run, _ = anchor_run(fp4, {"preset": "gb200-nvl72"})
    assert (run["training"]["precision"], run["training"]["fp8_param_gather"]) == ("fp4", True)
    with pytest.raises(PlannerInputError) as err:
        anchor_run(swap(fp4, "fp4_recipe", "custom"), {"preset": "gb200-nvl72"})
    assert err.value.field == "log.fp4_recipe"


def test_a_gb300_search_in_fp4_answers_faster_than_in_mxfp8():
    req = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "gb300-nvl72", "num_nodes": 1},
           "training": {"global_batch_size": 256, "seq_length": 8192, "precision": "fp4"},
           "search": {"top_k": 3, "allow_idle_gpus": True}}
    nv = answer(PlanRequest.model_validate(req))
    assert nv.search.status == "OPTIMAL" and nv.plans[0].frameworks == ["megatron"]
    mx = answer(PlanRequest.model_validate(
        {**req, "training": {**req["training"], "precision": "fp8", "fp8_recipe": "mxfp8"}}))
    assert nv.plans[0].step_time_s < mx.plans[0].step_time_s
