"""Jobs on PostgreSQL run on procrastinate (https://procrastinate.readthedocs.io), a maintained
job queue that lives in the same PostgreSQL database: no broker to run, and a job is queued in
the database the API already depends on.

What procrastinate provides and this module relies on:
- dispatch: a job is a row of ``procrastinate_jobs``; workers take rows with
  ``SELECT ... FOR UPDATE SKIP LOCKED`` (one worker wins) and hear of new ones by LISTEN/NOTIFY,
  polling every ``job_poll_s`` as a fallback;
- worker heartbeats: every worker process registers in ``procrastinate_workers`` and renews its
  heartbeat every third of ``job_lease_s``; ``get_stalled_jobs`` returns the running jobs of
  workers whose heartbeat is older than a lease (the worker was killed or lost the database);
- retries with a strategy (``RetryStrategy``) for exceptions that escape a task.

What it does not decide, and this module does:
- the public job record stays the ``jobs`` table (state, progress, result, error), written
  only through ``api.job_work.JobWork``, which claims the row for one attempt of one queue job
  and names that owner on every write: the result is stored once even if a stalled worker
  comes back;
- every process with a queue (API replicas and workers) watches for stalled jobs every third
  of a lease: a stalled job is queued again while it has attempts left
  (``job_max_attempts``), failed after, so a killed worker's job moves on within a lease and
  a third. Bad input fails inside the task and is never retried; only what escapes it (a lost
  database) is;
- a stored job that no queue job serves is taken up: a ``running`` one whose queue job
  finished without storing an outcome (its retries ran out on database errors), or one left
  by the embedded engine before an upgrade once its lease lapses, is queued again or failed
  as its attempts allow; a ``queued`` one is queued for a worker.

The schema of procrastinate is created by the Alembic migration 0005 (PostgreSQL only), so
replicas that start together do not race to create it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from datetime import timedelta

import procrastinate
import sqlalchemy as sa
from procrastinate.jobs import Status
from sqlalchemy.engine import Engine, make_url

from api import store
from api.db import jobs, normalise_url
from api.job_work import JobWork
from api.problems import ApiProblem

log = logging.getLogger("planner.jobs")

TASK = "planner.run_job"
ADOPT_AFTER_S = 5.0     # a queued job no queue job serves is adopted once this old


def conninfo(database_url: str) -> str:
    """The libpq URL of a SQLAlchemy ``postgresql+psycopg://`` URL."""
    url = make_url(normalise_url(database_url)).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class QueueJobs:
    """The job engine of a process on PostgreSQL: queues jobs for procrastinate workers and,
    with ``run_jobs``, is one (``max_concurrent_jobs`` jobs at once, each in a thread)."""

    def __init__(self, engine: Engine, settings, metrics, *, run_jobs: bool) -> None:
        self.engine, self.settings, self.metrics = engine, settings, metrics
        self.run_jobs = run_jobs
        self.work = JobWork(engine, settings, metrics)
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        info = conninfo(settings.database_url)
        # Routes defer from request threads: a thread-safe synchronous pool.
        self.deferrer = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(
            conninfo=info, min_size=1, max_size=4))
        # The worker and the stalled-job watch run on the event loop.
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=info, min_size=1, max_size=settings.max_concurrent_jobs + 4))
        retries = settings.job_max_attempts - 1
        self.app.task(name=TASK, pass_context=True,
                      retry=procrastinate.RetryStrategy(max_attempts=retries, wait=1)
                      if retries else False)(self._task)
        self._loops: list[asyncio.Task] = []

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.deferrer.open)
        await self.app.open_async()
        lease = self.settings.job_lease_s
        if self.run_jobs:
            self._loops.append(asyncio.create_task(self.app.run_worker_async(
                name=self.name, concurrency=self.settings.max_concurrent_jobs,
                install_signal_handlers=False, listen_notify=True,
                fetch_job_polling_interval=self.settings.job_poll_s,
                update_heartbeat_interval=lease / 3, stalled_worker_timeout=lease,
                delete_jobs="successful", shutdown_graceful_timeout=5)))
        self._loops.append(asyncio.create_task(self._watch()))

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        await self.app.close_async()
        await asyncio.to_thread(self.deferrer.close)

    # -- queueing -------------------------------------------------------------------------------

    def submit(self, job_id: str) -> None:
        """Queue the stored job for a worker. If the queue cannot take it, the job is failed
        and the request answered 503, so nothing waits for a job that will never run."""
        try:
            self._defer(job_id)
        except Exception as exc:
            reason = f"the job queue is unavailable ({type(exc).__name__})"
            log.exception("queueing job %s failed", job_id)
            store.update_job(engine=self.engine, job_id=job_id, only_if=("queued",),
                             state="failed", finished_at=store.now(),
                             error={"type": "/problems/queue-unavailable",
                                    "title": "Queue unavailable", "status": 503,
                                    "detail": reason})
            raise ApiProblem(503, "Service Unavailable", reason,
                             type_="/problems/queue-unavailable") from exc

    def _defer(self, job_id: str) -> None:
        """A queue job for a stored job; ``lock`` ties them (and runs the queue jobs of one
        stored job one at a time). A second queue job for the same stored job (adopted while
        the first was being queued) finds the job claimed and does nothing; no
        ``queueing_lock``, which would refuse the first one's retry while the second waits."""
        self.deferrer.configure_task(name=TASK, lock=job_id).defer(job_id=job_id)

    # -- running --------------------------------------------------------------------------------

    def _task(self, context: procrastinate.JobContext, job_id: str) -> None:
        """One attempt of one queue job: the owner names both, and an earlier attempt of the
        same queue job (stalled, then retried) may be taken over."""
        job = context.job
        self.work.run(job_id, f"{self.name}:pq{job.id}.{job.attempts}",
                      taking_over=f"%:pq{job.id}.%")

    # -- watching -------------------------------------------------------------------------------

    async def _watch(self) -> None:
        period = max(0.2, self.settings.job_lease_s / 3)
        while True:
            try:
                await self._take_up_stalled()
                await asyncio.to_thread(self._adopt_orphans)
            except asyncio.CancelledError:
                raise
            except Exception:   # the database may be away for a beat
                log.exception("watching for stalled jobs failed")
            await asyncio.sleep(period)

    async def _take_up_stalled(self) -> None:
        """Running jobs of workers whose heartbeat is older than a lease: queued again while
        they have attempts left, failed after. Another process may take one up first; the
        queue's own status check then refuses this one."""
        manager = self.app.job_manager
        max_attempts = self.settings.job_max_attempts
        for job in await manager.get_stalled_jobs(
                task_name=TASK, seconds_since_heartbeat=self.settings.job_lease_s):
            job_id = job.task_kwargs.get("job_id")
            again = job.attempts + 1 < max_attempts
            try:
                if again:
                    await manager.retry_job(job)
                else:
                    await manager.finish_job(job, status=Status.FAILED, delete_job=False)
            except Exception:
                continue
            if not isinstance(job_id, str):
                continue
            values: dict = (store.QUEUED_AGAIN if again else {
                "state": "failed", "finished_at": store.now(), "error": store.interrupted(
                    f"the worker running this job stopped (its lease lapsed: no heartbeat "
                    f"for job_lease_s), {job.attempts + 1} time(s)")})
            await asyncio.to_thread(store.update_job, engine=self.engine, job_id=job_id,
                                    only_if=("running",), **values)
            self.metrics.lease_expiries.labels("queued_again" if again else "failed").inc()
            log.warning("job %s: its worker stopped; %s", job_id,
                        "queued again" if again else "failed")

    def _adopt_orphans(self) -> None:
        """Stored jobs that no queue job serves: a running one (its queue job finished without
        an outcome, or the database was upgraded from the embedded engine while it ran) is
        queued again while it has attempts left and failed after; a queued one (written
        before this engine ran it, or whose queueing was cut short) is queued for a worker.
        A queue job about to start (``todo``) or running (``doing``) serves its stored job.
        A running job that still holds a lease (an embedded engine's replica, as before an
        upgrade to the queue, may still be running it) is left alone until the lease lapses,
        so a rolling upgrade never runs one job twice at once."""
        queued = sa.table("procrastinate_jobs", sa.column("lock"), sa.column("status"))
        unserved = ~sa.exists().where(queued.c.lock == jobs.c.id,
                                      sa.cast(queued.c.status, sa.Text).in_(("todo", "doing")))
        again, failed = store.requeue_or_fail(
            engine=self.engine, running=unserved & store.lease_lapsed(),
            max_attempts=self.settings.job_max_attempts,
            detail=f"the job stopped without an outcome (its worker stopped or lost the "
                   f"database), {self.settings.job_max_attempts} time(s)")
        with self.engine.connect() as conn:
            # Past a grace period: a job the API is queueing right now is not an orphan.
            settled = store.now() - timedelta(seconds=ADOPT_AFTER_S)
            waiting = [r[0] for r in conn.execute(
                sa.select(jobs.c.id).where((jobs.c.state == "queued") & unserved)
                .where(jobs.c.created_at < settled).order_by(jobs.c.created_at))]
        self.metrics.lease_expiries.labels("queued_again").inc(again)
        self.metrics.lease_expiries.labels("failed").inc(failed)
        for job_id in waiting:
            self._defer(job_id)
