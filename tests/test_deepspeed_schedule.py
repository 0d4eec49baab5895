"""DeepSpeed's pipeline engine runs as the 1F1B schedule the step model costs.

DeepSpeed's ``TrainSchedule`` (deepspeed/runtime/pipe/schedule.py) splits a step into 2 (m + p - 1)
slots. In each slot a stage runs one forward or one backward: forwards on even slots of even
stages and odd slots of odd stages, backwards on the others, the forward of micro-batch
``slot // 2 - stage // 2`` and the backward of ``slot // 2 - p + (stage + 1) // 2`` (shifted
by one slot on odd slots). Before a forward a stage sends the gradient of its previous backward
to the stage before and receives its activation from it; before a backward it receives the
gradient from the stage after and sends it the activation of its previous forward. The sends
and receives block until both ends meet (``p2p.send`` / ``p2p.recv``). The slots look like a
lockstep (a short forward waiting for a neighbour's long backward every slot), which would make
the period 2 max(F, B) instead of F + B; replayed op by op, they finish exactly when the
planner's own 1F1B simulation does, uneven stages and fewer micro-batches than stages included,
so the model costs DeepSpeed's pipelines with the same schedule.
"""

from __future__ import annotations

import random

import pytest

from planner.cost.pipeline import simulate


def _slots(stage: int, p: int, m: int) -> list[tuple[str, int]]:
    """One stage's operations in order: ('F' | 'B', micro-batch) and the sends and receives
    ('send_act', 'recv_act', 'send_grad', 'recv_grad', micro-batch) around them."""
    ops: list[tuple[str, int]] = []
    last = -1
    for slot in range(2 * (m + p - 1)):
        forward = slot % 2 == stage % 2
        half = slot // 2 if slot % 2 == 0 else (slot - 1) // 2
        if forward:
            mb = half - stage // 2
        elif slot % 2 == 0:
            mb = half - p + (stage + 1) // 2
        else:
            mb = half - p + 1 + stage // 2
        real = 0 <= mb < m
        if forward and stage > 0:
            if 0 <= last < m:
                ops.append(("send_grad", last))
            if real:
                ops.append(("recv_act", mb))
        if not forward and stage < p - 1:
            if real:
                ops.append(("recv_grad", mb))
            if 0 <= last < m:
                ops.append(("send_act", last))
        if real:
            ops.append(("F" if forward else "B", mb))
        last = mb
    return ops


PEER = {"send_act": (1, "recv_act"), "recv_act": (-1, "send_act"),
        "send_grad": (-1, "recv_grad"), "recv_grad": (1, "send_grad")}


def deepspeed_step(fwd: list[float], bwd: list[float], m: int) -> float:
    """Seconds of one step of DeepSpeed's TrainSchedule with blocking point-to-point."""
    p = len(fwd)
    ops = [_slots(s, p, m) for s in range(p)]
    at, clock = [0] * p, [0.0] * p
    while any(at[s] < len(ops[s]) for s in range(p)):
        moved = False
        for s in range(p):
            if at[s] >= len(ops[s]):
                continue
            kind, mb = ops[s][at[s]]
            if kind in ("F", "B"):
                clock[s] += fwd[s] if kind == "F" else bwd[s]
                at[s] += 1
                moved = True
                continue
            step, match = PEER[kind]
            q = s + step
            if at[q] < len(ops[q]) and ops[q][at[q]] == (match, mb):
                clock[s] = clock[q] = max(clock[s], clock[q])
                at[s] += 1
                at[q] += 1
                moved = True
        assert moved, "the schedule deadlocked"
    return max(clock)


@pytest.mark.parametrize("p,m", [(4, 64), (12, 64), (12, 512), (35, 240)])
def test_uniform_stages_take_m_plus_p_minus_1_periods_of_f_plus_b(p, m):
    # Full recompute's backward is three forwards: a lockstep would take 6 per micro-batch.
    assert deepspeed_step([1.0] * p, [3.0] * p, m) == (m + p - 1) * 4.0


def test_deepspeed_finishes_when_the_planners_1f1b_simulation_does():
    rng = random.Random(7)
    for _ in range(100):
        p, m = rng.randint(2, 8), rng.randint(1, 24)
        fwd = [rng.uniform(0.5, 2.0) for _ in range(p)]
        bwd = [f * rng.uniform(1.5, 3.5) for f in fwd]
        ours = simulate([[f] for f in fwd], [[b] for b in bwd], m, 0.0).makespan
        assert deepspeed_step(fwd, bwd, m) == pytest.approx(ours, rel=1e-12), (p, m)
