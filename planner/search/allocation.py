"""``plan`` on a fragmented allocation: the union of its uniform slices, each searched exactly.

A plan on a scheduler's free GPUs puts the same number g of ranks on each node it uses
(``planner.specs.allocation``), so the space is the union over g of the homogeneous spaces of
the nodes with at least g free GPUs. Each slice is searched with the homogeneous engine
(exact: ``solver.plan``); the k best of the union are among the slices' k best, ranked by the
same order (step time in microseconds, memory, degrees), more GPUs per node first on a tie. The
answer is OPTIMAL when every slice's is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from planner.cost.memory import GIB
from planner.cost.step import on_allocation
from planner.result import PlanEstimate
from planner.revision import revision
from planner.search.plan_request import PlanRequest
from planner.search.plan_result import PlanResult, SearchStats
from planner.specs.allocation import uniform_clusters
from planner.specs.plan import plan_key


def _order(p: PlanEstimate) -> tuple:
    return (round(p.step_time_s * 1e6), round(p.memory_per_gpu_gib * GIB), *plan_key(p),
            -(p.placement.nproc_per_node if p.placement else 0))


def plan_on_allocation(req: PlanRequest, plan_slice: Callable[[PlanRequest], PlanResult]
                       ) -> PlanResult:
    t0 = time.perf_counter()
    parts = uniform_clusters(req.cluster)
    found, stats = [], []
    for part in parts:
        res = plan_slice(req.model_copy(update={"cluster": part.cluster}))
        stats.append(res)
        found += [on_allocation(p, req.cluster, part) for p in res.plans]
    found.sort(key=_order)
    top = [p.model_copy(update={"rank": j + 1}) for j, p in enumerate(found[:req.search.top_k])]
    statuses = {r.search.status for r in stats}
    status = ("INFEASIBLE" if not top else
              "FEASIBLE" if "FEASIBLE" in statuses else "OPTIMAL")
    reasons: list[str] = []
    if not top:
        counts = [len(n.gpus) for n in req.cluster.free_nodes or ()]
        reasons = [f"no plan fits the allocation (free GPUs per node {counts}; a plan uses the "
                   "same number on every node it uses). With every node's largest even share: "
                   + r for r in stats[0].infeasible_reasons]
    return PlanResult(
        id=req.request_id(), plans=top, infeasible_reasons=reasons,
        search=SearchStats(
            status=status, solve_ms=(time.perf_counter() - t0) * 1e3, revision=revision(),
            space_size=sum(r.search.space_size for r in stats),
            memory_feasible=sum(r.search.memory_feasible for r in stats),
            lattice_points=sum(r.search.lattice_points for r in stats),
            solver_candidates=sum(r.search.solver_candidates for r in stats)))
