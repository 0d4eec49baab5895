"""Background jobs: a bounded thread pool working through rows of the jobs table.

Jobs are records first: a job is stored as queued before it is scheduled, so a restart loses
nothing. Several replicas may share one database: a replica claims a queued job with a
conditional update (only one wins) and holds it with a lease (``job_lease_s``) that a
heartbeat renews every third of it. Every replica, at start-up and at each heartbeat, takes
up the running jobs whose lease lapsed (their replica stopped): queued again while they have
attempts left (``job_max_attempts``: a lapsed lease is an infrastructure failure; bad input
fails at once and is never retried), failed after; so a dead replica's job moves on within a
lease and a beat, and a replica that starts leaves the jobs others are running alone. A
replica that lost its lease cannot overwrite the outcome (its updates name it as the owner).
Each beat also schedules the queued jobs this replica has not scheduled yet, so a job queued
through one replica, or queued again, runs on whichever replica claims it first; a process
that runs jobs also looks for queued ones every ``job_poll_s``.

Roles: by default the service process runs its jobs (``run_jobs``: one command, embedded
SQLite). API replicas started with ``PLANNER_RUN_JOBS=false`` only queue them
(``QueuedForWorkers``), and ``planner worker`` processes (``api.main.create_worker_app``) run
them, scaled apart from the API.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from api import store
from api.service import run_plan, to_plan_request

log = logging.getLogger("planner.jobs")


class JobRunner:
    def __init__(self, engine: Engine, settings, metrics) -> None:
        self.engine, self.settings, self.metrics = engine, settings, metrics
        self.pool = ThreadPoolExecutor(max_workers=settings.max_concurrent_jobs,
                                       thread_name_prefix="planner-job")
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = timedelta(seconds=settings.job_lease_s)
        self._stop = threading.Event()
        self._scheduled: set[str] = set()
        self._lock = threading.Lock()
        self._beat = threading.Thread(target=self._heartbeat, name="planner-job-lease",
                                      daemon=True)

    def recover(self) -> None:
        self._expire()
        self._schedule_queued()
        self._beat.start()

    def _expire(self) -> None:
        retried, failed = store.expire_jobs(engine=self.engine,
                                            max_attempts=self.settings.job_max_attempts)
        self.metrics.lease_expiries.labels("queued_again").inc(retried)
        self.metrics.lease_expiries.labels("failed").inc(failed)
        if retried or failed:
            log.warning("jobs whose replica stopped (lease lapsed): %d queued again, %d "
                        "failed", retried, failed)

    def _schedule_queued(self) -> None:
        for job_id in store.queued_job_ids(engine=self.engine):
            self.submit(job_id)

    def _heartbeat(self) -> None:
        """Every third of a lease, renew this replica's leases and take up the jobs of
        replicas that stopped; every ``job_poll_s``, schedule the queued jobs."""
        period = self.lease.total_seconds() / 3
        poll = min(self.settings.job_poll_s, period)
        last_beat = time.monotonic()
        while not self._stop.wait(poll):
            try:
                if time.monotonic() - last_beat >= period - poll / 2:
                    last_beat = time.monotonic()
                    store.renew_leases(engine=self.engine, owner=self.owner,
                                       until=store.now() + self.lease)
                    self._expire()
                self._schedule_queued()
            except Exception:   # the database may be away for a beat; the lease allows it
                log.exception("job lease heartbeat failed")

    def submit(self, job_id: str) -> None:
        with self._lock:                  # once per replica; the claim decides who runs it
            if job_id in self._scheduled:
                return
            self._scheduled.add(job_id)
        self.pool.submit(self._run, job_id)

    def _run(self, job_id: str) -> None:
        try:
            self._attempt(job_id)
        finally:
            with self._lock:
                self._scheduled.discard(job_id)

    def shutdown(self) -> None:
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _sweep(self, job_id: str, request: dict) -> dict:
        """Run a calibration sweep (torchrun on this machine); store the calibration."""
        from api.schemas import SweepSpec
        from planner.probe.sweep import run_sweep

        spec = SweepSpec.model_validate(request["sweep"])

        def progress(done: int, total: int) -> None:
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=self.owner,
                             progress=round(0.05 + 0.9 * done / max(total, 1), 3))

        cal = run_sweep(spec.nproc, backend=spec.backend, sizes=spec.sizes, ops=spec.ops,
                        repeats=spec.repeats, budget_s=spec.budget_s,
                        min_batch_ms=spec.min_batch_ms, timeout_s=spec.timeout_s,
                        on_progress=progress)
        row = store.save_calibration(engine=self.engine, cluster_id=request["cluster_id"],
                                     body=cal.model_dump(mode="json"))
        return row["body"]

    def _validate(self, job_id: str, request: dict) -> dict:
        """Probe a stored plan result's top plans; traces go to data_dir/validations/<job>."""
        from pathlib import Path

        from api.schemas import ValidationCreate
        from planner.probe.validate import validate
        from planner.search import PlanRequest

        spec = ValidationCreate.model_validate(request["validation"])
        row = store.get_plan(engine=self.engine, plan_id=request["plan_id"])
        if row is None:
            raise ValueError(f"plan {request['plan_id']} is no longer stored")
        req = PlanRequest.model_validate(row["request"])
        trace_dir = Path(self.settings.data_dir, "validations", job_id)
        trace_dir.mkdir(parents=True, exist_ok=True)

        def progress(done: int, total: int) -> None:
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=self.owner,
                             progress=round(0.05 + 0.9 * done / max(total, 1), 3))

        result = validate(req, nproc=spec.nproc, top_k=spec.top_k, steps=spec.steps,
                          timeout_s=spec.timeout_s, trace_dir=trace_dir, on_progress=progress,
                          mode=spec.mode, compute=spec.compute)
        result = result.model_copy(update={"id": job_id})
        body = result.model_dump(mode="json")
        if spec.feed_calibration and result.samples:
            from planner.validation.evaluate import as_calibration

            cal = store.save_calibration(engine=self.engine, cluster_id=spec.cluster_id,
                                         body=as_calibration(result).model_dump(mode="json"))
            body["calibration_id"] = cal["id"]
        for i, p in enumerate(body["plans"]):   # traces are served by the API, not by path
            p["trace"] = f"/v1/validations/{job_id}/trace/{i + 1}" if p["trace"] else None
        body["plan_id"] = request["plan_id"]
        return body

    def _attempt(self, job_id: str) -> None:
        from api.schemas import JobCreate

        if not store.claim_job(engine=self.engine, job_id=job_id, owner=self.owner,
                               until=store.now() + self.lease):
            return   # cancelled before it started, or claimed by another replica
        job = store.get_job(engine=self.engine, job_id=job_id)
        if job is None:
            return   # deleted meanwhile
        try:
            if job["kind"] == "calibration-sweep":
                result = self._sweep(job_id, job["request"])
            elif job["kind"] == "validation":
                result = self._validate(job_id, job["request"])
            else:
                spec = JobCreate.model_validate({"kind": job["kind"], "request": job["request"]})
                req = to_plan_request(spec.request, engine=self.engine,
                                      max_time_limit_ms=self.settings.max_time_limit_ms)
                result, _ = run_plan(req, engine=self.engine, metrics=self.metrics)
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=self.owner,
                             state="succeeded", progress=1.0, result=result,
                             finished_at=store.now())
        except Exception as exc:   # any failure is recorded on the job, never lost
            from api.problems import ApiProblem
            from planner.errors import PlannerInputError
            from planner.probe.local import ProbeError

            if isinstance(exc, (ApiProblem, PlannerInputError, ProbeError)):
                log.warning("job %s rejected: %s", job_id, exc)
            else:
                log.exception("job %s failed", job_id)
            detail = getattr(exc, "detail", None) or str(exc) or type(exc).__name__
            status = 422 if isinstance(exc, PlannerInputError) else getattr(exc, "status", 500)
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=self.owner,
                             state="failed", finished_at=store.now(),
                             error={"type": "/problems/job-failed", "title": "Job failed",
                                    "status": status, "detail": detail})
            self._observe(job, "failed")
        else:
            self._observe(job, "succeeded")

    def _observe(self, job: dict, state: str) -> None:
        """Submission-to-outcome latency of a job this process ran."""
        created = datetime.fromisoformat(job["created_at"])   # the store's rows: ISO, UTC
        self.metrics.job_latency.labels(job["kind"], state).observe(
            max(0.0, (store.now() - created).total_seconds()))


class QueuedForWorkers:
    """The job runner of an API replica that runs no jobs (``run_jobs`` false): a job is
    stored queued by the route, and ``planner worker`` processes claim it."""

    def recover(self) -> None:
        pass

    def submit(self, job_id: str) -> None:
        pass

    def shutdown(self) -> None:
        pass
