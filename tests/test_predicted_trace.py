"""The predicted step as a Chrome trace: a 1F1B simulation that agrees with the cost model."""

import json

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.cost import estimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.validation.predicted_trace import predicted_trace, simulate_1f1b


def test_simulated_1f1b_matches_the_bubble_formula():
    # p equal stages, f + b = t per micro-batch, no send/recv: m t + (p - 1) t.
    sched = simulate_1f1b([(1.0, 2.0)] * 4, m=8, p2p_s=0.0)
    makespan = max(op[3] for ops in sched for op in ops)
    assert makespan == pytest.approx(8 * 3 + 3 * 3)
    for s, ops in enumerate(sched):
        kinds = [k for k, _, _, _ in ops]
        assert kinds.count("F") == kinds.count("B") == 8
        assert kinds[: 4 - s - 1] == ["F"] * (4 - s - 1)      # warm-up forwards
    # Dependencies: a forward follows the previous stage's, a backward the next stage's.
    end = {(k, i, s): e for s, ops in enumerate(sched) for k, i, _, e in ops}
    start = {(k, i, s): b for s, ops in enumerate(sched) for k, i, b, _ in ops}
    for i in range(8):
        for s in range(1, 4):
            assert start["F", i, s] >= end["F", i, s - 1]
            assert start["B", i, s - 1] >= end["B", i, s]


def test_trace_of_a_plan_agrees_with_its_estimate(tmp_path):
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    est = estimate(m, c, tr, ParallelPlan(dp=1, tp=8, pp=4))
    doc = predicted_trace(est, m, c, tr)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    makespan = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert makespan == pytest.approx(est.step_time_s, rel=0.02)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"stage {s} (20 layers)" for s in range(4)}
    assert sum(e["name"].startswith("forward") for e in spans) == 4 * est.grad_accum_steps
    json.dumps(doc)     # serialisable


def test_cli_writes_the_trace(tmp_path):
    out = tmp_path / "step.json"
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"model": {"preset": "llama3-8b"},
                               "cluster": {"preset": "dgx-h100", "num_nodes": 1},
                               "training": {"global_batch_size": 32, "seq_length": 4096},
                               "plan": {"dp": 2, "tp": 2, "pp": 2}}))
    res = CliRunner().invoke(app, ["estimate", str(req), "--json", "--trace", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["metadata"]["plan"]["pp"] == 2 and doc["traceEvents"]


def test_schedule_order_and_rank_groups_by_hand():
    from planner.validation.schedule import one_f_one_b_order, rank_groups

    # Stage 0 of 3 with 4 micro-batches: 2 warm-up forwards, then F/B in turn, then drain.
    assert one_f_one_b_order(3, 0, 4) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3),
                                          ("B", 1), ("B", 2), ("B", 3)]
    assert one_f_one_b_order(3, 2, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]
    # tp=2, dp=2, pp=2: tp innermost.
    g = rank_groups(2, 1, 2, 2)
    assert g["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert g["dp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert g["cp"] == [[r] for r in range(8)]
    # tp=2, cp=2, dp=1, pp=2 (Megatron's order: tp, cp, dp, pp): the CP ring strides by tp,
    # the gradient reduction runs over the dp x cp ranks.
    g = rank_groups(2, 2, 1, 2)
    assert g["cp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g["dp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
