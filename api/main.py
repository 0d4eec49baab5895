"""The FastAPI application: settings, database, middleware, routers."""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from sqlalchemy.engine import Engine

from api import problems
from api.db import make_engine, migrate
from api.job_queue import QueueJobs
from api.jobs import JobRunner, QueuedForWorkers
from api.metrics import BodyLimitMiddleware, Metrics, MetricsMiddleware
from api.routes import (
    calibrations,
    clusters,
    explorer,
    frameworks,
    health,
    jobs,
    plans,
    presets,
    validations,
)
from api.settings import Settings
from planner import __version__

DESCRIPTION = """Picks data, tensor, pipeline and context parallel degrees, micro-batch size,
gradient accumulation, interleaving, recompute and ZeRO stage for training a model on a
cluster, with predicted step time, memory and a breakdown of where the time goes.

Errors are `application/problem+json` (RFC 9457). Writes need `Authorization: Bearer <token>`
when the service runs with `PLANNER_API_TOKEN`."""


def job_engine(engine: Engine, settings: Settings, metrics: Metrics, run_jobs: bool):
    """Procrastinate workers on PostgreSQL (``api.job_queue``); on SQLite, threads of the
    service process (``api.jobs``), or nothing for a process that only queues."""
    if engine.dialect.name == "postgresql":
        return QueueJobs(engine, settings, metrics, run_jobs=run_jobs)
    return JobRunner(engine, settings, metrics) if run_jobs else QueuedForWorkers()


def _lifespan(settings: Settings, run_jobs: bool):
    """Database, migrations and the job runner of one process (an API replica or a worker)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine = make_engine(settings.database_url)
        migrate(engine)
        app.state.engine = engine
        app.state.solve_limiter = anyio.CapacityLimiter(settings.max_concurrent_solves)
        app.state.jobs = job_engine(engine, settings, app.state.metrics, run_jobs)
        await app.state.jobs.start()
        try:
            yield
        finally:
            await app.state.jobs.stop()
            engine.dispose()

    return lifespan


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(title="Parallelism planner", version=__version__, description=DESCRIPTION,
                  lifespan=_lifespan(settings, settings.run_jobs), docs_url=None,
                  redoc_url=None)
    app.state.settings = settings
    app.state.metrics = Metrics()
    problems.install(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    for module in (health, plans, clusters, calibrations, validations, presets, frameworks,
                   jobs):
        app.include_router(module.router)
    explorer.install(app)
    return app


def create_worker_app(settings: Settings | None = None) -> FastAPI:
    """A ``planner worker`` process: runs the queued jobs of the shared database and serves
    only ``/healthz``, ``/readyz`` and ``/metrics`` (queue depth, job latency, lease expiries)
    for its probes and scrapers."""
    settings = settings or Settings()
    app = FastAPI(title="Parallelism planner worker", version=__version__,
                  lifespan=_lifespan(settings, True), openapi_url=None)
    app.state.settings = settings
    app.state.metrics = Metrics()
    problems.install(app)
    app.include_router(health.router)
    return app
