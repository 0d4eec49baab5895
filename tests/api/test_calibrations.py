"""Calibrations over the live service: attach measurements to a cluster, plan with them."""

import time

from tests.nccl_logs import make_log

EST = {"model": {"preset": "llama3-8b"}, "training": {"global_batch_size": 64,
                                                      "seq_length": 4096},
       "plan": {"dp": 2, "tp": 8, "micro_batch_size": 1}}


def test_calibrate_a_cluster_and_plan_with_it(server):
    with server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-a100", "name": "lab",
                                           "num_nodes": 2}).json()["id"]
        before = c.post("/v1/estimates", json={**EST, "cluster": {"id": cid}}).json()
        assert {x["source"] for x in before["communication"]} == {"preset"}

        text, _, _ = make_log(op="all_reduce", ranks=8)
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "nccl-tests",
                                                            "logs": [text]})
        assert r.status_code == 201, r.text
        cal = r.json()
        assert r.headers["location"] == f"/v1/calibrations/{cal['id']}"
        assert cal["cluster_id"] == cid and cal["fits"][0]["op"] == "all_reduce"
        assert c.get(f"/v1/calibrations/{cal['id']}").json()["fits"] == cal["fits"]
        plot = c.get(f"/v1/calibrations/{cal['id']}/plot")
        assert plot.headers["content-type"].startswith("image/svg+xml")
        assert plot.text.startswith("<svg")

        after = c.post("/v1/estimates", json={**EST, "cluster": {"id": cid}}).json()
        tp = [x for x in after["communication"] if x["strategy"] == "TP"]
        assert tp and {x["source"] for x in tp} == {cal["id"]}
        assert after["step_time_s"] != before["step_time_s"]
        res = c.post("/v1/plans", json={**{k: v for k, v in EST.items() if k != "plan"},
                                        "cluster": {"id": cid}, "search": {"top_k": 1}}).json()
        assert res["plans"]
        listing = c.get(f"/v1/clusters/{cid}/calibrations").json()
        assert listing["count"] == 1

        # Bad measurements are 422 naming the problem; unknown ids 404.
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "nccl-tests",
                                                            "logs": ["1024 256 float"]})
        assert r.status_code == 422 and "logs.0: line 1" in r.json()["detail"]
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "samples"})
        assert r.status_code == 422 and r.json()["detail"].startswith("samples")
        assert c.post("/v1/clusters/cl-nope/calibrations",
                      json={"source": "samples"}).status_code == 404
        assert c.get("/v1/calibrations/cal-nope").status_code == 404


def test_sweep_runs_as_a_job(server):
    with server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "local-cpu"}).json()["id"]
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={
            "source": "sweep", "sweep": {"nproc": 2, "ops": ["all_reduce", "broadcast"],
                                         "sizes": [4096, 65536, 1048576], "timeout_s": 120,
                                         "budget_s": 0, "min_batch_ms": 2}})
        assert r.status_code == 202, r.text
        location = r.headers["location"]
        deadline = time.monotonic() + 150
        while (job := c.get(location).json())["state"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert job["state"] == "succeeded", job["error"]
        assert job["result"]["source"] == "sweep" and job["progress"] == 1.0
        assert {f["op"] for f in job["result"]["fits"]} == {"all_reduce", "broadcast"}
        assert c.get(f"/v1/clusters/{cid}/calibrations").json()["count"] == 1


def test_a_trimmed_nccl_tests_log_is_read_as_the_group_it_names(server):
    """AWS's own 2 x p4de.24xlarge output, as its guide prints it (no '#  Rank' lines), given
    the 16 ranks on 2 nodes it ran on, calibrates a stored cloud cluster."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "data" / "aws_nccl_tests" / "p4de.txt").read_text()
    with server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "aws-p4de", "num_nodes": 2}).json()["id"]
        r = c.post(f"/v1/clusters/{cid}/calibrations",
                   json={"source": "nccl-tests", "logs": [text], "ranks": 16, "nodes": 2})
        assert r.status_code == 201, r.text
        (fit,) = r.json()["fits"]
        assert (fit["op"], fit["tier"], fit["group_size"]) == ("all_reduce", "inter_node", 16)
        est = c.post("/v1/estimates", json={
            "model": {"preset": "llama3-8b"}, "cluster": {"id": cid},
            "training": {"global_batch_size": 16, "seq_length": 2048},
            "plan": {"dp": 16, "micro_batch_size": 1, "zero_stage": 0}}).json()
        dp = [x for x in est["communication"] if x["strategy"] == "DP"]
        assert dp and {x["source"] for x in dp} == {r.json()["id"]}
        # A log whose rank lines disagree, and a group of no ranks: 422s naming them.
        eight, _, _ = make_log(op="all_reduce", ranks=8)
        r = c.post(f"/v1/clusters/{cid}/calibrations",
                   json={"source": "nccl-tests", "logs": [eight], "ranks": 16})
        assert r.status_code == 422
        assert r.json()["detail"] == ("logs.0: ranks 16 given, but the log's '#  Rank' lines "
                                      "show 8")
        r = c.post(f"/v1/clusters/{cid}/calibrations",
                   json={"source": "nccl-tests", "logs": [text], "ranks": 0})
        assert r.status_code == 422 and "ranks" in r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        r = c.post(f"/v1/clusters/{cid}/calibrations",
                   json={"source": "samples", "samples": [], "nodes": 2})
        assert r.status_code == 422 and "nodes" in r.text and "nccl-tests" in r.text
        assert c.get(f"/v1/clusters/{cid}/calibrations").json()["count"] == 1
