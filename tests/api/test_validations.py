"""Validations over the live service, and what happens when a probe rank dies or hangs."""

import os
import time

import pytest

from api.live import live_server
from tests.test_validation import TINY


def wait(c, location, timeout=150):
    deadline = time.monotonic() + timeout
    while (job := c.get(location).json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    return job


def test_validate_a_stored_plan(server):
    with server.client() as c:
        pid = c.post("/v1/plans", json={**TINY, "search": {**TINY["search"], "top_k": 2}}).json()
        r = c.post(f"/v1/plans/{pid['id']}/validations", json={"top_k": 2, "nproc": 4})
        assert r.status_code == 202, r.text
        job = wait(c, r.headers["location"])
        assert job["state"] == "succeeded", job["error"]
        v = c.get(f"/v1/validations/{job['id']}").json()
        res = v["result"]
        assert res["plan_id"] == pid["id"] and len(res["plans"]) == 2
        assert all(p["measured"]["step_time_s"] > 0 for p in res["plans"])
        trace = c.get(res["plans"][0]["trace"])
        assert trace.status_code == 200 and "traceEvents" in trace.json()
        assert c.get("/v1/validations/job-nope").status_code == 404
        assert c.post("/v1/plans/plan-nope/validations", json={}).status_code == 404


@pytest.mark.parametrize("fault,expect", [("crash:1", "rank 1 crashes"),
                                          ("hang:2", "timed out")])
def test_a_dead_or_hung_rank_fails_the_job_and_leaves_nothing(tmp_path, fault, expect):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {"PLANNER_PROBE_FAULT": fault, "PLANNER_PROBE_PID_DIR": str(pid_dir),
           "PLANNER_DATA_DIR": str(tmp_path / "data")}
    with live_server(f"sqlite:///{tmp_path / 'v.db'}", env=env) as srv, srv.client() as c:
        plan_id = c.post("/v1/plans", json={**TINY, "search": {**TINY["search"],
                                                               "top_k": 1}}).json()["id"]
        started = time.monotonic()
        r = c.post(f"/v1/plans/{plan_id}/validations",
                   json={"top_k": 1, "nproc": 4, "timeout_s": 25})
        job = wait(c, r.headers["location"], timeout=90)
        assert job["state"] == "failed"
        assert expect in job["error"]["detail"]
        assert time.monotonic() - started < 60           # within the probe's timeout
        pids = [int(p.read_text()) for p in pid_dir.glob("rank*.pid")]
        assert len(pids) == 4
        for p in pids:                                    # no rank is left behind
            with pytest.raises(ProcessLookupError):
                os.kill(p, 0)
        assert c.get("/healthz").status_code == 200       # the service keeps serving
        assert c.post("/v1/estimates", json={**{k: v for k, v in TINY.items()
                                                if k != "search"},
                                             "plan": {"dp": 4}}).status_code == 200


def test_a_plan_request_validates_and_feeds_a_calibration_back(tmp_path):
    """POST /v1/plans with validation: the answer links the validation job; with
    feed_calibration its measured collectives become the stored cluster's calibration, which
    the next plan on that cluster is costed with. (SQLite only: the probe does not depend on
    the database, and stored jobs and calibrations run on PostgreSQL in the other tests.)"""
    env = {"PLANNER_DATA_DIR": str(tmp_path / "data")}
    with live_server(f"sqlite:///{tmp_path / 'v.db'}", env=env) as srv, srv.client() as c:
        cl = c.post("/v1/clusters", json={"preset": "local-cpu", "name": "this-host"}).json()
        bad = c.post("/v1/plans", json={**TINY, "cluster": {"id": cl["id"]},
                                        "validation": {"cluster_id": "cl-nope"}})
        assert bad.status_code == 422 and "cluster_id" in bad.text
        # Two plans whose TP all_reduce differ in size (micro-batches of 1 and 2), plus the
        # gradient bucket: three sizes of all_reduce over 2 ranks, enough for a fit.
        search = {**TINY["search"], "pp": 1, "tp": 2, "sequence_parallel": False,
                  "micro_batch_size": [1, 2]}
        body = {**TINY, "cluster": {"id": cl["id"]}, "search": {**search, "top_k": 2},
                "validation": {"top_k": 2, "nproc": 4, "feed_calibration": True}}
        r = c.post("/v1/plans", json=body)
        assert r.status_code == 201, r.text
        v = r.json()["validation"]
        assert v["kind"] == "validation" and v["id"] in r.headers["link"]
        job = wait(c, f"/v1/jobs/{v['id']}")
        assert job["state"] == "succeeded", job["error"]
        res = job["result"]
        assert res["plan_id"] == r.json()["id"] and res["samples"]
        cal = c.get(f"/v1/calibrations/{res['calibration_id']}").json()
        assert cal["source"] == "validation" and cal["matmul_tflops"] > 0
        assert any(f["op"] == "all_reduce" and f["group_size"] == 2 for f in cal["fits"])
        again = c.post("/v1/plans", json={**TINY, "cluster": {"id": cl["id"]},
                                          "search": {**search, "top_k": 1}})
        comm = again.json()["plans"][0]["communication"]
        assert any(item["source"] == res["calibration_id"] for item in comm)
