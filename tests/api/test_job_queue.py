"""The queue engine on PostgreSQL (procrastinate), in one process: what is retried and what is
not, and stored jobs that no queue job serves."""

import time

import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

import api.job_work
from api.db import jobs as jobs_table
from api.main import create_app
from api.settings import Settings
from api.store import now
from tests.api.jobs_helpers import wait_job

PLAN = {"model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
        "training": {"global_batch_size": 64, "seq_length": 2048}, "search": {"top_k": 1}}


def client(url: str) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, job_poll_s=0.2, job_lease_s=3)))


def test_a_lost_database_is_retried_and_bad_input_is_not(postgres_url, monkeypatch):
    real = api.job_work.run_plan
    calls = []

    def flaky(req, **kw):          # the database goes away during the first run only
        calls.append(req)
        if len(calls) == 1:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return real(req, **kw)

    monkeypatch.setattr(api.job_work, "run_plan", flaky)
    with client(postgres_url) as c:
        r = c.post("/v1/jobs", json={"kind": "plan", "request": PLAN})
        assert r.status_code == 202, r.text
        # A second queue job for the same stored job (as when an orphan is adopted while the
        # API queues it): one of them runs the job; the other finds it claimed.
        c.app.state.jobs._defer(r.json()["id"])
        done = wait_job(c, r.headers["location"])
        assert done["state"] == "succeeded" and done["attempts"] == 2 and len(calls) == 2

        # A stored request the schema refuses (bad input) fails once, with 422, for good.
        engine = c.app.state.engine
        bad = {**PLAN, "training": {"global_batch_size": 64, "seq_length": -1}}
        with engine.begin() as conn:
            conn.execute(jobs_table.insert().values(
                id="job-bad-input", kind="plan", state="queued", progress=0.0, request=bad,
                result=None, error=None, created_at=now(), started_at=None, finished_at=None))
        failed = wait_job(c, "/v1/jobs/job-bad-input")
        assert failed["state"] == "failed" and failed["attempts"] == 1
        assert failed["error"]["status"] == 422 and "seq_length" in failed["error"]["detail"]
        time.sleep(1.5)                   # a watch period later: still failed, not run again
        again = c.get("/v1/jobs/job-bad-input").json()
        assert again["state"] == "failed" and again["attempts"] == 1


def test_stored_jobs_no_queue_job_serves_are_taken_up(postgres_url):
    """A job left running by a process that stopped before the queue engine existed is run
    again; one that had used its attempts is failed; a queued one is run."""
    with client(postgres_url) as c:
        engine = c.app.state.engine
        rows = [("job-interrupted", "running", 1), ("job-spent", "running", 2),
                ("job-waiting", "queued", 0)]
        with engine.begin() as conn:
            for job_id, state, attempts in rows:
                conn.execute(jobs_table.insert().values(
                    id=job_id, kind="plan", state=state, progress=0.0, request=PLAN,
                    result=None, error=None, created_at=now(), started_at=None,
                    finished_at=None, owner="gone:1:x" if state == "running" else None,
                    attempts=attempts))
        body = wait_job(c, "/v1/jobs/job-interrupted")
        assert body["attempts"] == 2, body
        spent = wait_job(c, "/v1/jobs/job-spent")
        assert spent["state"] == "failed" and "2 time(s)" in spent["error"]["detail"]
        assert wait_job(c, "/v1/jobs/job-waiting")["state"] == "succeeded"
        with engine.connect() as conn:
            states = dict(conn.execute(sa.select(jobs_table.c.id, jobs_table.c.state)).all())
        assert states == {"job-interrupted": "succeeded", "job-spent": "failed",
                          "job-waiting": "succeeded"}


def test_a_queue_that_cannot_take_the_job_answers_503_and_fails_the_job(postgres_url,
                                                                        monkeypatch):
    with client(postgres_url) as c:
        def refuse(job_id):
            raise OSError("connection refused")

        monkeypatch.setattr(c.app.state.jobs, "_defer", refuse)
        r = c.post("/v1/jobs", json={"kind": "plan", "request": PLAN})
        assert r.status_code == 503
        assert r.headers["content-type"] == "application/problem+json"
        assert "job queue is unavailable (OSError)" in r.json()["detail"]
        # Nothing waits for a job that will never run: it is stored failed.
        failed = c.get("/v1/jobs", params={"state": "failed"}).json()["data"]
        assert len(failed) == 1 and failed[0]["error"]["status"] == 503


def test_a_running_job_written_between_the_sweeps_statements_is_not_failed(postgres_url):
    """requeue_or_fail's two updates run in one transaction, but under READ COMMITTED the
    second sees rows committed after the first: a running job with attempts left that another
    process writes in between must not be failed as left over (it is queued again by a later
    sweep). Before each update named the attempts it acts on, this failed it, and the orphan
    test above failed now and then (a job written while a sweep ran, failed at attempt 1)."""
    from api.db import make_engine, migrate
    from api.store import requeue_or_fail

    engine, other = make_engine(postgres_url), make_engine(postgres_url)
    migrate(engine)
    row = dict(kind="plan", progress=0.0, request=PLAN, result=None, error=None,
               started_at=None, finished_at=None, owner="gone:1:x", state="running")
    with engine.begin() as conn:
        conn.execute(jobs_table.insert().values(id="job-old", created_at=now(), attempts=2, **row))
    written = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def between(conn, cursor, statement, params, context, executemany):
        if statement.startswith("UPDATE jobs") and "finished_at" in statement and not written:
            with other.begin() as c:        # another process, committed before the second update
                c.execute(jobs_table.insert().values(id="job-new", created_at=now(), attempts=1,
                                                     **row))
            written.append(True)

    retried, failed = requeue_or_fail(engine=engine, running=sa.true(), max_attempts=2,
                                      detail="stopped, 2 time(s)")
    sa.event.remove(engine, "before_cursor_execute", between)
    with engine.connect() as conn:
        states = dict(conn.execute(sa.select(jobs_table.c.id, jobs_table.c.state)).all())
    assert written and (retried, failed) == (0, 1)
    assert states == {"job-old": "failed", "job-new": "running"}
    engine.dispose()
    other.dispose()
