"""Prometheus metrics: requests by route, their latency, solve time, jobs by state."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("planner_http_requests_total", "HTTP requests",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("planner_http_request_duration_seconds", "HTTP latency",
                                 ["method", "route"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1,
                                          2.5, 5, 10, 30))
        self.solve = Histogram("planner_solve_seconds", "Plan search wall time",
                               ["status"], registry=self.registry,
                               buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.jobs = Gauge("planner_jobs", "Jobs by state (state=queued: the queue's depth)",
                          ["state"], registry=self.registry)
        self.job_latency = Histogram(
            "planner_job_latency_seconds", "From a job's submission to its outcome, for the "
            "jobs this process ran", ["kind", "state"], registry=self.registry,
            buckets=(.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))
        self.lease_expiries = Counter(
            "planner_job_lease_expiries_total", "Running jobs whose lease lapsed (their process "
            "stopped), as this process found them: queued again or failed", ["outcome"],
            registry=self.registry)


class MetricsMiddleware:
    """Counts and times every request by its route template (not its raw path)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def _send(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            if path not in ("/metrics",):
                self.metrics.requests.labels(scope["method"], path, str(status["code"])).inc()
                self.metrics.latency.labels(scope["method"], path).observe(
                    time.perf_counter() - start)


class BodyLimitMiddleware:
    """413 for bodies over the limit, whether announced by Content-Length or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from api.problems import problem

        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        too_big = problem(413, "Content Too Large", f"the body exceeds {self.max_bytes} bytes",
                          type_="/problems/body-too-large", instance=scope.get("path"))
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await too_big(scope, receive, send)
            return
        seen = 0

        async def _receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # FastAPI re-raises HTTPExceptions met while reading the body.
                    raise StarletteHTTPException(413, f"the body exceeds {self.max_bytes} bytes")
            return message

        await self.app(scope, _receive, send)
