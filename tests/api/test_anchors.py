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
