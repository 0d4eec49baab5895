"""The embedded job engine: a bounded thread pool in the service process working through
rows of the jobs table. It runs jobs where the database is SQLite (one machine, no other
server: ``make run``); on PostgreSQL, jobs run on procrastinate workers (``api.queue``).

Jobs are records first: a job is stored as queued before it is scheduled, so a restart loses
nothing. Several processes may share the database file (the service and ``planner worker``
processes on its machine): a process claims a queued job with a conditional update (only one
wins) and holds it with a lease (``job_lease_s``) that a heartbeat renews every third of it.
Every process, at start-up and at each heartbeat, takes up the running jobs whose lease lapsed
(their process stopped): queued again while they have attempts left (``job_max_attempts``),
failed after; a process that starts leaves the jobs others are running alone, and one that
lost its lease cannot overwrite the outcome (its updates name it as the owner). A process that
runs jobs also looks for queued ones every ``job_poll_s`` (jobs queued through another
process, or queued again).

Roles: by default the service process runs its jobs (``run_jobs``). Processes started with
``PLANNER_RUN_JOBS=false`` only queue them (``QueuedForWorkers``), and ``planner worker``
processes (``api.main.create_worker_app``) run them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy.engine import Engine

from api import store
from api.job_work import JobWork

log = logging.getLogger("planner.jobs")


class JobRunner:
    def __init__(self, engine: Engine, settings, metrics) -> None:
        self.engine, self.settings, self.metrics = engine, settings, metrics
        self.work = JobWork(engine, settings, metrics)
        self.pool = ThreadPoolExecutor(max_workers=settings.max_concurrent_jobs,
                                       thread_name_prefix="planner-job")
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = timedelta(seconds=settings.job_lease_s)
        self._stop = threading.Event()
        self._scheduled: set[str] = set()
        self._lock = threading.Lock()
        self._beat = threading.Thread(target=self._heartbeat, name="planner-job-lease",
                                      daemon=True)

    async def start(self) -> None:
        """Take up the jobs of replicas that stopped, schedule the queued ones, start the
        heartbeat."""
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
            self.work.run(job_id, self.owner, lease_until=store.now() + self.lease)
        except Exception:   # the database went away: the lease lapses and the job moves on
            log.exception("job %s stopped", job_id)
        finally:
            with self._lock:
                self._scheduled.discard(job_id)

    async def stop(self) -> None:
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)


class QueuedForWorkers:
    """The job runner of an API replica that runs no jobs (``run_jobs`` false): a job is
    stored queued by the route, and ``planner worker`` processes claim it."""

    async def start(self) -> None:
        pass

    def submit(self, job_id: str) -> None:
        pass

    async def stop(self) -> None:
        pass
