"""``plan``: the k best plans of a request.

The exact engine for the homogeneous degrees is vectorised enumeration: the structural plan
space (``space.py``) is costed whole by the step model's array composition (``cost/batch.py``),
which memoises each component (a layer's work, a collective) over the divisor lattice; the
plans that fit are ranked by (step time in microseconds, memory, degrees), so the answer is
deterministic, and the first k are the optimum over the space. No solver is needed for that
choice.

Uneven stages (``search.rebalance_stages``, default on) add, for every pipelined plan without
interleaving or block recompute, every split of its layers that Megatron-LM's first/last-stage
flags express (``layout.first_last_splits``) and every split that leaves the last stage the LM
head and the loss alone (``layout.head_alone_splits``, its layout string's '...|L'); with
``search.rebalance_interleaved`` (off by default: slower, and rarely better) interleaved plans
too, each rank's layers spread evenly over its chunks (``layout.interleaved_splits``; Megatron-LM's
``--pipeline-model-parallel-layout``). They are searched exactly by branch and bound:
the composition gives each such plan a lower bound on the step time of *any* split
(``BatchCost.split_bound``) and a memory test no fitting split can fail; plans are taken in
the order of their bound, all their splits costed exactly at once, and the search stops when
the next bound exceeds the k-th best time found. OPTIMAL is then proven over the whole space,
uneven splits included; FEASIBLE when the time limit cut the pass short.
"""

from __future__ import annotations

import time
from functools import lru_cache

import numpy as np

from planner.cost.batch import BatchCost, PlanArrays, compose
from planner.cost.memory import in_flight_microbatches
from planner.cost.step import evaluate, to_estimate
from planner.cost.tables import cost_tables
from planner.launch import with_launch
from planner.revision import revision
from planner.search.explain import memory_reasons, structural_reasons
from planner.search.frontier import space_sample
from planner.search.offload import cpu_offload
from planner.search.partial import block_recompute
from planner.search.plan_request import PlanRequest
from planner.search.plan_result import PlanResult, SearchStats, SpacePoint
from planner.search.space import Space, build_space
from planner.specs.layout import search_splits

SPLIT_BATCH_ROWS = 60_000   # (plan, split) rows costed per round of the uneven-split pass


# A candidate plan: (step time, memory, degrees, plan index, layers per stage or None for
# the default layout, the changes to the plan: block recompute or CPU offloading, or none).
Candidate = tuple[float, float, tuple, int, tuple[int, ...] | None, dict]


def _key(plans: PlanArrays, i: int, block: int = 0, off: int = 0) -> tuple:
    """The degrees of plan i (under block recompute of ``block`` layers when > 0, with the
    activations of ``off`` layers offloaded), the last tie-break of the ranking (as the brute
    force's)."""
    return (int(plans.dp[i]), int(plans.tp[i]), int(plans.pp[i]), int(plans.cp[i]),
            int(plans.vpp[i]), int(plans.mbs[i]), 2 if block else int(plans.rec[i]),
            int(plans.zero[i]), int(plans.sp[i]), block, int(plans.ep[i]), int(plans.etp[i]),
            off or int(plans.off[i]), int(plans.rep[i]))


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
    order = np.lexsort((sub.rep, sub.etp, sub.ep, sub.sp, sub.zero, sub.rec, sub.mbs, sub.vpp, sub.cp,
                        sub.pp, sub.tp, sub.dp, mem, cost_us))
    return idx[order[:keep]]


def plan(request: PlanRequest) -> PlanResult:
    """Search the request's plan space; the k best plans, or INFEASIBLE with reasons. On a
    fragmented allocation, every uniform slice of it (``search.allocation``)."""
    if request.cluster.free_nodes is not None:
        from planner.search.allocation import plan_on_allocation

        return plan_on_allocation(request, plan)
    if request.cluster.pools is not None:
        from planner.search.pools import plan_on_pools

        return plan_on_pools(request, plan)
    t0 = time.perf_counter()
    req = request
    search = req.search
    deadline = t0 + search.time_limit_ms / 1000
    space: Space = build_space(req.model, req.cluster, req.training, search)

    sample: list[SpacePoint] = []

    def done(plans_out, status, feasible=0, reasons=()):
        return PlanResult(
            id=req.request_id(), plans=plans_out, infeasible_reasons=list(reasons),
            space_sample=sample,
            search=SearchStats(status=status, solve_ms=(time.perf_counter() - t0) * 1e3,
                               revision=revision(), space_size=space.size,
                               memory_feasible=feasible,
                               lattice_points=space.lattice_points,
                               solver_candidates=feasible),
        )

    if space.size == 0:
        return done([], "INFEASIBLE",
                    reasons=structural_reasons(req.model, req.cluster, req.training, search,
                                               space.lattice_points, space.unfiltered,
                                               space.refusals))
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    plans = space.plans
    capacity = req.cluster.gpu.memory_bytes * (1 - search.memory_headroom)
    # Every plan of the space is costed exactly with its default layout, and the plans whose
    # layers could move between stages get a bound for any split.
    bc = compose(plans, tables, memory_cap=capacity, any_split=search.rebalance_stages,
                 split_interleaved=search.rebalance_interleaved)
    fits = bc.memory_bytes <= capacity
    sample = _space_sample(bc, fits, search.space_sample) if search.space_sample else []
    k = search.top_k
    chosen = [int(i) for i in _best(plans, bc, fits, k)]
    feasible = int(fits.sum())
    status = "OPTIMAL"

    # Candidates as (step, memory, degrees, plan index, layers or None for the default
    # layout, the plan's changes: block recompute or CPU offloading, or none).
    results: list[Candidate] = [(float(bc.step_time_s[i]), float(bc.memory_bytes[i]),
                                 _key(plans, i), i, None, {}) for i in chosen]
    if search.rebalance_stages:
        results, complete = _uneven_splits(tables, plans, bc, results, k, capacity, deadline,
                                           search.rebalance_interleaved)
        if not complete:
            status = "FEASIBLE"      # the time limit cut the uneven-split pass short
    if (search.partial_recompute and search.allows_recompute("full")
            and search.allows_recompute("none")
            and search.megatron_allowed):
        times = sorted(r[0] for r in results)
        bar = times[k - 1] if len(times) >= k else np.inf
        results += [(t, mem, _key(plans, i, n), i, None,
                     {"recompute": "full", "recompute_num_layers": n})
                    for t, mem, i, n in block_recompute(plans, tables, bc, fits, capacity, bar,
                                                       search.any_framework)]
    if search.cpu_offload and search.allows_recompute("none") and search.megatron_allowed:
        times = sorted(r[0] for r in results)
        bar = times[k - 1] if len(times) >= k else np.inf
        results += [(t, mem, _key(plans, i, off=n), i, None, {"cpu_offload_layers": n})
                    for t, mem, i, n in cpu_offload(plans, tables, bc, fits, capacity, bar,
                                                    search.any_framework)]
    results.sort(key=lambda r: (round(r[0] * 1e6), round(r[1]), r[2]))
    top = results[:k]
    if not top:
        return done([], "INFEASIBLE", feasible=feasible,
                    reasons=memory_reasons(req, plans, bc, capacity))
    out = []
    for j, (_, _, _, i, layers, change) in enumerate(top):
        p = plans.plan(i, layers)
        if change:
            p = p.model_copy(update=change)
        ev = evaluate(req.model, req.cluster, req.training, p, req.efficiency, tables)
        out.append(to_estimate(ev, req.model, req.cluster, req.training, p, rank=j + 1,
                               efficiency=req.efficiency))
    return done(out, status, feasible=feasible)


def _space_sample(bc, fits: np.ndarray, n: int) -> list[SpacePoint]:
    idx, front = space_sample(bc.step_time_s, bc.memory_bytes, fits, n)
    return [SpacePoint(step_time_s=float(bc.step_time_s[i]),
                       memory_gib=float(bc.memory_bytes[i]) / 2**30, fits=bool(fits[i]),
                       frontier=bool(f)) for i, f in zip(idx, front, strict=True)]


def answer(req: PlanRequest) -> PlanResult:
    """What ``planner plan`` and ``POST /v1/plans`` return: the search's result with its
    settings hints (``hints.settings_hints``) and every plan's launch object."""
    from planner.search.hints import settings_hints

    result = plan(req)
    hints = settings_hints(req, result, plan)
    if hints:
        result = result.model_copy(update={"settings_hints": hints})
    return with_launches(result, req)


def with_launches(result: PlanResult, req: PlanRequest) -> PlanResult:
    """The result with every plan's ``launch`` object (built at the edge, once per result)."""
    return result.model_copy(update={"plans": [
        with_launch(p, req.model, req.cluster, req.training, req.efficiency)
        for p in result.plans]})


def _order(r) -> tuple:
    """The ranking: step time in microseconds, memory, degrees (and, within one plan, its
    layers per stage)."""
    return (round(r[0] * 1e6), round(r[1]), r[2], r[4] or ())


@lru_cache(maxsize=4096)
def _split_rows(num_layers: int, pp: int, vpp: int) -> np.ndarray:
    """``search_splits`` as an array (splits, pp), made once per shape."""
    splits = search_splits(num_layers, pp, vpp)
    return np.array(splits, dtype=float).reshape(len(splits), pp)


@lru_cache(maxsize=4096)
def _in_flight(pp: int, vpp: float, m: int, group: float) -> np.ndarray:
    return np.asarray(in_flight_microbatches(pp, vpp, np.arange(pp), m, group), dtype=float)


def _promising(n: np.ndarray, terms: dict, i: int, m: int, bar_us: float, capacity: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """The splits (rows of ``n``) of plan i that may fit and beat ``bar_us``, in the order of
    their bound, and the bounds (us): every stage's memory is linear in its layers (exact,
    ``BatchCost.split_terms``) and its time too, but for ZeRO-2's per-micro-batch reduction,
    so (m - 1/v) t_max + all stages' time / v + send/recv bounds the step from below (v = 1
    without interleaving)."""
    if not len(n):
        return n, np.zeros(0)
    p = n.shape[1]
    v = float(terms["vpp"][i])
    fixed_t = np.full(p, terms["time_mid"][i])
    fixed_t[0], fixed_t[-1] = terms["time_first"][i], terms["time_last"][i]
    t_max = (n * terms["layer"][i] + fixed_t).max(axis=1)
    us = np.rint(((m - 1 / v) * t_max + terms["total"][i] / v + terms["extra"][i]) * 1e6)
    keep = us <= bar_us
    n, us = n[keep], us[keep]
    if not len(n):
        return n, us
    fixed_m = np.full(p, terms["mem_mid"][i])
    fixed_m[0], fixed_m[-1] = terms["mem_first"][i], terms["mem_last"][i]
    per_layer = terms["state"][i] + terms["act"][i] * _in_flight(p, v, m,
                                                                  float(terms["group"][i]))
    fits = (n * per_layer + fixed_m).max(axis=1) <= capacity * (1 + 1e-9)
    n, us = n[fits], us[fits]
    order = np.argsort(us, kind="stable")
    return n[order], us[order]


def _uneven_splits(tables, plans: PlanArrays, bc: BatchCost, results: list, k: int,
                   capacity: float, deadline: float, interleaved: bool = False
                   ) -> tuple[list, bool]:
    """Branch and bound over the first/last splits of the splittable plans (module
    docstring): each plan's best fitting split replaces its default layout when it ranks
    better. Returns the candidates and whether the pass completed."""
    best: dict[int, tuple] = {r[3]: r for r in results}
    L = tables.model.num_layers

    def bar_us() -> float:
        times = sorted(_order(r)[0] for r in best.values())
        return times[k - 1] if len(times) >= k else np.inf

    bound, terms = bc.split_bound, bc.split_terms
    if terms is None:                    # no plan of the space can split its layers
        return list(best.values()), True
    m_of = tables.training.global_batch_size // (plans.dp * plans.mbs)
    cand = np.flatnonzero(np.isfinite(bound) & (plans.pp > 1) & (plans.rnl == 0)
                          & ((plans.vpp == 1) | interleaved))
    cand = cand[np.argsort(np.rint(bound[cand] * 1e6), kind="stable")]
    # Each plan's default layout's step, us (inf when it does not fit): an exact step of it.
    default = np.rint(np.minimum(bc.step_time_s * 1e6, 2**62))
    pos = 0

    def cost(owner: list[int], rows: list[np.ndarray]) -> dict[int, int]:
        """Cost the splits exactly in one batch, keep each plan's best; each plan's best
        step among them, us."""
        width = max(int(plans.pp[i]) for i in owner)
        stages = np.zeros((len(rows), width), dtype=np.int64)
        for at, sp in enumerate(rows):
            stages[at, :len(sp)] = sp
        own = np.array(owner)
        sub = compose(plans.take(own), tables, memory_cap=capacity, stages=stages)
        ok = np.flatnonzero(sub.memory_bytes <= capacity)
        if not len(ok):
            return {}
        us = np.rint(np.minimum(sub.step_time_s[ok] * 1e6, 2**62)).astype(np.int64)
        mem = np.rint(np.minimum(sub.memory_bytes[ok], 2**62)).astype(np.int64)
        # Each plan's best split in the ranking's order (time us, memory, layers).
        order = np.lexsort((*stages[ok].T[::-1], mem, us, own[ok]))
        head = order[np.r_[True, own[ok][order][1:] != own[ok][order][:-1]]]
        got: dict[int, int] = {}
        for j in head:
            row = int(ok[j])
            i = owner[row]
            layers = tuple(int(x) for x in stages[row, :int(plans.pp[i])])
            r: Candidate = (float(sub.step_time_s[row]), float(sub.memory_bytes[row]),
                            _key(plans, i), i, layers, {})
            got[i] = int(us[j])
            if i not in best or _order(r) < _order(best[i]):
                best[i] = r
        return got

    while pos < len(cand):
        if time.perf_counter() > deadline:
            return list(best.values()), False
        bar = bar_us()
        batch, rows = [], 0
        while pos < len(cand) and rows < SPLIT_BATCH_ROWS:
            i = int(cand[pos])
            if np.rint(bound[i] * 1e6) > bar:
                pos = len(cand)          # every later plan is bounded above the k-th best
                break
            pos += 1
            some, us = _promising(_split_rows(L, int(plans.pp[i]), int(plans.vpp[i])),
                                  terms, i, int(m_of[i]), bar, capacity)
            if len(some):
                batch.append((i, some, us))
                rows += len(some)
        if not batch:
            continue
        # A split's step is at least its bound, so a plan's splits bounded above an exact step
        # E of that plan cannot beat it (ties kept): E is its default layout's step when that
        # fits, else the step of its split of smallest bound, costed first.
        unknown = [(i, some) for i, some, _ in batch if not np.isfinite(bc.step_time_s[i])]
        first = cost([i for i, _ in unknown], [some[0] for _, some in unknown]) if unknown else {}
        bar = bar_us()
        owner, rest = [], []
        for i, some, us in batch:
            if not np.isfinite(bc.step_time_s[i]):
                top, some, us = min(first.get(i, 2**62), bar), some[1:], us[1:]
            else:
                top = min(default[i], bar)
            for sp in some[us <= top]:
                owner.append(i)
                rest.append(sp)
        if rest:
            cost(owner, rest)
    return list(best.values()), True
