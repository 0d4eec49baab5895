"""Liveness, readiness and metrics (no auth, outside /v1)."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import store
from api.problems import problem
from planner.revision import revision

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", operation_id="health-live")
async def healthz() -> dict:
    """The process answers. Touches no dependency. ``revision``: the planner's (a digest of
    its rules, ``planner.revision``), the one its answers carry in ``search.revision``; replicas
    that report different ones run different rules."""
    return {"status": "ok", "revision": revision()}


@router.get("/readyz", summary="Readiness", operation_id="health-ready",
            responses={503: {"description": "Database unreachable."}})
def readyz(request: Request):
    """The database answers and the schema is in place."""
    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:   # any driver error means not ready
        return problem(503, "Service Unavailable", f"database unreachable: {type(exc).__name__}",
                       instance="/readyz")
    return {"status": "ready"}


@router.get("/metrics", summary="Prometheus metrics", operation_id="health-metrics",
            response_class=Response)
def metrics(request: Request) -> Response:
    """Request counts and latencies by route, solver time histogram, jobs by state."""
    m = request.app.state.metrics
    counts = store.job_counts(engine=request.app.state.engine)
    for state in ("queued", "running", "succeeded", "failed", "cancelled"):
        m.jobs.labels(state).set(counts.get(state, 0))
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
