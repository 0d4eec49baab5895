"""Pipeline schedules: the event simulation against the closed form, the predicted trace."""

import json
import random

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.cost import estimate
from planner.cost.pipeline import makespan, schedule, simulate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import microbatch_group, valid_microbatch_group
from planner.validation.predicted_trace import predicted_trace


def test_simulated_1f1b_matches_the_bubble_formula():
    # p equal stages, f + b = t per micro-batch, no send/recv: m t + (p - 1) t.
    tl = simulate([[1.0]] * 4, [[2.0]] * 4, m=8, p2p_s=0.0)
    assert tl.makespan == pytest.approx(8 * 3 + 3 * 3)
    for s, ops in enumerate(tl.ops):
        kinds = [k for k, *_ in ops]
        assert kinds.count("F") == kinds.count("B") == 8
        assert kinds[: 4 - s - 1] == ["F"] * (4 - s - 1)      # warm-up forwards
    # Dependencies: a forward follows the previous stage's, a backward the next stage's.
    end = {(k, i, s): e for s, ops in enumerate(tl.ops) for k, _, i, _, e in ops}
    start = {(k, i, s): b for s, ops in enumerate(tl.ops) for k, _, i, b, _ in ops}
    for i in range(8):
        for s in range(1, 4):
            assert start["F", i, s] >= end["F", i, s - 1]
            assert start["B", i, s - 1] >= end["B", i, s]


@pytest.mark.parametrize("p,v,m", [(4, 1, 8), (4, 1, 2), (4, 1, 1), (8, 1, 3), (4, 2, 8),
                                   (4, 2, 4), (4, 2, 6), (4, 3, 9), (8, 4, 16), (8, 2, 12),
                                   (2, 4, 5), (16, 8, 16)])
def test_closed_form_equals_the_simulation_for_equal_stages(p, v, m):
    # Fewer micro-batches than stages (1F1B), micro-batches pp does not divide (interleaved,
    # with Megatron-LM's smallest valid group): the closed form is exact.
    g = microbatch_group(m, p) if v > 1 else None
    f, b = 1.0 / v, 2.5 / v
    tl = simulate([[f] * v for _ in range(p)], [[b] * v for _ in range(p)], m, 0.0, g)
    closed, bubble = makespan(3.5, 3.5 * p, m, v, p, 0.0)
    assert tl.makespan == pytest.approx(float(closed))
    assert float(bubble) == pytest.approx(3.5 * (p - 1) / (v if m >= p else 1))


def test_closed_form_bounds_the_simulation_for_unequal_stages():
    # Stages of unequal work: the closed form (the slowest stage runs every micro-batch, the
    # rest is fill and drain) is never below the simulated schedule, so the search never
    # takes an imbalanced pipeline for faster than it is, and stays within 15% of it for
    # stages up to 30% apart.
    rng = random.Random(5)
    for _ in range(300):
        p = rng.choice([2, 3, 4, 6, 8, 16])
        v = rng.choice([1, 1, 2, 4])
        m = rng.choice([p, p + 1, 2 * p, 3 * p - 1, 4 * p]) if v > 1 else rng.randint(1, 4 * p)
        g = microbatch_group(m, p) if v > 1 else None
        if v > 1 and g is None:
            continue
        t = [rng.uniform(0.7, 1.3) for _ in range(p)]
        share = rng.uniform(0.25, 0.45)                    # forward's share of the work
        sim = simulate([[x * share / v] * v for x in t], [[x * (1 - share) / v] * v for x in t],
                       m, 0.0, g).makespan
        closed = float(makespan(max(t), sum(t), m, v, p, 0.0)[0])
        assert sim * (1 - 1e-9) <= closed <= 1.15 * sim, (p, v, m)


def test_megatron_microbatch_group_rule():
    # schedules.py: pp <= group <= m, and the last group empty or at least pp.
    assert microbatch_group(8, 4) == 4
    assert microbatch_group(6, 4) == 6          # 4 leaves 2 < pp, 5 leaves 1
    assert microbatch_group(10, 4) == 5
    assert microbatch_group(3, 4) is None       # interleaving needs m >= pp
    assert valid_microbatch_group(5, 9, 4) and not valid_microbatch_group(4, 9, 4)
    # The interleaved order: chunks in groups of g micro-batches, the last group short.
    assert schedule(2, 0, 3, 2, group=3)[:6] == [("F", 0, 0), ("F", 0, 1), ("F", 0, 2),
                                                  ("F", 1, 0), ("F", 1, 1), ("F", 1, 2)]


def test_trace_of_a_plan_agrees_with_its_estimate(tmp_path):
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    est = estimate(m, c, tr, ParallelPlan(dp=1, tp=8, pp=4))
    doc = predicted_trace(est, m, c, tr)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    makespan_s = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert makespan_s == pytest.approx(est.step_time_s, rel=0.02)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"stage {s} (20 layers)" for s in range(4)}
    assert sum(e["name"].startswith("forward") for e in spans) == 4 * est.grad_accum_steps
    json.dumps(doc)     # serialisable


def test_trace_of_a_plan_that_offloads_activations_agrees_with_its_estimate():
    """An FSDP plan on a GB200 rack with 60 of 80 layers offloaded, whose copies outlast
    their windows: the trace's micro-batches carry the exposed copies, so it ends where the
    estimate's step does."""
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("gb200-nvl72", num_nodes=1)
    tr = TrainingSpec(global_batch_size=128, seq_length=8192, precision="fp8")
    est = estimate(m, c, tr, ParallelPlan(dp=64, zero_stage=3, cpu_offload_layers=60))
    assert est.breakdown["offload"] > 0.1 * est.step_time_s
    doc = predicted_trace(est, m, c, tr)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    makespan_s = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert makespan_s == pytest.approx(est.step_time_s, rel=0.01)


def test_trace_of_an_interleaved_plan_with_an_embedding_and_loss_layout():
    # Llama 3 405B's 126 layers on 16 stages of 8 chunks: the embedding and the loss take a
    # layer's place, so the first and last stage hold 7 layers and one chunk each is empty.
    m = ModelSpec.from_preset("llama3-405b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=32)
    tr = TrainingSpec(global_batch_size=32, seq_length=8192)
    est = estimate(m, c, tr, ParallelPlan(dp=2, tp=8, pp=16, vpp=8, sequence_parallel=True,
                                          recompute="full", zero_stage=1))
    assert est.pipeline_layout == "embedding_loss"
    assert est.layers_per_stage[0] == est.layers_per_stage[-1] == 7
    assert est.layers_per_chunk[0][0] == 0 and est.layers_per_chunk[-1][-1] == 0
    doc = predicted_trace(est, m, c, tr)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sum(e["name"].startswith("forward") for e in spans) == 16 * 8 * 16
    makespan_s = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert makespan_s == pytest.approx(est.step_time_s, rel=0.03)


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
    # Fewer micro-batches than stages: all forwards, then all backwards.
    assert one_f_one_b_order(4, 0, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
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


def test_1f1b_sends_block_the_sender_so_the_closed_form_holds_with_transfers():
    # Megatron's 1F1B waits for each batched send/recv: every micro-batch pays two transfers
    # on every stage, which the closed form charges (2 m c + 2 (p - 1) c). Equal stages of
    # forward 1 s and backward 2 s, 0.1 s per transfer, 4 stages and 8 micro-batches: the
    # closed form gives 8 x 3.2 + 9 + 0.6 = 35.2 s and the simulation 34.9 s.
    from planner.cost.pipeline import makespan
    sim = simulate([[1.0]] * 4, [[2.0]] * 4, m=8, p2p_s=0.1).makespan
    assert sim == pytest.approx(34.9)
    assert float(makespan(3.0, 12.0, 8, 1, 4, 0.1)[0]) == pytest.approx(35.2)
    # Sends that did not block would leave the steady state at 3 s per micro-batch.
    assert sim > simulate([[1.0]] * 4, [[2.0]] * 4, m=8, p2p_s=0.0).makespan + 8 * 0.2 - 1e-9
