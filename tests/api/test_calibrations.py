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
