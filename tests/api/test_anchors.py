"""POST /v1/anchors over the live service: a fit from measured steps, problem+json for bad
input, and the fit taken up by an estimate."""

import json
from pathlib import Path

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples"
                      / "anchor-llama3.1-8b.json").read_text())


def test_anchor_then_estimate_with_the_fit(shared_server):
    with shared_server.client() as c:
        r = c.post("/v1/anchors", json=EXAMPLE)
        assert r.status_code == 200, r.text
        fit = r.json()
        (run,) = fit["runs"]
        assert abs(run["anchored_error_pct"]) < 0.05 and fit["efficiency"] == {
            "compute_scale": fit["compute_scale"]}
        one = {k: v for k, v in EXAMPLE["runs"][0].items()
               if k not in ("name", "measured_step_time_s")}
        est = c.post("/v1/estimates", json={**one, "efficiency": fit["efficiency"]}).json()
        assert abs(est["step_time_s"] - run["measured_step_time_s"]) < 0.01 * est["step_time_s"]
        # The OpenAPI example is the same published run.
        spec = c.get("/openapi.json").json()
        body = spec["paths"]["/v1/anchors"]["post"]["requestBody"]["content"][
            "application/json"]["examples"]["one-run"]["value"]
        assert c.post("/v1/anchors", json=body).json()["compute_scale"] == fit["compute_scale"]


def test_bad_anchor_requests_are_problems_naming_the_field(shared_server):
    run = EXAMPLE["runs"][0]
    cases = [({"runs": []}, "runs"),
             ({"runs": [{**run, "measured_step_time_s": -1}]}, "runs.0.measured_step_time_s"),
             ({"runs": [run, {**run, "plan": {**run["plan"], "dp": 3}}]}, "runs.1."),
             ({"runs": [run] * 33}, "runs"),
             ({"runs": [{**run, "extra": 1}]}, "runs.0.extra"),
             ({"runs": [run], "network": "fit"}, "network: fitting the network's speed"),
             ({"runs": [run], "network": "yes"}, "network")]
    with shared_server.client() as c:
        for body, field in cases:
            r = c.post("/v1/anchors", json=body)
            assert r.status_code == 422, (body, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["detail"].startswith(field), r.json()


def test_an_anchor_stored_on_a_cluster_anchors_its_plans_and_estimates(server):
    """POST /v1/clusters/{id}/calibrations with source 'anchor': the stack's speeds fitted to
    measured runs (a run without a cluster ran on the stored one), stored beside the
    cluster's collective calibration; estimates and plans on the cluster take them unless
    they set their own, and a request that does is answered with its own."""
    from tests.nccl_logs import make_log

    run = {k: v for k, v in EXAMPLE["runs"][0].items() if k != "cluster"}
    one = {k: v for k, v in run.items() if k not in ("name", "measured_step_time_s")}
    with server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "name": "lab",
                                           "num_nodes": 1}).json()["id"]
        before = c.post("/v1/estimates", json={**one, "cluster": {"id": cid}}).json()
        text, _, _ = make_log(op="all_reduce", ranks=8)
        fits = c.post(f"/v1/clusters/{cid}/calibrations",
                      json={"source": "nccl-tests", "logs": [text]}).json()
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "anchor", "runs": [run]})
        assert r.status_code == 201, r.text
        cal = r.json()
        assert r.headers["location"] == f"/v1/calibrations/{cal['id']}"
        assert (cal["source"], cal["fits"], cal["network_scale"]) == ("anchor", [], None)
        assert abs(cal["runs"][0]["anchored_error_pct"]) < 0.05
        assert c.get(f"/v1/calibrations/{cal['id']}").json()["compute_scale"] == (
            cal["compute_scale"])
        after = c.post("/v1/estimates", json={**one, "cluster": {"id": cid}}).json()
        assert abs(after["step_time_s"] - run["measured_step_time_s"]) < 0.01 * 12.78
        assert after["step_time_band"]["model_class"] == "anchored"
        assert before["step_time_band"]["model_class"] == "dense"
        # The collective fits still apply beside the anchor (the newest of each kind): the TP
        # all_reduce of a tp 8 plan is costed from them.
        tp8 = c.post("/v1/estimates", json={**one, "cluster": {"id": cid}, "plan": {
            "dp": 1, "tp": 8, "micro_batch_size": 1}}).json()
        assert {x["source"] for x in tp8["communication"] if x["strategy"] == "TP"} == {
            fits["id"]}
        assert tp8["step_time_band"]["model_class"] == "anchored"
        # A request that sets its own speed keeps it.
        own = c.post("/v1/estimates", json={**one, "cluster": {"id": cid},
                                            "efficiency": {"compute_scale": 1.0}}).json()
        assert own["step_time_s"] == before["step_time_s"]
        plan = c.post("/v1/plans", json={"model": one["model"], "cluster": {"id": cid},
                                         "training": one["training"],
                                         "search": {"top_k": 1}}).json()
        assert plan["plans"][0]["step_time_band"]["model_class"] == "anchored"
        assert c.get(f"/v1/clusters/{cid}/calibrations").json()["count"] == 2
        # No runs, or a run the model refuses: 422 naming the field; nothing stored.
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "anchor"})
        assert r.status_code == 422 and r.json()["detail"].startswith("runs: required")
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={
            "source": "anchor", "runs": [{**run, "plan": {**run["plan"], "dp": 3}}]})
        assert r.status_code == 422 and r.json()["detail"].startswith("runs.0."), r.text
        assert c.get(f"/v1/clusters/{cid}/calibrations").json()["count"] == 2


def test_anchors_per_stack_on_one_cluster(server):
    """Two stacks on one cluster keep an anchor each: a request naming a stack is costed with
    that stack's speeds, one naming none with the anchor stored without a stack (or the model
    as it stands), one naming a stack the cluster has no anchor of is a 422 listing those it
    has; a stack on a calibration that is not an anchor is refused, nothing stored."""
    run = {k: v for k, v in EXAMPLE["runs"][0].items() if k != "cluster"}
    one = {k: v for k, v in run.items() if k not in ("name", "measured_step_time_s")}
    slow = {**run, "measured_step_time_s": 1.25 * run["measured_step_time_s"]}
    with server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "name": "lab",
                                           "num_nodes": 1}).json()["id"]

        def est(**ref):
            r = c.post("/v1/estimates", json={**one, "cluster": {"id": cid, **ref}})
            return r.status_code, r.json()

        model = est()[1]["step_time_s"]
        fast = c.post(f"/v1/clusters/{cid}/calibrations",
                      json={"source": "anchor", "stack": "megatron-core 0.14", "runs": [run]})
        titan = c.post(f"/v1/clusters/{cid}/calibrations",
                       json={"source": "anchor", "stack": "torchtitan 0.2", "runs": [slow]})
        assert fast.status_code == titan.status_code == 201, titan.text
        assert (fast.json()["stack"], titan.json()["stack"]) == (
            "megatron-core 0.14", "torchtitan 0.2")
        assert titan.json()["compute_scale"] < fast.json()["compute_scale"]
        for stack, measured, cal in (("megatron-core 0.14", run["measured_step_time_s"], fast),
                                     ("torchtitan 0.2", slow["measured_step_time_s"], titan)):
            status, body = est(stack=stack)
            assert status == 200 and body["step_time_band"]["model_class"] == "anchored"
            assert abs(body["step_time_s"] - measured) < 0.01 * measured, stack
            assert body["step_time_band"]["anchor"] == cal.json()["id"]   # the provenance
        # No stack named, and no anchor stored without one: the model as it stands.
        status, body = est()
        assert status == 200 and body["step_time_s"] == model
        assert body["step_time_band"]["model_class"] == "dense"
        assert body["step_time_band"]["anchor"] is None
        c.post(f"/v1/clusters/{cid}/calibrations", json={"source": "anchor", "runs": [slow]})
        assert abs(est()[1]["step_time_s"] - slow["measured_step_time_s"]) < 0.13
        # A plan names its stack the same way, and is stored apart from the other stack's.
        plans = [c.post("/v1/plans", json={
            "model": one["model"], "cluster": {"id": cid, "stack": s},
            "training": one["training"], "search": {"top_k": 1}}) for s in (
            "megatron-core 0.14", "torchtitan 0.2")]
        assert [p.status_code for p in plans] == [201, 201]
        best = [p.json()["plans"][0]["step_time_s"] for p in plans]
        assert best[0] < best[1] and plans[0].json()["id"] != plans[1].json()["id"]
        assert [p.json()["plans"][0]["step_time_band"]["anchor"] for p in plans] == [
            fast.json()["id"], titan.json()["id"]]
        # Unknown stack: 422 naming cluster.stack and the stacks held.
        status, body = est(stack="deepspeed")
        assert status == 422 and body["detail"].startswith("cluster.stack: "), body
        assert "'megatron-core 0.14', 'torchtitan 0.2'" in body["detail"]
        r = c.post("/v1/plans", json={"model": one["model"], "training": one["training"],
                                      "cluster": {"id": cid, "stack": "deepspeed"}})
        assert r.status_code == 422 and r.json()["detail"].startswith("cluster.stack: ")
        # The cluster's anchors of one stack, and of one kind.
        listed = c.get(f"/v1/clusters/{cid}/calibrations", params={"stack": "torchtitan 0.2"})
        assert [x["id"] for x in listed.json()["data"]] == [titan.json()["id"]]
        listed = c.get(f"/v1/clusters/{cid}/calibrations", params={"source": "anchor"}).json()
        assert listed["count"] == 3 and {x["source"] for x in listed["data"]} == {"anchor"}
        assert c.get(f"/v1/clusters/{cid}/calibrations",
                     params={"source": "nccl-tests"}).json()["count"] == 0
        r = c.get(f"/v1/clusters/{cid}/calibrations", params={"source": "logs"})
        assert r.status_code == 422 and r.json()["detail"].startswith("query.source")
        # Bad stack names and a stack on collectives: 422, nothing stored.
        count = c.get(f"/v1/clusters/{cid}/calibrations").json()["count"]
        for body, field in (({"source": "anchor", "stack": "", "runs": [run]}, "stack"),
                            ({"source": "anchor", "stack": "x" * 65, "runs": [run]}, "stack"),
                            ({"source": "anchor", "stack": "a\nb", "runs": [run]}, "stack"),
                            ({"source": "samples", "stack": "megatron-core 0.14", "samples": [
                                {"op": "all_reduce", "group_size": 8, "message_bytes": 1 << 20,
                                 "time_us": 31.0}]}, "stack")):
            r = c.post(f"/v1/clusters/{cid}/calibrations", json=body)
            assert r.status_code == 422, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["detail"].startswith(field), r.json()
        assert c.get(f"/v1/clusters/{cid}/calibrations").json()["count"] == count
        status, body = est(stack="")
        assert status == 422 and body["detail"].startswith("cluster.stack"), body


def test_runs_read_from_megatron_logs(server):
    """A run may be rank 0's Megatron-LM log and the cluster it ran on (the OpenAPI example):
    fitted as the run it holds, stored on a cluster as any anchor; a log the reader refuses is
    a 422 naming the run's megatron_log and the argument."""
    log = (Path(__file__).resolve().parents[1] / "data" / "megatron"
           / "llama3-8b-fp8-tp2-cp2.log").read_text()
    with server.client() as c:
        spec = c.get("/openapi.json").json()
        example = spec["paths"]["/v1/anchors"]["post"]["requestBody"]["content"][
            "application/json"]["examples"]["megatron-log"]["value"]
        r = c.post("/v1/anchors", json=example)
        assert r.status_code == 200, r.text
        assert abs(r.json()["runs"][0]["anchored_error_pct"]) < 0.05
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "name": "lab",
                                           "num_nodes": 4}).json()["id"]
        r = c.post(f"/v1/clusters/{cid}/calibrations", json={
            "source": "anchor", "stack": "megatron-lm", "runs": [{"megatron_log": log}]})
        assert r.status_code == 201, r.text
        cal = r.json()
        assert cal["runs"][0]["measured_step_time_s"] == 3.1204
        assert 0.67 < cal["compute_scale"] < 1.5
        bad = log.replace("fp8_recipe ...................................... delayed",
                          "fp8_recipe ...................................... custom")
        assert bad != log
        r = c.post("/v1/anchors", json={"runs": [{"megatron_log": bad,
                                                  "cluster": {"preset": "dgx-h100"}}]})
        assert r.status_code == 422
        assert r.json()["detail"].startswith(
            "runs.0.megatron_log: log.fp8_recipe: the fp8 recipe 'custom'"), r.json()
        # An MXFP8 run read on H100s: refused for the GPU, which has no block-scaled cores.
        mx = log.replace("fp8_recipe ...................................... delayed",
                         "fp8_recipe ...................................... mxfp8")
        r = c.post("/v1/anchors", json={"runs": [{"megatron_log": mx,
                                                  "cluster": {"preset": "dgx-h100"}}]})
        assert r.status_code == 422
        assert r.json()["detail"].startswith(
            "runs.0.megatron_log: training.fp8_recipe: GPU 'h100-sxm' has no block-scaled"), r.text
        r = c.post("/v1/anchors", json={"runs": [{"megatron_log": log}]})
        assert r.status_code == 422 and r.json()["detail"].startswith("runs.0.cluster"), r.text


def test_runs_read_from_a_torchtitan_config_and_log(shared_server):
    """A torchtitan run given as its job config and log: fitted as the run they hold; a config
    the reader refuses is a 422 naming the run's torchtitan_config and the key."""
    data = Path(__file__).resolve().parents[1] / "data" / "torchtitan"
    config, log = ((data / f"llama3-8b-8gpu.{x}").read_text() for x in ("toml", "log"))
    run = {"torchtitan_config": config, "torchtitan_log": log, "cluster": {"preset": "dgx-h100"}}
    with shared_server.client() as c:
        r = c.post("/v1/anchors", json={"runs": [run]})
        assert r.status_code == 200, r.text
        assert r.json()["runs"][0]["name"] == "torchtitan log, 8 GPUs"
        assert abs(r.json()["runs"][0]["anchored_error_pct"]) < 0.05
        spec = c.get("/openapi.json").json()
        example = spec["paths"]["/v1/anchors"]["post"]["requestBody"]["content"][
            "application/json"]["examples"]["torchtitan"]["value"]
        r = c.post("/v1/anchors", json=example)
        assert r.status_code == 200 and 0.67 < r.json()["compute_scale"] < 1.5, r.text
        bad = {**run, "torchtitan_config": config.replace('"op"', '"2"')}
        r = c.post("/v1/anchors", json={"runs": [run, bad]})
        assert r.status_code == 422 and r.json()["detail"].startswith(
            "runs.1.torchtitan_config: config.activation_checkpoint.selective_ac_option"), r.text
