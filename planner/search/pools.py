"""``plan`` on a cluster of pools (``cluster.pools``): GPUs of different types.

The answer is the best of two kinds of plans:
- every pool alone, searched exactly with the homogeneous engine (``solver.plan``), so a plan
  over pools is never slower than the best plan on any single pool;
- pipelines over two or more pools (``cost.mixed``): one (dp, tp, cp, micro-batch, recompute,
  ZeRO 0/1) for every stage, as the frameworks launch it, each pool used whole (its GPUs
  divide into stages of dp * tp * cp ranks), the pools in every order along the pipeline, and
  for each the layers per stage that minimise the pipeline's time under every stage's memory,
  found exactly (``mixed.best_layers``). The stages of a pool are contiguous (one boundary per
  pair of neighbouring pools crosses between them). The pools used together must have the
  same GPUs per node (torchrun starts the same number of processes on every node).

Each mixed candidate is first priced by its pipeline (a lower bound: the data-parallel and
optimizer tails come after), in that order, and costed in full until the next bound exceeds
the k-th best step found. The layer counts are optimal for the pipeline term; the tails (each
pool's gradient reduction and optimizer on its largest stage) are added to them, so a plan over
pools that wins is reported FEASIBLE with ``gap_pct``: how far below it the pipeline bound of
the whole space lies. Sailor (Strati et al., 2025) and Metis (Um et al., ATC'24) search the
same kind of space (device types to stages, layers balanced by speed and memory) with
heuristic pruning; here the per-stage model is linear, which makes the layer split exact.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import numpy as np

from planner.cost.batch import PlanArrays
from planner.cost.caveats import gpu_family
from planner.cost.memory import GIB
from planner.cost.mixed import MixedCost, best_layers, mixed_cost, stage_terms
from planner.cost.step import evaluate, to_estimate
from planner.cost.tables import cost_tables
from planner.errors import PlannerInputError
from planner.result import MemoryBreakdown, NodePlacement, Placement, PlanEstimate, StagePool
from planner.revision import revision
from planner.search.plan_request import PlanRequest
from planner.search.plan_result import PlanResult, SearchStats
from planner.search.space import build_space
from planner.specs import ClusterSpec
from planner.specs.plan import plan_key


def _order(p: PlanEstimate) -> tuple:
    return (round(p.step_time_s * 1e6), round(p.memory_per_gpu_gib * GIB), *plan_key(p))


def _node_offsets(cluster: ClusterSpec) -> list[int]:
    pools = cluster.pools or ()
    return [sum(p.num_nodes for p in pools[:j]) for j in range(len(pools))]


def pool_of(est: PlanEstimate, cluster: ClusterSpec) -> ClusterSpec:
    """The cluster a plan of ``cluster`` runs on: the cluster itself, or the one pool every
    stage of the plan is on; PlannerInputError for a pipeline over several pools (what needs
    one GPU type, a predicted trace or a probe, cannot take it)."""
    if cluster.pools is None:
        return cluster
    used = {s.pool for s in est.stages or ()}
    if len(used) != 1:
        raise PlannerInputError(
            "cluster.pools", "this plan's stages run on different GPUs (a pipeline over "
            "pools): its predicted trace is not drawn; each stage's time per micro-batch is in "
            "its stages")
    return cluster.pools[used.pop()]


def on_pool(est: PlanEstimate, cluster: ClusterSpec, j: int) -> PlanEstimate:
    """A plan found on pool j alone, with its stages and the cluster's node indices."""
    pool = (cluster.pools or ())[j]
    off = _node_offsets(cluster)[j]
    lay = est.placement
    nodes = [NodePlacement(index=off + k, local_gpus=list(range(lay.nproc_per_node)))
             for k in range(lay.nnodes)] if lay else None
    return est.model_copy(update={
        "stages": [StagePool(stage=i, pool=j, gpu=pool.gpu.name, layers=n)
                   for i, n in enumerate(est.layers_per_stage)],
        "placement": lay.model_copy(update={"nodes": nodes}) if lay else None})


def plan_on_pools(req: PlanRequest, plan_one: Callable[[PlanRequest], PlanResult]
                  ) -> PlanResult:
    t0 = time.perf_counter()
    cluster = req.cluster
    pools = cluster.pools or ()
    k = req.search.top_k
    found: list[PlanEstimate] = []
    stats = []
    deadline = t0 + req.search.time_limit_ms / 1000     # one limit for every search here
    for j, pool in enumerate(pools):
        left_ms = max(1, round((deadline - time.perf_counter()) * 1000))
        res = plan_one(req.model_copy(update={
            "cluster": pool,
            "search": req.search.model_copy(update={"time_limit_ms": left_ms})}))
        stats.append(res)
        found += [on_pool(p, cluster, j) for p in res.plans]
    found.sort(key=_order)
    bound = np.inf
    space = 0
    skipped: list[str] = []
    complete = True
    if len(pools) > 1 and req.search.megatron_allowed:
        mixed, bound, space, complete = _mixed_plans(req, found, deadline, skipped)
        found = sorted(found + mixed, key=_order)
    top = [p.model_copy(update={"rank": i + 1}) for i, p in enumerate(found[:k])]
    statuses = {r.search.status for r in stats}
    status, gap = "OPTIMAL", None
    if not top:
        status = "INFEASIBLE"
    elif "FEASIBLE" in statuses or not complete:
        status = "FEASIBLE"         # a time limit cut a search short
    best = top[0].step_time_s if top else np.inf
    if top and bound < best * (1 - 1e-9):
        status, gap = "FEASIBLE", 100 * (best - bound) / best
    reasons = []
    if not top:
        reasons = [f"no plan fits any pool alone or a pipeline over pools; pool {j} "
                   f"({p.gpu.name}): " + "; ".join(r.infeasible_reasons[:2])
                   for j, (p, r) in enumerate(zip(pools, stats, strict=True))] + skipped
    return PlanResult(
        id=req.request_id(), plans=top, infeasible_reasons=reasons,
        search=SearchStats(
            status=status, solve_ms=(time.perf_counter() - t0) * 1e3, revision=revision(),
            space_size=sum(r.search.space_size for r in stats) + space,
            memory_feasible=sum(r.search.memory_feasible for r in stats),
            lattice_points=sum(r.search.lattice_points for r in stats),
            solver_candidates=sum(r.search.solver_candidates for r in stats) + space,
            gap_pct=gap))


def _candidates(req: PlanRequest, used: tuple[int, ...]) -> PlanArrays | None:
    """The uniform plans whose stages fill each pool of ``used`` whole, at least one stage
    per pool, without interleaving, ZeRO-2/3, hybrid sharding, block recompute or expert
    parallelism."""
    pools = req.cluster.pools or ()
    gpus = [pools[j].num_gpus for j in used]
    virtual = pools[used[0]].model_copy(update={
        "num_nodes": sum(pools[j].num_nodes for j in used)})
    search = req.search.model_copy(update={"allow_idle_gpus": False})
    try:
        plans = build_space(req.model, virtual, req.training, search).plans
    except PlannerInputError:
        return None
    inner = plans.dp * plans.tp * plans.cp
    keep = ((plans.vpp == 1) & (plans.zero <= 1) & (plans.rnl == 0) & (plans.ep == 1)
            & (plans.etp == 1) & (plans.rep == 1))
    for g in gpus:
        keep &= (g % inner == 0)
    keep &= plans.pp >= len(used)
    idx = np.flatnonzero(keep)
    return plans.take(idx) if len(idx) else None


def _mixed_plans(req: PlanRequest, found: list[PlanEstimate], deadline: float,
                 notes: list[str]) -> tuple[list[PlanEstimate], float, int, bool]:
    """(the mixed plans that may enter the top k, a lower bound on the step of every mixed
    plan left out, how many (plan, order of pools) were priced, whether the search completed).

    Every (uniform plan, order of the pools) gets a cheap lower bound: its stages' times
    together are at least their fixed times plus every layer at the fastest stage's rate, and
    the slowest stage at least their mean. They are taken in the order of that bound; each gets
    its exact best layer split (``best_layers``: the pipeline's time, a bound on the step) and,
    when that may enter the top k, its full cost; the pass stops when the next bound exceeds
    the k-th best step found."""
    pools = req.cluster.pools or ()
    L = req.model.num_layers
    k = req.search.top_k
    tables = [cost_tables(req.model, p, req.training, req.efficiency, req.calibration)
              for p in pools]
    caps = np.array([p.gpu.memory_bytes * (1 - req.search.memory_headroom) for p in pools])
    items: list[tuple[float, int, int, tuple[int, ...], PlanArrays, dict]] = []
    for size in range(2, len(pools) + 1):
        for used in itertools.combinations(range(len(pools)), size):
            if len({pools[j].gpus_per_node for j in used}) > 1:
                notes.append(f"pools {list(used)} have different GPUs per node: no pipeline "
                             "over them together (torchrun starts the same number of "
                             "processes on every node)")
                continue
            cands = _candidates(req, used)
            if cands is None:
                continue
            terms = [stage_terms(cands, tables[j]) for j in used]
            stack = {f: np.stack([getattr(t, f) for t in terms])
                     for f in ("layer", "fixed", "mem_layer", "mem_fixed")}
            inner = cands.dp * cands.tp * cands.cp
            m = req.training.global_batch_size // (cands.dp * cands.mbs)
            hop = np.array([max(tables[j].p2p_time(int(t), int(c), int(b), True, bool(s))
                                for j in used)
                            for t, c, b, s in zip(cands.tp, cands.cp, cands.mbs, cands.sp,
                                                  strict=True)])
            width = stack["layer"].shape[2]
            col = np.arange(width)
            rows = np.arange(len(cands))[:, None]
            for order in itertools.permutations(range(size)):
                # Stage c of plan i is on pool used[order[q]] for the q its column falls in.
                ends = np.cumsum(np.stack([pools[used[q]].num_gpus // inner for q in order],
                                          axis=1), axis=1)
                slot = (col[None, None, :] >= ends[:, :, None]).sum(axis=1)
                on = slot < size
                pos = np.array(order)[np.minimum(slot, size - 1)]
                layer = np.where(on, stack["layer"][pos, rows, col], np.inf)
                fixed = np.where(on, stack["fixed"][pos, rows, col], 0.0)
                with np.errstate(invalid="ignore"):      # past a plan's stages: inf - inf
                    room = np.where(on, np.floor(
                        (caps[np.array(used)][pos] - stack["mem_fixed"][pos, rows, col])
                        / np.maximum(stack["mem_layer"][pos, rows, col], 1.0)), np.inf)
                P = on.sum(axis=1)
                S = fixed.sum(axis=1) + L * layer.min(axis=1)
                lb = (m - 1) * S / P + S + 2 * (m + P - 1) * hop
                fits = ((room >= 1).all(axis=1)
                        & (np.where(on, np.minimum(room, L), 0).sum(axis=1) >= L) & (P <= L))
                for i in np.flatnonzero(fits):
                    n = int(P[i])
                    items.append((float(lb[i]), len(items), int(m[i]),
                                  tuple(used[q] for q in pos[i, :n].tolist()),
                                  cands.take(np.array([i])),
                                  {"layer": layer[i, :n], "fixed": fixed[i, :n],
                                   "room": room[i, :n], "hop": float(hop[i])}))
    items.sort(key=lambda r: (r[0], r[1]))
    out: list[PlanEstimate] = []
    times = sorted(p.step_time_s for p in found)
    lowest = np.inf
    priced = 0
    for lb, _, m_i, sp, row, t in items:
        bar = times[k - 1] if len(times) >= k else np.inf
        if lb > bar:
            return out, min(lowest, lb), priced, True
        if time.perf_counter() > deadline:
            return out, min(lowest, lb), priced, False
        priced += 1
        got = best_layers(t["layer"], t["fixed"], t["room"], L, m_i)
        if got is None:
            continue
        value, layers = got
        bound = value + 2 * (m_i + len(sp) - 1) * t["hop"]
        lowest = min(lowest, bound)
        if bound > bar:
            continue
        mc = mixed_cost(row, tables, np.array(sp), layers)
        if (mc.stage_memory > caps[np.array(sp)]).any():
            continue
        est = _estimate(req, row, sp, layers, mc, tables)
        out.append(est)
        times = sorted(times + [est.step_time_s])
    return out, lowest, priced, True


def _estimate(req: PlanRequest, row: PlanArrays, sp: tuple[int, ...], layers: np.ndarray,
              mc: MixedCost, tables) -> PlanEstimate:
    """The public estimate of a pipeline over pools: the bottleneck pool's collectives and
    frameworks, the mixed step and breakdown, the fullest stage's memory."""
    pools = req.cluster.pools or ()
    plan = row.plan(0, tuple(int(x) for x in layers))
    b = mc.bottleneck_pool
    ev = evaluate(req.model, pools[b], req.training, plan, req.efficiency, tables[b])
    ev.step_time_s, ev.breakdown = mc.step_time_s, dict(mc.breakdown)
    est = to_estimate(ev, req.model, pools[b], req.training, plan, efficiency=req.efficiency,
                      mixed_gpus=len({gpu_family(pools[j]) for j in sp}) > 1)
    caps = np.array([pools[j].gpu.memory_bytes for j in sp])
    w = int(np.argmax(mc.stage_memory / caps))
    parts = mc.memory_parts[sp[w]]
    total = float(mc.stage_memory[w]) / GIB
    peak = sum(pools[j].gpu.peak_flops(req.training.precision) * est.gpus_used / len(sp)
               for j in sp)
    gpn = pools[sp[0]].gpus_per_node
    offsets = _node_offsets(req.cluster)
    nodes: list[NodePlacement] = []
    for j in dict.fromkeys(sp):
        nodes += [NodePlacement(index=offsets[j] + n, local_gpus=list(range(gpn)))
                  for n in range(pools[j].num_nodes)]
    return est.model_copy(update={
        "mfu": est.tflops_per_gpu * 1e12 * est.gpus_used / peak,
        "memory_per_gpu_gib": total, "memory_capacity_gib": pools[sp[w]].gpu.memory_gib,
        "fits_in_memory": bool((mc.stage_memory <= caps).all()),
        "memory": MemoryBreakdown(stage=w, total_gib=total,
                                  **{f"{k}_gib": v / GIB for k, v in parts.items()}),
        "placement": Placement(nnodes=len(nodes), nproc_per_node=gpn, nodes=nodes),
        "stages": [StagePool(stage=i, pool=j, gpu=pools[j].gpu.name, layers=int(n),
                             time_per_microbatch_s=float(t), memory_gib=float(mm) / GIB)
                   for i, (j, n, t, mm) in enumerate(zip(sp, layers, mc.stage_time_s,
                                                          mc.stage_memory, strict=True))]})
