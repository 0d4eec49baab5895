"""``plan``: the k best plans of a request, found with OR-Tools CP-SAT over cost tables.

Data: the structural plan space (``space.py``) and, for every plan in it, the exact step time
and peak memory from the cost model's array composition (``cost/batch.py``), which memoises
each component (a layer's work, a collective) over the divisor lattice.
Reduction (exact for top-k): a lattice point (dp, tp, pp, cp) can contribute at most k plans
to the global top-k, so only its k' best memory-feasible plans enter the model.
Variables: one boolean per remaining candidate, ``plan[dp=..,tp=..,...]``.
Constraints: exactly k' plans are chosen.
Objective: the sum of the chosen plans' scaled costs: the step time in microseconds, ties
broken by memory and then by the plan's degrees, encoded as the candidate's rank in that order
(an order-preserving integer scaling), so the answer is deterministic.
Solve: single worker, fixed seed, the greedy choice as a hint, the request's time limit.
Then, when pipeline stages may be uneven, CP-SAT assigns layers to stages for the chosen
pipelined plans (``stages.py``), including plans whose even split does not fit in memory, and
the list is re-ranked by exact re-costing.
"""

from __future__ import annotations

import time

import numpy as np
from ortools.sat.python import cp_model

from planner.cost.batch import BatchCost, PlanArrays, compose
from planner.cost.step import evaluate, to_estimate
from planner.cost.tables import RECOMPUTE, cost_tables
from planner.launch import build_launch
from planner.search.explain import memory_reasons, structural_reasons
from planner.search.request import PlanRequest
from planner.search.result import PlanResult, SearchStats
from planner.search.space import Space, build_space
from planner.search.stages import balance_stages

REBALANCE_MARGIN = 4
NEAR_FIT = 1.3   # uneven stages are tried on plans whose even split needs up to 30% too much


def _rank(plans: PlanArrays, bc: BatchCost, fits: np.ndarray) -> np.ndarray:
    """Position of each fitting plan in the order (step time in us, memory, degrees); the
    plans that do not fit come after all of them, in the same order by their memory."""
    idx = np.flatnonzero(fits)
    sub = plans.take(idx)
    cost_us = np.rint(np.minimum(bc.step_time_s[idx] * 1e6, 2**62)).astype(np.int64)
    mem = np.rint(np.minimum(bc.memory_bytes[idx], 2**62)).astype(np.int64)
    keys = (sub.sp, sub.zero, sub.rec, sub.mbs, sub.vpp, sub.cp, sub.pp, sub.tp, sub.dp, mem,
            cost_us)
    rank = np.empty(len(plans), dtype=np.int64)
    rank[idx[np.lexsort(keys)]] = np.arange(len(idx))
    rest = np.flatnonzero(~fits)
    rank[rest[np.argsort(bc.memory_bytes[rest], kind="stable")]] = len(idx) + np.arange(len(rest))
    return rank


def _reduce(plans: PlanArrays, rank: np.ndarray, candidates: np.ndarray, keep: int) -> np.ndarray:
    """The ``keep`` best of ``candidates`` within each lattice point (dp, tp, pp, cp)."""
    if not len(candidates):
        return candidates
    sub = plans.take(candidates)
    group = np.zeros(len(candidates), dtype=np.int64)
    for col in (sub.dp, sub.tp, sub.pp, sub.cp):
        group = group * (int(col.max()) + 1) + col
    order = np.lexsort((rank[candidates], group))
    g_sorted = group[order]
    _, starts = np.unique(g_sorted, return_index=True)
    start_of = np.repeat(starts, np.diff(np.append(starts, len(order))))
    pos = np.arange(len(order)) - start_of
    return candidates[order[pos < keep]]


def _label(plans: PlanArrays, i: int) -> str:
    return (f"plan[dp={plans.dp[i]},tp={plans.tp[i]},pp={plans.pp[i]},cp={plans.cp[i]},"
            f"vpp={plans.vpp[i]},mbs={plans.mbs[i]},{RECOMPUTE[plans.rec[i]]},"
            f"zero={plans.zero[i]},sp={plans.sp[i]}]")


def select(plans: PlanArrays, rank: np.ndarray, candidates: np.ndarray, k: int,
           time_limit_s: float) -> tuple[list[int], str]:
    """CP-SAT: choose the k best candidates; returns (indices in rank order, status)."""
    k = min(k, len(candidates))
    model = cp_model.CpModel()
    x = [model.NewBoolVar(_label(plans, int(i))) for i in candidates]
    # Exactly k distinct plans are returned.
    model.Add(sum(x) == k)
    # Lowest total scaled cost = the k fastest plans.
    model.Minimize(sum(int(rank[i]) * xi for i, xi in zip(candidates, x, strict=True)))
    greedy = set(np.argsort(rank[candidates], kind="stable")[:k].tolist())
    for j, xi in enumerate(x):
        model.AddHint(xi, j in greedy)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.001, time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.Solve(model)
    if status == cp_model.OPTIMAL:
        chosen = [int(i) for i, xi in zip(candidates, x, strict=True) if solver.Value(xi)]
        label = "OPTIMAL"
    elif status == cp_model.FEASIBLE:
        chosen = [int(i) for i, xi in zip(candidates, x, strict=True) if solver.Value(xi)]
        label = "FEASIBLE"
    else:   # the time limit struck before CP-SAT reported anything: return the hint
        chosen = [int(candidates[j]) for j in sorted(greedy)]
        label = "FEASIBLE"
    return sorted(chosen, key=lambda i: rank[i]), label


def plan(request: PlanRequest) -> PlanResult:
    """Search the request's plan space; the k best plans, or INFEASIBLE with reasons."""
    t0 = time.perf_counter()
    req = request
    search = req.search
    deadline = t0 + search.time_limit_ms / 1000
    space: Space = build_space(req.model, req.cluster, req.training, search)

    def done(plans_out, status, feasible=0, cands=0, reasons=()):
        return PlanResult(
            id=req.request_id(), plans=plans_out, infeasible_reasons=list(reasons),
            search=SearchStats(status=status, solve_ms=(time.perf_counter() - t0) * 1e3,
                               space_size=space.size, memory_feasible=feasible,
                               lattice_points=space.lattice_points, solver_candidates=cands),
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
    rank = _rank(plans, bc, fits)
    k = search.top_k
    keep = k + REBALANCE_MARGIN if search.rebalance_stages else k
    feasible = np.flatnonzero(fits)
    cands = _reduce(plans, rank, feasible, keep)
    chosen: list[int] = []
    status = "OPTIMAL"
    if len(cands):
        chosen, status = select(plans, rank, cands, keep, deadline - time.perf_counter())

    # Candidates as (step, memory, tie-break rank, plan index, layers or None for even).
    results = [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]), int(rank[i]), i, None)
               for i in chosen]
    if search.rebalance_stages:
        results = _rebalance(req, tables, plans, bc, rank, fits, results, capacity, deadline)
    results = [r for r in results if r[1] <= capacity]
    results.sort(key=lambda r: (round(r[0] * 1e6), round(r[1]), r[2]))
    top = results[:k]
    if not top:
        return done([], "INFEASIBLE", feasible=int(fits.sum()), cands=len(cands),
                    reasons=memory_reasons(req, plans, bc, capacity))
    out = []
    for j, (_, _, _, i, layers) in enumerate(top):
        p = plans.plan(i, layers)
        ev = evaluate(req.model, req.cluster, req.training, p, req.efficiency, tables)
        est = to_estimate(ev, req.cluster, req.training, p, rank=j + 1)
        out.append(est.model_copy(update={"launch": build_launch(est, req.model, req.cluster,
                                                                 req.training)}))
    if time.perf_counter() > deadline:
        status = "FEASIBLE"
    return done(out, status, feasible=int(fits.sum()), cands=len(cands))


def _rebalance(req, tables, plans, bc, rank, fits, results, capacity, deadline):
    """Try uneven stages on the chosen pipelined plans and on the fastest pipelined plans whose
    even split does not fit; keep a split when it is faster or makes the plan fit."""
    k = req.search.top_k
    bar = sorted(r[0] for r in results)[k - 1] if len(results) >= k else np.inf
    # Plans whose even split overflows by little, with pipeline stages to move layers between.
    near = np.flatnonzero(~fits & (plans.pp > 1) & (plans.vpp == 1)
                          & (bc.step_time_s < bar))
    near = near[np.lexsort((rank[near], np.rint(bc.step_time_s[near] * 1e6)))][:k]
    trial = results + [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]), int(rank[i]),
                        int(i), None) for i in near]
    out = []
    for r in trial:
        step_s, mem, tb, i, _ = r
        if plans.pp[i] > 1 and plans.vpp[i] == 1 and time.perf_counter() < deadline:
            lay = balance_stages(plans.plan(i), tables, capacity,
                                 max(0.01, deadline - time.perf_counter()))
            if lay is not None:
                alt = compose(plans.take(np.array([i])), tables, lay)
                a_step, a_mem = float(alt.step_time_s[0]), float(alt.memory_bytes[0])
                if a_mem <= capacity and (mem > capacity or a_step < step_s):
                    r = (a_step, a_mem, tb, i, lay)
        if r[1] <= capacity:
            out.append(r)
    return out
