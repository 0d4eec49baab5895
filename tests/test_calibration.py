"""Calibration fits: synthetic recovery, nccl-tests logs, errors named by line."""

import numpy as np
import pytest

from planner.calibration.fit import fit_samples, fit_series, predict
from planner.calibration.model import Sample
from planner.calibration.nccl_tests import NcclTestsFormatError, parse
from tests.nccl_logs import make_log


@pytest.mark.parametrize("alpha_us,bw_gb,p,noise", [
    (30.0, 50.0, 8, 0.02), (5.0, 200.0, 4, 0.05), (300.0, 0.8, 2, 0.05), (2.0, 25.0, 16, 0.03)])
def test_fit_recovers_known_alpha_and_beta_within_5_percent(alpha_us, bw_gb, p, noise):
    rng = np.random.default_rng(int(alpha_us * 10 + p))
    m = np.array([2.0**k for k in range(10, 29)])
    t = (alpha_us + m / (bw_gb * 1e3)) * (1 + rng.normal(0, noise, len(m)))
    fit = fit_series("all_reduce", "intra_node", p, m, t)
    assert fit.latency_us == pytest.approx(alpha_us, rel=0.05)
    assert fit.bandwidth_gb_per_s == pytest.approx(bw_gb, rel=0.05)
    # Bus bandwidth is algbw x 2(p-1)/p (nccl-tests); the per-step alpha is over 2(p-1) steps.
    assert fit.bus_bandwidth_gb_per_s == pytest.approx(fit.bandwidth_gb_per_s * 2 * (p - 1) / p)
    assert fit.alpha_step_us == pytest.approx(fit.latency_us / (2 * (p - 1)))
    assert fit.quality == "good" and not fit.segments
    assert fit.max_rel_err < 4 * noise + 0.02


def test_outliers_do_not_drag_the_fit():
    m = np.array([2.0**k for k in range(10, 26)])
    t = 20 + m / 10e3
    t[5] *= 3       # one bad point
    fit = fit_series("all_gather", "intra_node", 4, m, t)
    assert fit.latency_us == pytest.approx(20, rel=0.05)
    assert fit.bandwidth_gb_per_s == pytest.approx(10, rel=0.05)
    assert fit.max_rel_err > 0.5        # the outlier is reported, not hidden


def test_one_group_size_predicts_another():
    # A ring all_reduce over p ranks: 2(p-1) steps of alpha, 2(p-1)/p of M over bus bw.
    alpha, bus = 3e-6, 100e9

    def ring(m, p):
        return (2 * (p - 1) * alpha + 2 * (p - 1) / p * m / bus) * 1e6

    m = np.array([2.0**k for k in range(10, 28)])
    fit4 = fit_series("all_reduce", "intra_node", 4, m, ring(m, 4))
    for size in (4096.0, 2.0**24):
        assert predict(fit4, size, 16) == pytest.approx(ring(np.array(size), 16), rel=0.02)


def test_piecewise_fit_of_an_nccl_sweep():
    text, sizes, times = make_log()
    log = parse(text)
    fits, samples, notes = fit_samples(log.samples())
    (fit,) = fits
    assert fit.segments and 2 <= len(fit.segments) <= 3
    pred = np.array([s.predicted_us for s in samples])
    rel = np.abs(pred - times) / times
    big = sizes >= 1024
    assert rel[big].max() <= 0.15 and np.median(rel[big]) <= 0.05
    assert fit.latency_us > 0
    # Large-message bus bandwidth: the log's own at the largest size.
    assert fit.bus_bandwidth_gb_per_s == pytest.approx(log.rows[-1]["busbw_gb_per_s"], rel=0.05)


def test_one_line_is_not_enough_for_a_real_sweep():
    text, sizes, times = make_log()
    m, t = sizes, times
    from planner.calibration.fit import _fit_lines

    _, one_line_err, _ = _fit_lines(m, t * 1e-6, 1)
    assert one_line_err > 0.3        # research/collectives.md: 50-75% for one line


@pytest.mark.parametrize("kwargs,op,ranks,tier", [
    ({}, "all_reduce", 8, "intra_node"),
    ({"op": "all_gather", "ranks": 16, "hosts": 2, "prefix": "[1,0]<stdout>:"}, "all_gather",
     16, "inter_node"),
    ({"op": "reduce_scatter", "old_format": True, "prefix": " 0: "}, "reduce_scatter", 8,
     "intra_node"),
    ({"op": "all_to_all", "ranks": 4}, "all_to_all", 4, "intra_node"),
    ({"op": "broadcast"}, "broadcast", 8, "intra_node"),
    ({"op": "send_recv", "ranks": 2}, "send_recv", 2, "intra_node"),
])
def test_parse_formats_prefixes_and_chatter(kwargs, op, ranks, tier):
    text, sizes, times = make_log(**kwargs)
    log = parse(text)
    assert (log.op, log.ranks, log.tier) == (op, ranks, tier)
    assert len(log.rows) == len(sizes)
    assert [r["size"] for r in log.rows] == list(sizes)
    got = np.array([r["time_us"] for r in log.rows])
    assert np.allclose(got, times, rtol=0.01)
    assert log.avg_busbw_gb_per_s > 0


def test_malformed_logs_name_the_line():
    text, _, _ = make_log()
    lines = text.splitlines()
    bad = next(i for i, ln in enumerate(lines) if ln.strip().startswith("1024 "))
    lines[bad] = "        1024           256     float     sum      -1    12.5"
    with pytest.raises(NcclTestsFormatError, match=rf"line {bad + 1}: expected 12 or 13 columns"):
        parse("\n".join(lines))
    lines[bad] = ("        1024           256     float     sum      -1    abc    0.08    "
                  "0.14      0    12.40    0.08    0.14      0")
    with pytest.raises(NcclTestsFormatError, match=rf"line {bad + 1}: out-of-place time 'abc'"):
        parse("\n".join(lines))
    with pytest.raises(NcclTestsFormatError, match="no result rows"):
        parse("# nThread 1 nGpus 1\nhello\n")
    no_name = "\n".join(ln for ln in text.splitlines() if "_perf" not in ln)
    with pytest.raises(NcclTestsFormatError, match="which collective"):
        parse(no_name)
    assert parse(no_name, op="all_reduce").op == "all_reduce"


def test_short_series_are_reported_not_fitted():
    s = [Sample(op="all_reduce", group_size=2, message_bytes=1e6, time_us=100.0)]
    fits, samples, notes = fit_samples(s)
    assert fits == [] and "need 3" in notes[0] and samples == s


def test_plans_cost_communication_with_a_calibration():
    from planner.calibration.model import CalibrationIn
    from planner.cost import estimate
    from planner.request import EstimateRequest

    text, _, _ = make_log(op="all_reduce", ranks=8)
    fits, _, _ = fit_samples(parse(text).samples())
    body = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "plan": {"dp": 2, "tp": 8, "micro_batch_size": 1, "recompute": "full"}}
    plain = EstimateRequest.model_validate(body)
    calibrated = EstimateRequest.model_validate(
        {**body, "calibration": {"id": "cal-test", "fits": [f.model_dump() for f in fits],
                                 "samples": []}})
    assert isinstance(calibrated.calibration, CalibrationIn)
    a = estimate(plain.model, plain.cluster, plain.training, plain.plan)
    b = estimate(calibrated.model, calibrated.cluster, calibrated.training, calibrated.plan,
                 calibration=calibrated.calibration)
    tp_a = next(c for c in a.communication if c.strategy == "TP")
    tp_b = next(c for c in b.communication if c.strategy == "TP")
    assert tp_a.source == "preset" and tp_b.source == "cal-test"
    assert tp_b.time_s * 1e6 == pytest.approx(predict(fits[0], tp_b.message_bytes, 8))
    # The DP all_reduce crosses nodes: the intra-node fit does not cover it.
    dp_b = next(c for c in b.communication if c.strategy == "DP")
    assert dp_b.tier == "inter_node" and dp_b.source == "preset"
    assert b.breakdown["tp_comm"] != a.breakdown["tp_comm"]


def test_alltoall_perf_logs_calibrate_the_expert_parallel_all_to_all():
    """An nccl-tests alltoall_perf log fits the all_to_all a MoE plan's EP group issues."""
    from planner.calibration.model import CalibrationIn
    from planner.cost import estimate
    from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

    text, sizes, times = make_log(op="all_to_all", ranks=8, lines=((25e-6, 20e9),
                                                                   (40e-6, 90e9)))
    log = parse(text)
    assert (log.op, log.ranks) == ("all_to_all", 8)
    fits, samples, _ = fit_samples(log.samples())
    (fit,) = fits
    pred = np.array([s.predicted_us for s in samples])
    big = sizes >= 1 << 16
    assert np.median(np.abs(pred - times)[big] / times[big]) <= 0.05
    cal = CalibrationIn(id="cal-a2a", fits=fits, samples=[])
    model = ModelSpec.from_preset("mixtral-8x7b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    training = TrainingSpec(global_batch_size=64, seq_length=4096)
    p = ParallelPlan(dp=8, ep=8, zero_stage=1, recompute="full")
    plain = estimate(model, cluster, training, p)
    calibrated = estimate(model, cluster, training, p, calibration=cal)
    a2a = next(c for c in calibrated.communication if c.strategy == "EP")
    assert next(c for c in plain.communication if c.strategy == "EP").source == "preset"
    assert a2a.source == "cal-a2a" and a2a.group_size == 8
    assert a2a.time_s * 1e6 == pytest.approx(predict(fit, a2a.message_bytes, 8))
    assert calibrated.breakdown["ep_comm"] != plain.breakdown["ep_comm"]


def test_sweep_medians_drop_far_outliers_and_carry_an_order_statistic_interval():
    from planner.probe.sweep_worker import summarize

    # 19 batches around 1.0 and one descheduled at 9.0: beyond Q3 + 3 IQR, dropped.
    xs = [1.0 + 0.01 * i for i in range(19)] + [9.0]
    med, lo, hi, n = summarize(xs)
    assert n == 19 and med == pytest.approx(1.09)
    # n = 19: j = floor(9.5 - 4.27) = 5, k = ceil(1 + 9.5 + 4.27) = 15: the 5th and the
    # 15th smallest.
    assert (lo, hi) == (pytest.approx(1.04), pytest.approx(1.14))
    assert summarize([2.0]) == (2.0, 2.0, 2.0, 1)
