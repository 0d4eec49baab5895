"""The predicted training step as a Chrome trace (the format torch.profiler exports), so the
prediction and a measured step open side by side in Perfetto or chrome://tracing.

One process per pipeline stage, with a compute track and a communication track. The 1F1B
schedule is simulated event by event: stage s runs p - s - 1 warm-up forwards, then alternates
one forward and one backward, then drains its backwards (Narayanan et al. SC'21, figure 4); a
forward of micro-batch i starts when stage s-1 has finished it and its activations have arrived
(one send/recv), a backward when stage s+1 has finished its backward. Per micro-batch the
stage's forward and backward times, the exposed TP and CP collectives, the send/recv and the
gradient reduction and optimizer come from the cost model's tables, as in ``estimate``.
Interleaved plans (vpp > 1) are drawn as plain 1F1B with a note (their chunks are not
simulated one by one).
"""

from __future__ import annotations

from planner.cost.efficiency import EfficiencyModel
from planner.cost.tables import RECOMPUTE, CostTables
from planner.result import PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.validation.schedule import one_f_one_b_order


def stage_times(est: PlanEstimate, tables: CostTables) -> list[tuple[float, float]]:
    """(forward, backward) seconds of one micro-batch on each stage, comm included."""
    key = (est.tp, est.cp, est.micro_batch_size, RECOMPUTE.index(est.recompute),
           int(est.sequence_parallel))
    lw, tp_s, cp_s = tables.layer(*key)
    hw = tables.head(est.tp, est.cp, est.micro_batch_size)
    passes = 3 if est.recompute == "full" else 2
    tp_fwd, tp_bwd = tp_s / passes, tp_s * (passes - 1) / passes
    cp_fwd = cp_s / 3 if est.cp > 1 else 0.0
    out = []
    p = len(est.layers_per_stage)
    for i, n in enumerate(est.layers_per_stage):
        f = n * (lw.fwd_s + tp_fwd + cp_fwd)
        b = n * (lw.bwd_s + lw.recompute_s + tp_bwd + cp_s - cp_fwd)
        if i == 0:
            f, b = f + hw.embed_s, b + hw.embed_s
        if i == p - 1:
            f, b = f + hw.head_fwd_s, b + hw.head_bwd_s
        out.append((f, b))
    return out


def simulate_1f1b(times: list[tuple[float, float]], m: int, p2p_s: float
                  ) -> list[list[tuple[str, int, float, float]]]:
    """Per stage, the (kind 'F'/'B', micro-batch, start, end) of each op in 1F1B order."""
    p = len(times)
    order = [one_f_one_b_order(p, s, m) for s in range(p)]
    end: dict[tuple[str, int, int], float] = {}
    free = [0.0] * p
    pos = [0] * p
    out: list[list[tuple[str, int, float, float]]] = [[] for _ in range(p)]
    remaining = sum(len(o) for o in order)
    while remaining:
        progressed = False
        for s in range(p):
            if pos[s] == len(order[s]):
                continue
            kind, i = order[s][pos[s]]
            if kind == "F":
                dep = 0.0 if s == 0 else end.get(("F", i, s - 1))
                dep = dep if s == 0 or dep is None else dep + p2p_s
            else:
                dep = end.get(("F", i, s)) if s == p - 1 else end.get(("B", i, s + 1))
                dep = dep if s == p - 1 or dep is None else dep + p2p_s
            if dep is None:
                continue
            start = max(free[s], dep)
            dur = times[s][0] if kind == "F" else times[s][1]
            end[kind, i, s] = free[s] = start + dur
            out[s].append((kind, i, start, start + dur))
            pos[s] += 1
            remaining -= 1
            progressed = True
        if not progressed:
            raise RuntimeError("1F1B simulation stalled")   # cannot happen for a valid order
    return out


def predicted_trace(est: PlanEstimate, model: ModelSpec, cluster: ClusterSpec,
                    training: TrainingSpec, eff: EfficiencyModel | None = None,
                    tables: CostTables | None = None) -> dict:
    tables = tables or CostTables(model, cluster, training, eff or EfficiencyModel())
    times = stage_times(est, tables)
    m = est.grad_accum_steps
    p2p = 0.0
    if est.pp > 1:
        p2p = tables.p2p_use(est.tp, est.cp, est.dp, est.pp, est.micro_batch_size).cost.time_s
    sched = simulate_1f1b(times, m, p2p)
    us = 1e6
    events: list[dict] = []
    for s, ops in enumerate(sched):
        events.append({"ph": "M", "name": "process_name", "pid": s,
                       "args": {"name": f"stage {s} ({est.layers_per_stage[s]} layers)"}})
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": 0,
                       "args": {"name": "compute"}})
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": 1,
                       "args": {"name": "communication"}})
        for kind, i, start, stop in ops:
            events.append({"ph": "X", "pid": s, "tid": 0, "cat": "predicted",
                           "name": f"{'forward' if kind == 'F' else 'backward'} mb{i}",
                           "ts": start * us, "dur": (stop - start) * us,
                           "args": {"micro_batch": i, "stage": s}})
            if p2p and ((kind == "F" and s < est.pp - 1) or (kind == "B" and s > 0)):
                events.append({"ph": "X", "pid": s, "tid": 1, "cat": "predicted",
                               "name": "send_recv", "ts": stop * us, "dur": p2p * us})
        tail = ops[-1][3] if ops else 0.0
        for name in ("dp_comm", "zero_comm", "optimizer"):
            dur = est.breakdown.get(name, 0.0)
            if dur > 0:
                events.append({"ph": "X", "pid": s, "tid": 1 if name != "optimizer" else 0,
                               "cat": "predicted", "name": name, "ts": tail * us,
                               "dur": dur * us})
                tail += dur
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": {"source": "parallelism-planner prediction",
                         "plan": {k: getattr(est, k) for k in ("dp", "tp", "pp", "cp", "vpp",
                                                               "micro_batch_size",
                                                               "grad_accum_steps")},
                         "predicted_step_time_s": est.step_time_s,
                         "note": "interleaved chunks drawn as plain 1F1B" if est.vpp > 1
                         else ""}}
