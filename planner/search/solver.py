"""``plan``: the k best plans of a request.

The exact engine for the homogeneous degrees is vectorised enumeration: the structural plan
space (``space.py``) is costed whole by the step model's array composition (``cost/batch.py``),
which memoises each component (a layer's work, a collective) over the divisor lattice; the
plans that fit are ranked by (step time in microseconds, memory, degrees), so the answer is
deterministic, and the first k are the optimum over the space. No solver is needed for that
choice. CP-SAT decides what enumeration cannot: when pipeline stages may be uneven, it assigns
layers to stages for the best pipelined plans (``stages.py``), including plans whose even split
does not fit in memory, and the list is re-ranked by exact re-costing.
"""

from __future__ import annotations

import time

import numpy as np

from planner.cost.batch import BatchCost, PlanArrays, compose
from planner.cost.step import evaluate, to_estimate
from planner.cost.tables import cost_tables
from planner.launch import with_launch
from planner.search.explain import memory_reasons, structural_reasons
from planner.search.partial import block_recompute
from planner.search.request import PlanRequest
from planner.search.result import PlanResult, SearchStats
from planner.search.space import Space, build_space
from planner.search.stages import balance_stages

REBALANCE_MARGIN = 4
NEAR_FIT = 1.3   # uneven stages are tried on plans whose even split needs up to 30% too much


def _key(plans: PlanArrays, i: int, block: int = 0) -> tuple:
    """The degrees of plan i (under block recompute of ``block`` layers when > 0), the last
    tie-break of the ranking (as the brute force's)."""
    return (int(plans.dp[i]), int(plans.tp[i]), int(plans.pp[i]), int(plans.cp[i]),
            int(plans.vpp[i]), int(plans.mbs[i]), 2 if block else int(plans.rec[i]),
            int(plans.zero[i]), int(plans.sp[i]), block, int(plans.ep[i]), int(plans.etp[i]))


def _best(plans: PlanArrays, bc: BatchCost, fits: np.ndarray, keep: int) -> np.ndarray:
    """Indices of the ``keep`` first fitting plans in the order (step time in us, memory,
    degrees). Only the plans as fast as the keep-th are sorted."""
    idx = np.flatnonzero(fits)
    cost_us = np.rint(np.minimum(bc.step_time_s[idx] * 1e6, 2**62)).astype(np.int64)
    if len(idx) > keep:
        bar = np.partition(cost_us, keep - 1)[keep - 1]
        near = cost_us <= bar
        idx, cost_us = idx[near], cost_us[near]
    sub = plans.take(idx)
    mem = np.rint(np.minimum(bc.memory_bytes[idx], 2**62)).astype(np.int64)
    order = np.lexsort((sub.etp, sub.ep, sub.sp, sub.zero, sub.rec, sub.mbs, sub.vpp, sub.cp,
                        sub.pp, sub.tp, sub.dp, mem, cost_us))
    return idx[order[:keep]]


def plan(request: PlanRequest) -> PlanResult:
    """Search the request's plan space; the k best plans, or INFEASIBLE with reasons."""
    t0 = time.perf_counter()
    req = request
    search = req.search
    deadline = t0 + search.time_limit_ms / 1000
    space: Space = build_space(req.model, req.cluster, req.training, search)

    def done(plans_out, status, feasible=0, reasons=()):
        return PlanResult(
            id=req.request_id(), plans=plans_out, infeasible_reasons=list(reasons),
            search=SearchStats(status=status, solve_ms=(time.perf_counter() - t0) * 1e3,
                               space_size=space.size, memory_feasible=feasible,
                               lattice_points=space.lattice_points,
                               solver_candidates=feasible),
        )

    if space.size == 0:
        return done([], "INFEASIBLE",
                    reasons=structural_reasons(req.model, req.cluster, req.training, search))
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    plans = space.plans
    capacity = req.cluster.gpu.memory_bytes * (1 - search.memory_headroom)
    # Step times of plans that overflow by a little are kept for the uneven-stage pass.
    bc = compose(plans, tables,
                 memory_cap=capacity * (NEAR_FIT if search.rebalance_stages else 1.0))
    fits = bc.memory_bytes <= capacity
    k = search.top_k
    keep = k + REBALANCE_MARGIN if search.rebalance_stages else k
    # Every plan of the space is costed exactly: its k best are the k first in that order.
    chosen = [int(i) for i in _best(plans, bc, fits, keep)]
    feasible = int(fits.sum())
    status = "OPTIMAL"

    # Candidates as (step, memory, degrees, plan index, layers or None for even,
    # block-recomputed layers per chunk or 0).
    results = [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]), _key(plans, i), i, None, 0)
               for i in chosen]
    if search.rebalance_stages:
        results = _rebalance(req, tables, plans, bc, fits, results, capacity, deadline)
    results = [r for r in results if r[1] <= capacity]
    if (search.partial_recompute and search.allows_recompute("full")
            and search.allows_recompute("none")
            and search.framework in (None, "megatron")):
        times = sorted(r[0] for r in results)
        bar = times[k - 1] if len(times) >= k else np.inf
        results += [(t, mem, _key(plans, i, n), i, None, n)
                    for t, mem, i, n in block_recompute(plans, tables, bc, fits, capacity, bar)]
    results.sort(key=lambda r: (round(r[0] * 1e6), round(r[1]), r[2]))
    top = results[:k]
    if not top:
        return done([], "INFEASIBLE", feasible=feasible,
                    reasons=memory_reasons(req, plans, bc, capacity))
    out = []
    for j, (_, _, _, i, layers, n) in enumerate(top):
        p = plans.plan(i, layers)
        if n:
            p = p.model_copy(update={"recompute": "full", "recompute_num_layers": n})
        ev = evaluate(req.model, req.cluster, req.training, p, req.efficiency, tables)
        out.append(to_estimate(ev, req.cluster, req.training, p, rank=j + 1))
    if time.perf_counter() > deadline and search.rebalance_stages:
        status = "FEASIBLE"      # the uneven-stage pass may have been cut short
    return done(out, status, feasible=feasible)


def with_launches(result: PlanResult, req: PlanRequest) -> PlanResult:
    """The result with every plan's ``launch`` object (built at the edge, once per result)."""
    return result.model_copy(update={"plans": [
        with_launch(p, req.model, req.cluster, req.training) for p in result.plans]})


def _rebalance(req, tables, plans, bc, fits, results, capacity, deadline):
    """Try uneven stages on the chosen pipelined plans and on the fastest pipelined plans whose
    even split does not fit; keep a split when it is faster or makes the plan fit."""
    k = req.search.top_k
    bar = sorted(r[0] for r in results)[k - 1] if len(results) >= k else np.inf
    # Plans whose even split overflows by little, with pipeline stages to move layers between.
    near = np.flatnonzero(~fits & (plans.pp > 1) & (plans.vpp == 1)
                          & (bc.step_time_s < bar))
    near = near[np.argsort(np.rint(bc.step_time_s[near] * 1e6), kind="stable")][:k]
    trial = results + [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]), _key(plans, i),
                        int(i), None, 0) for i in near]
    out = []
    for r in trial:
        step_s, mem, tb, i, _, _ = r
        if plans.pp[i] > 1 and plans.vpp[i] == 1 and time.perf_counter() < deadline:
            lay = balance_stages(plans.plan(i), tables, capacity,
                                 max(0.01, deadline - time.perf_counter()))
            if lay is not None:
                alt = compose(plans.take(np.array([i])), tables, lay)
                a_step, a_mem = float(alt.step_time_s[0]), float(alt.memory_bytes[0])
                if a_mem <= capacity and (mem > capacity or a_step < step_s):
                    r = (a_step, a_mem, tb, i, lay, 0)
        if r[1] <= capacity:
            out.append(r)
    return out
