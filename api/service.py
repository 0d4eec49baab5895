"""What the routes do, apart from HTTP: resolve references, plan, estimate, store."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy.engine import Engine

from api import store
from api.problems import ApiProblem, not_found
from api.schemas import ClusterRef
from planner.cost import estimate
from planner.cost.tables import cost_tables
from planner.request import EstimateRequest
from planner.result import PlanEstimate
from planner.search import PlanRequest, PlanResult, plan
from planner.specs import ClusterSpec


def resolve_cluster(cluster: Any, *, engine: Engine) -> ClusterSpec:
    if isinstance(cluster, ClusterRef):
        row = store.get_cluster(engine=engine, cluster_id=cluster.id)
        if row is None:
            raise ApiProblem(422, "Invalid request", f"cluster.id: no stored cluster with id "
                             f"{cluster.id!r}", type_="/problems/invalid-request",
                             errors=[{"pointer": "#/cluster/id", "field": "cluster.id",
                                      "detail": "unknown cluster id"}])
        return ClusterSpec.model_validate(row["spec"])
    return cluster


def to_plan_request(body: Any, *, engine: Engine, max_time_limit_ms: int) -> PlanRequest:
    cluster = resolve_cluster(body.cluster, engine=engine)
    search = body.search
    if search.time_limit_ms > max_time_limit_ms:
        search = search.model_copy(update={"time_limit_ms": max_time_limit_ms})
    return PlanRequest(model=body.model, cluster=cluster, training=body.training, search=search,
                       efficiency=body.efficiency)


def run_plan(req: PlanRequest, *, engine: Engine, metrics=None) -> tuple[dict, bool]:
    """Plan (or find the identical request's stored answer); (result JSON, newly created)."""
    existing = store.get_plan(engine=engine, plan_id=req.request_id())
    if existing is not None:
        return existing["result"], False
    result: PlanResult = plan(req)
    if metrics is not None:
        metrics.solve.labels(result.search.status).observe(result.search.solve_ms / 1e3)
    body = result.model_dump(mode="json")
    row, created = store.save_plan(
        engine=engine, plan_id=result.id, model_name=req.model.name,
        cluster_name=req.cluster.name, status=result.search.status,
        request=req.model_dump(mode="json"), result=body)
    return row["result"], created


def run_estimate(body: Any, *, engine: Engine) -> PlanEstimate:
    cluster = resolve_cluster(body.cluster, engine=engine)
    req = EstimateRequest(model=body.model, cluster=cluster, training=body.training,
                          plan=body.plan, efficiency=body.efficiency)
    return _estimate(req)


@lru_cache(maxsize=4096)
def _estimate(req: EstimateRequest) -> PlanEstimate:
    """Estimates are pure functions of the (immutable) request: schedulers asking again for a
    configuration they asked about before get the answer without recomputing it."""
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    return estimate(req.model, req.cluster, req.training, req.plan, req.efficiency,
                    tables=tables)


def plan_summary(row: dict) -> dict:
    result = row["result"]
    best = result["plans"][0] if result.get("plans") else None
    return {
        "id": row["id"], "created_at": row["created_at"], "model": row["model_name"],
        "cluster": row["cluster_name"], "status": row["status"],
        "best": None if best is None else {k: best[k] for k in
                                           ("dp", "tp", "pp", "cp", "step_time_s", "mfu")},
    }


def get_plan_or_404(plan_id: str, *, engine: Engine) -> dict:
    row = store.get_plan(engine=engine, plan_id=plan_id)
    if row is None:
        raise not_found("plan", plan_id)
    return row
