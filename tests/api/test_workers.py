"""API replicas that only queue jobs and ``planner worker`` processes that run them, as
separate processes on one database."""

import re
import signal
import time

import pytest
import sqlalchemy as sa

from api.db import jobs as jobs_table
from api.db import make_engine
from api.db import plans as plans_table
from api.live import LiveServer
from api.store import ACTIVE_STATES, job_counts
from tests.api.jobs_helpers import (
    assert_failed_within_lease,
    owner_pid,
    start_long_job,
    wait_job,
)

pytestmark = pytest.mark.slow

API_ONLY = {"PLANNER_RUN_JOBS": "false"}
FAST_POLL = {"PLANNER_JOB_POLL_S": "0.2"}


def small_plan(batch: int) -> dict:
    return {"kind": "plan", "request": {
        "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
        "training": {"global_batch_size": batch, "seq_length": 2048},
        "search": {"top_k": 1}}}


def metric(text: str, name: str, **labels) -> float:
    """The value of one sample of a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}(\{{(.*)\}})? (\S+)", line)
        if m and all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


def unfinished(engine) -> int:
    counts = job_counts(engine=engine)
    return sum(counts.get(s, 0) for s in ACTIVE_STATES)


def test_an_api_replica_queues_and_a_worker_runs(database_url, tmp_path):
    """With PLANNER_RUN_JOBS=false the API stores the job queued and leaves it; a worker
    started later claims and runs it, and reports it on its own /metrics and /readyz."""
    api = LiveServer(database_url, env=API_ONLY, log=tmp_path / "api.log").start()
    worker = LiveServer(database_url, env=FAST_POLL, log=tmp_path / "worker.log",
                        command="worker")
    try:
        with api.client() as c:
            r = c.post("/v1/jobs", json=small_plan(64))
            assert r.status_code == 202, r.text
            job = r.headers["location"]
            time.sleep(1.5)                         # the API replica runs nothing
            assert c.get(job).json()["state"] == "queued"
            assert metric(c.get("/metrics").text, "planner_jobs", state="queued") == 1
            worker.start()
            done = wait_job(c, job)
            assert done["state"] == "succeeded" and done["attempts"] == 1
            assert done["result"]["plans"]
            engine = make_engine(database_url)
            try:
                assert owner_pid(engine, done["id"]) == worker.proc.pid
            finally:
                engine.dispose()
        with worker.client() as w:
            assert w.get("/readyz").json() == {"status": "ready"}
            text = w.get("/metrics").text
            assert metric(text, "planner_job_latency_seconds_count", kind="plan",
                          state="succeeded") == 1
            assert metric(text, "planner_jobs", state="succeeded") == 1
            assert w.get("/v1/plans").status_code == 404       # a worker serves no API
    finally:
        worker.stop()
        api.stop()


def test_two_replicas_and_two_workers_run_200_jobs_once_each(postgres_url, tmp_path):
    """200 plan jobs submitted through two API replicas all finish on two workers: each run
    once (one attempt), each plan stored once, both workers used, and the API answers while
    the workers are busy."""
    apis = [LiveServer(postgres_url, env=API_ONLY, log=tmp_path / f"api{i}.log").start()
            for i in range(2)]
    workers = [LiveServer(postgres_url, env=FAST_POLL, log=tmp_path / f"worker{i}.log",
                          command="worker").start() for i in range(2)]
    engine = make_engine(postgres_url)
    try:
        clients = [a.client() for a in apis]
        locations = []
        for i in range(200):          # distinct batches: 200 distinct plans to store
            r = clients[i % 2].post("/v1/jobs", json=small_plan(8 * (i + 1)))
            assert r.status_code == 202, r.text
            locations.append(r.headers["location"])
        # The API answers reads and cheap requests while the workers work through the queue.
        assert clients[0].get("/healthz").status_code == 200
        assert clients[1].get(locations[-1]).status_code == 200
        deadline = time.monotonic() + 240
        while left := unfinished(engine):
            assert time.monotonic() < deadline, f"{left} jobs still queued or running"
            assert clients[0].get("/v1/jobs", params={"limit": 1}).status_code == 200
            time.sleep(0.5)
        with engine.connect() as conn:
            rows = conn.execute(sa.select(jobs_table.c.state, jobs_table.c.attempts,
                                          jobs_table.c.owner)).all()
            stored_plans = conn.execute(sa.select(sa.func.count())
                                        .select_from(plans_table)).scalar_one()
        assert len(rows) == 200
        assert {r.state for r in rows} == {"succeeded"}
        assert {r.attempts for r in rows} == {1}
        pids = {int(r.owner.split(":")[1]) for r in rows}
        assert pids == {w.proc.pid for w in workers}
        assert stored_plans == 200
        for c in clients:
            c.close()
    finally:
        engine.dispose()
        for s in workers + apis:
            s.stop()


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_killed_workers_job_moves_on_within_its_lease(postgres_url, tmp_path, attempts):
    """A worker SIGKILLed in the middle of a long job (a calibration sweep with a time
    budget). A replica started meanwhile leaves the job running. Once the worker is killed,
    within a lease and a beat, exactly one process takes the job up: with no attempt left it
    is failed; with one left it runs again on the other worker. The API answers meanwhile."""
    lease = {"PLANNER_JOB_LEASE_S": "3", "PLANNER_JOB_MAX_ATTEMPTS": str(attempts),
             **FAST_POLL}
    api = LiveServer(postgres_url, env=API_ONLY, log=tmp_path / "api.log").start()
    workers = {}
    for i in range(2):
        w = LiveServer(postgres_url, env=lease, log=tmp_path / f"worker{i}.log",
                       command="worker").start()
        workers[w.proc.pid] = w
    engine = make_engine(postgres_url)
    try:
        with api.client() as c:
            job = start_long_job(c)
            job_id = job.rsplit("/", 1)[1]
            victim = workers[owner_pid(engine, job_id)]
            survivor = next(w for w in workers.values() if w is not victim)
            # A replica that starts while the job runs leaves it running, past a lease.
            late = LiveServer(postgres_url, env={**lease, **API_ONLY},
                              log=tmp_path / "late.log").start()
            time.sleep(4)
            late.stop()
            assert c.get(job).json()["state"] == "running"
            assert owner_pid(engine, job_id) == victim.proc.pid
            victim.stop(signal.SIGKILL)                  # no shutdown, no last write
            if attempts == 1:
                assert_failed_within_lease(c, job, 3)
                outcome = "failed"
            else:
                killed = time.monotonic()
                while owner_pid(engine, job_id) != survivor.proc.pid:
                    assert time.monotonic() - killed < 3 + 1 + 5, "not run again in time"
                    time.sleep(0.25)
                state = c.get(job).json()
                assert state["state"] == "running" and state["attempts"] == 2
                assert c.delete(job).json()["state"] == "cancelled"
                outcome = "queued_again"
            # Exactly one process (the API replica or the other worker) took the job up.
            taken = 0.0
            for server in (api, survivor):
                with server.client() as s:
                    taken += metric(s.get("/metrics").text,
                                    "planner_job_lease_expiries_total", outcome=outcome)
            assert taken == 1
    finally:
        engine.dispose()
        for w in workers.values():
            w.stop(signal.SIGKILL)
        api.stop()
