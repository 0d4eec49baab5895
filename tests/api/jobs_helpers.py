"""Driving jobs over HTTP in the live-process tests: wait for an outcome, start a long job,
watch a dead process's job fail within its lease, find the process running a job."""

import time

import sqlalchemy as sa

from api.db import jobs as jobs_table


def wait_job(client, location, timeout=60):
    """The job's body once it is no longer queued or running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(location).json()
        if body["state"] not in ("queued", "running"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"job still {body['state']}")


def start_long_job(client, timeout=30):
    """A calibration sweep on a new local cluster, returned (its Location) once some process
    runs it. A sweep stops once every size's interval is tight, which small sizes on a quiet
    machine reach in seconds, so the time budget alone does not make it long: its 64 MiB
    all-reduce (about 100 ms a call on two gloo ranks here), timed in 6 batches a pass of up to
    2 s (at most 50 calls) over the two passes a sweep always makes, keeps it running about
    25 s, well past the tests' checks (about 8 s after it starts), and the 20 s budget ends it
    soon after (the sweeps of SIGKILLed processes run to their end)."""
    cid = client.post("/v1/clusters", json={"preset": "local-cpu"}).json()["id"]
    r = client.post(f"/v1/clusters/{cid}/calibrations", json={
        "source": "sweep", "sweep": {"nproc": 2, "ops": ["all_reduce"],
                                     "sizes": [4096, 1048576, 64 * 2**20],
                                     "repeats": 6, "budget_s": 20, "min_batch_ms": 2000}})
    assert r.status_code == 202, r.text
    job = r.headers["location"]
    deadline = time.monotonic() + timeout
    while client.get(job).json()["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return job


def assert_failed_within_lease(client, job, lease_s):
    """The job of a killed process is failed within a lease and a beat (with margin), by
    another process, while the API keeps answering."""
    assert client.get(job).json()["state"] == "running"
    killed = time.monotonic()
    while (state := client.get(job).json())["state"] == "running":
        assert time.monotonic() - killed < lease_s + 1 + 5, "not failed within the lease"
        assert client.get("/healthz").status_code == 200
        time.sleep(0.25)
    assert state["state"] == "failed" and "lease lapsed" in state["error"]["detail"]


def owner_pid(engine, job_id: str) -> int | None:
    """The process id of the job's owner (host:pid:...), None while no process holds it."""
    with engine.connect() as conn:
        owner = conn.execute(sa.select(jobs_table.c.owner)
                             .where(jobs_table.c.id == job_id)).scalar_one()
    return int(owner.split(":")[1]) if owner else None
