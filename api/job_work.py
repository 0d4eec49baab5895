"""The work of one job, whichever engine runs it: claim the stored job, run the plan search,
calibration sweep or validation probe it describes, and store its outcome exactly once.

``api.jobs.JobRunner`` (the embedded engine: threads in the service process, on SQLite) and
``api.queue.QueueJobs`` (procrastinate workers on PostgreSQL) both call ``JobWork.run``.
Every write names the owner (one attempt of one process), so an attempt that was taken over
after its process stopped cannot overwrite the outcome of the attempt that replaced it.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from api import store
from api.service import run_plan, to_plan_request

log = logging.getLogger("planner.jobs")


class JobWork:
    def __init__(self, engine: Engine, settings, metrics) -> None:
        self.engine, self.settings, self.metrics = engine, settings, metrics

    def _progress(self, job_id: str, owner: str):
        """A probe's progress callback: done of total runs, stored as 5-95% of the job while
        ``owner`` still holds it."""
        def progress(done: int, total: int) -> None:
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",),
                             held_by=owner, progress=round(0.05 + 0.9 * done / max(total, 1), 3))

        return progress

    def _sweep(self, job_id: str, owner: str, request: dict) -> dict:
        """Run a calibration sweep (torchrun on this machine); store the calibration."""
        from api.schemas import SweepSpec
        from planner.probe.sweep import run_sweep

        spec = SweepSpec.model_validate(request["sweep"])

        cal = run_sweep(spec.nproc, backend=spec.backend, sizes=spec.sizes, ops=spec.ops,
                        repeats=spec.repeats, budget_s=spec.budget_s,
                        min_batch_ms=spec.min_batch_ms, timeout_s=spec.timeout_s,
                        on_progress=self._progress(job_id, owner))
        row = store.save_calibration(engine=self.engine, cluster_id=request["cluster_id"],
                                     body=cal.model_dump(mode="json"))
        return row["body"]

    def _validate(self, job_id: str, owner: str, request: dict) -> dict:
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

        result = validate(req, nproc=spec.nproc, top_k=spec.top_k, steps=spec.steps,
                          timeout_s=spec.timeout_s, trace_dir=trace_dir,
                          on_progress=self._progress(job_id, owner),
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

    def run(self, job_id: str, owner: str, *, lease_until: datetime | None = None,
            taking_over: str | None = None) -> None:
        """Claim the job for ``owner`` and run it to an outcome stored once (succeeded, or
        failed with the reason). A job that is no longer queued (cancelled, or claimed by
        another process) is left alone, except that ``taking_over`` (a LIKE pattern of
        owners) lets a retry take over from an earlier attempt of the same queue job that
        stopped. A lost database connection is raised, not stored: it is an infrastructure
        failure, retried by the queue."""
        from api.schemas import JobCreate

        if not store.claim_job(engine=self.engine, job_id=job_id, owner=owner,
                               until=lease_until, taking_over=taking_over):
            return   # cancelled before it started, or claimed by another process
        job = store.get_job(engine=self.engine, job_id=job_id)
        if job is None:
            return   # deleted meanwhile
        try:
            if job["kind"] == "calibration-sweep":
                result = self._sweep(job_id, owner, job["request"])
            elif job["kind"] == "validation":
                result = self._validate(job_id, owner, job["request"])
            else:
                spec = JobCreate.model_validate({"kind": job["kind"], "request": job["request"]})
                req = to_plan_request(spec.request, engine=self.engine,
                                      max_time_limit_ms=self.settings.max_time_limit_ms)
                result, _ = run_plan(req, engine=self.engine, metrics=self.metrics)
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=owner,
                             state="succeeded", progress=1.0, result=result,
                             finished_at=store.now())
        except OperationalError:
            raise                  # the database went away: the queue retries the job
        except Exception as exc:   # any other failure is recorded on the job, never lost
            detail, status, expected = failure(exc)
            if expected:
                log.warning("job %s failed: %s", job_id, detail)
            else:
                log.exception("job %s failed", job_id)
            store.update_job(engine=self.engine, job_id=job_id, only_if=("running",), held_by=owner,
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


def failure(exc: Exception) -> tuple[str, int, bool]:
    """What a failed job reports: the reason, an HTTP status (4xx: the request was at fault,
    and running it again cannot help; 5xx: the service or the probe was), and whether the
    failure is one the service expects (no traceback in the log)."""
    from pydantic import ValidationError

    from api.problems import ApiProblem
    from planner.errors import PlannerInputError
    from planner.probe.local import ProbeError

    if isinstance(exc, ValidationError):    # a stored request the current schema refuses
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                         for e in exc.errors()), 422, True
    if isinstance(exc, PlannerInputError):
        return str(exc), 422, True
    detail = getattr(exc, "detail", None) or str(exc) or type(exc).__name__
    if isinstance(exc, ApiProblem):
        return detail, exc.status, True
    return detail, 500, isinstance(exc, ProbeError)
