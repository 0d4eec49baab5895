"""The interleaved schedule's send/recv with and without Megatron-LM's overlap_p2p_comm
(``TrainingSpec.overlap_p2p_comm``): the exchanges it waits for, worked by hand from
Megatron-Core's ``forward_backward_pipelining_with_interleaving``; the event simulation against
the closed form; what an estimate pays; the launch flag; the framework that cannot run it."""

import pytest

from planner.cost import estimate
from planner.cost.pipeline import exchanges, makespan, simulate, warmup_forwards
from planner.launch import with_launch
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import microbatch_group
from planner.validation.predicted_trace import predicted_trace
from tests.launch_readers import megatron_parser


def test_blocking_exchanges_by_hand():
    # pp 4, 2 chunks, 8 micro-batches, groups of pp: stage 0 runs (4 - 1) * 2 + (2 - 1) * 4 = 10
    # warm-up forwards, each followed by send_forward_recv_forward; the 16 - 10 = 6 steady
    # forward-and-backward pairs by one send_forward_backward_recv_forward_backward each; the 10
    # cool-down backwards by send_backward_recv_backward: 10 + 6 + 10 = 16 + 10 = 26.
    assert warmup_forwards(4, 0, 8, 2) == 10
    assert exchanges(8, 2, 4, None, overlap=False) == 26
    # Overlapped, only the fill: 2 (4 * 2 - 1) = 14. Plain 1F1B blocks either way:
    # 2 (8 + 4 - 1) = 22.
    assert exchanges(8, 2, 4) == 14
    assert exchanges(8, 1, 4) == exchanges(8, 1, 4, overlap=False) == 22
    # Groups of 5 (10 micro-batches): 6 + 5 = 11 warm-up forwards, 20 + 11 = 31 exchanges; a
    # warm-up capped by the m v forwards there are: pp 8, 2 chunks, 4 micro-batches.
    assert exchanges(10, 2, 4, 5, overlap=False) == 31
    assert warmup_forwards(8, 0, 4, 2) == 8 and exchanges(4, 2, 8, overlap=False) == 16
    assert exchanges(8, 2, 1, overlap=False) == 0                  # no pipeline, no sends


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 3, 12), (8, 2, 16), (4, 2, 10), (8, 4, 24),
                                   (2, 4, 6)])
def test_the_simulation_waits_where_megatron_waits(p, v, m):
    # Equal stages: the simulated step with blocking exchanges lies between the step without
    # sends plus one wait per chunk's forward-and-backward (m v) and the closed form (that
    # step plus every exchange, m v + w), which never undercuts it and stays within 1% of it;
    # a free exchange costs nothing either way. (Overlapped, only the fill's sends wait.)
    g = microbatch_group(m, p)
    f, b, c = 1.0 / v, 2.5 / v, 0.05
    fwd, bwd = [[f] * v for _ in range(p)], [[b] * v for _ in range(p)]
    overlapped = simulate(fwd, bwd, m, c, g).makespan
    blocking = simulate(fwd, bwd, m, c, g, overlap=False).makespan
    closed = float(makespan(3.5, 3.5 * p, m, v, p, 0.0)[0])
    assert closed < overlapped <= (closed + exchanges(m, v, p, g) * c) * (1 + 1e-9)
    assert closed + m * v * c <= blocking * (1 + 1e-9)
    assert blocking <= (closed + exchanges(m, v, p, g, overlap=False) * c) * (1 + 1e-9)
    assert blocking >= 0.99 * (closed + exchanges(m, v, p, g, overlap=False) * c)
    assert simulate(fwd, bwd, m, 0.0, g, overlap=False).makespan == pytest.approx(closed)


def test_the_timeline_records_the_exchanges_it_waits_for():
    # pp 4, 2 chunks, 8 micro-batches, sends of 0.05 s. Blocking: stage 0 starts the 26
    # exchanges worked by hand above, waits for each, and its next op starts no earlier than
    # the exchange ends. Overlapped: an exchange after every op that sends (forwards of every
    # chunk but the last stage's last, backwards of every chunk but stage 0's first), none
    # waited for. 1F1B: one after each of stage 0's 8 forwards, none after its backwards.
    f, b, c = 0.5, 1.25, 0.05
    fwd, bwd = [[f] * 2 for _ in range(4)], [[b] * 2 for _ in range(4)]
    blocking = simulate(fwd, bwd, 8, c, overlap=False)
    first = blocking.exchanges[0]
    assert len(first) == exchanges(8, 2, 4, overlap=False) == 26
    assert all(waits and dur == c for _, dur, waits in first)
    starts = sorted(start for _, _, _, start, _ in blocking.ops[0])
    for at, dur, _ in first:
        later = [x for x in starts if x >= at]
        assert not later or later[0] >= at + dur - 1e-12
    overlapped = simulate(fwd, bwd, 8, c)
    assert [len(x) for x in overlapped.exchanges] == [24, 32, 32, 24]
    assert not any(waits for stage in overlapped.exchanges for _, _, waits in stage)
    one = simulate([[1.0]] * 4, [[2.0]] * 4, 8, c)
    assert len(one.exchanges[0]) == 8 and all(w for _, _, w in one.exchanges[0])
    assert [len(x) for x in one.exchanges] == [8, 16, 16, 8]
    assert simulate(fwd, bwd, 8, 0.0, overlap=False).exchanges == [[], [], [], []]


def test_the_predicted_trace_draws_the_simulated_exchanges():
    # The trace's send/recv events are the timeline's, marked blocking where the stage waits:
    # with overlap_p2p_comm false every one of them, stage 0 drawing m v + w of them.
    plan = ParallelPlan(tp=8, pp=8, vpp=2, sequence_parallel=True, recompute="full")
    t = TrainingSpec(global_batch_size=128, seq_length=2048, overlap_p2p_comm=False)
    est = estimate(GPT3, NODES, t, plan)
    trace = predicted_trace(est, GPT3, NODES, t)
    sends = [e for e in trace["traceEvents"] if e.get("name") == "send_recv"]
    assert sum(e["pid"] == 0 for e in sends) == 278
    assert all(e["args"]["blocking"] for e in sends)
    t_on = TrainingSpec(global_batch_size=128, seq_length=2048)
    on = predicted_trace(estimate(GPT3, NODES, t_on, plan), GPT3, NODES, t_on)
    sends_on = [e for e in on["traceEvents"] if e.get("name") == "send_recv"]
    assert sends_on and not any(e["args"]["blocking"] for e in sends_on)
    # stage 0 sends after its forwards of both chunks and its backwards of chunk 1
    assert sum(e["pid"] == 0 for e in sends_on) == 128 * 3


GPT3 = ModelSpec.from_preset("gpt3-175b")
NODES = ClusterSpec.from_preset("dgx-a100", num_nodes=8)


def _estimate(plan, **training):
    t = TrainingSpec(global_batch_size=128, seq_length=2048, **training)
    return with_launch(estimate(GPT3, NODES, t, plan), GPT3, NODES, t)


def _send(est):
    return next(u for u in est.communication if u.strategy == "PP")


def test_an_estimate_pays_every_blocking_exchange():
    # GPT-3 175B as tp8 pp8 with 2 chunks on 64 A100s, 128 micro-batches: overlapped, the
    # pipeline's sends cost its fill, 2 (8 * 2 - 1) = 30 hops; blocking, stage 0's
    # 128 * 2 + (7 * 2 + 8) = 278; the step grows by the 248 more, each one hop's transfer.
    plan = ParallelPlan(tp=8, pp=8, vpp=2, sequence_parallel=True, recompute="full")
    on, off = _estimate(plan), _estimate(plan, overlap_p2p_comm=False)
    hop = _send(on).time_s
    assert _send(off).time_s == hop and hop > 0
    assert on.breakdown["pp_comm"] == pytest.approx(30 * hop)
    assert off.breakdown["pp_comm"] == pytest.approx(278 * hop)
    assert off.step_time_s - on.step_time_s == pytest.approx(248 * hop, rel=1e-6)
    # Plain 1F1B blocks either way: nothing changes.
    one = ParallelPlan(tp=8, pp=8, sequence_parallel=True, recompute="full")
    assert _estimate(one, overlap_p2p_comm=False).step_time_s == _estimate(one).step_time_s


def test_megatron_runs_the_blocking_schedule_with_its_own_flag():
    # --no-overlap-p2p-communication (Megatron-LM arguments.py, dest overlap_p2p_comm), only
    # for interleaved plans; torchtitan's schedule posts its receives ahead and waits for its
    # sends at the end, so it does not run the blocking one as predicted.
    plan = ParallelPlan(tp=8, pp=8, vpp=2, sequence_parallel=True, recompute="full")
    off = _estimate(plan, overlap_p2p_comm=False)
    args, _ = megatron_parser().parse_known_args(off.launch.megatron_args)
    assert args.overlap_p2p_comm is False and args.num_virtual_stages_per_pipeline_rank == 2
    assert "--no-overlap-p2p-communication" not in _estimate(plan).launch.megatron_args
    one = _estimate(ParallelPlan(tp=8, pp=8, sequence_parallel=True, recompute="full"),
                    overlap_p2p_comm=False)
    assert "--no-overlap-p2p-communication" not in one.launch.megatron_args
    assert "torchtitan" not in off.frameworks
    assert "sends block" in " ".join(off.launch.not_runnable["torchtitan"])
    assert "sends block" not in " ".join(_estimate(plan).launch.not_runnable["torchtitan"])
