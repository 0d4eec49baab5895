"""Bad input gets a 4xx application/problem+json answer naming the problem; never a 5xx."""

import json

import pytest

from api.live import live_server

OK = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
      "training": {"global_batch_size": 64, "seq_length": 4096}}
EST = {**OK, "plan": {"dp": 8}}


def with_(body, path, value):
    body = json.loads(json.dumps(body))
    *head, last = path
    node = body
    for key in head:
        node = node[key]
    node[last] = value
    return body


CASES = [
    # (method, url, json body, expected status, text the detail must contain)
    ("POST", "/v1/plans", with_(OK, ["model", "num_layers"], "eighty"), 422, "model.num_layers"),
    ("POST", "/v1/plans", with_(OK, ["training", "seq_length"], -1), 422, "training.seq_length"),
    ("POST", "/v1/plans", with_(OK, ["training", "global_batch_size"], 10**30), 422,
     "training.global_batch_size"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "num_nodes"], 10**9), 422, "cluster.num_nodes"),
    ("POST", "/v1/plans", with_(OK, ["model", "preset"], "gpt-17"), 422, "unknown preset"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "gpu"], "tpu-v9"), 422, "unknown preset"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"top_k": 0}), 422, "search.top_k"),
    ("POST", "/v1/plans", with_(OK, ["training", "ring_attention"], "a2a+p2p"), 422,
     "training.cp_a2a_size: ring_attention 'a2a+p2p' needs cp_a2a_size"),
    ("POST", "/v1/plans", with_(OK, ["training", "cp_a2a_size"], 1), 422,
     "training.cp_a2a_size"),
    ("POST", "/v1/estimates", {**OK, "plan": {"dp": 4, "cp": 2},
                               "training": {**OK["training"], "ring_attention": "a2a+p2p",
                                            "cp_a2a_size": 4}}, 422,
     "cp(2) must be a multiple of 4"),
    ("POST", "/v1/plans", with_(OK, ["training", "tp_comm_overlap"], "userbuffers"), 422,
     "training.tp_comm_overlap"),
    ("POST", "/v1/plans", with_(OK, ["training", "tp_comm_overlap"], 0.8), 422,
     "training.tp_comm_overlap"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"tp": {"min": 8, "max": 2}}), 422,
     "min(8) > max(2)"),
    ("POST", "/v1/plans", with_(OK, ["surprise"], 1), 422, "surprise"),
    # A framework name that is not a string reaches the framework's implied training switches
    # before validation names it.
    ("POST", "/v1/plans", with_(OK, ["search"], {"framework": ["torchtitan"]}), 422,
     "search.framework"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"framework": {"x": 1}}), 422,
     "search.framework"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"ep": [2, -3]}), 422, "search.ep: -3 is negative"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"tp": -8}), 422, "search.tp"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "free_gpus_per_node"], [-1]), 422,
     "cluster.free_gpus_per_node.0: Input should be greater than or equal to 0"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "free_gpus_per_node"], [10**12]), 422,
     "cluster.free_gpus_per_node.0: Input should be less than or equal to 1024"),
    ("POST", "/v1/plans", [1, 2, 3], 422, "(body)"),
    ("POST", "/v1/plans", with_(OK, ["cluster"], {"preset": "gb200-nvl72", "num_nodes": 1,
                                                  "gpus_per_host": 5}), 422,
     "gpus_per_host (5) must divide gpus_per_node (72)"),
    ("POST", "/v1/plans", with_(OK, ["cluster"], {"id": "cl-missing"}), 422, "cluster.id"),
    ("POST", "/v1/plans", with_(OK, ["model"], {"hf_config": {"model_type": "mamba"}}), 422,
     "lacks required keys"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "gpu"], {"preset": "h100-sxm",
                                                        "memory_bandwidth_gb_per_s": 0}), 422,
     "memory_bandwidth_gb_per_s"),
    ("POST", "/v1/estimates", with_(EST, ["plan", "tp"], 16), 422,
     "dp(8) * tp(16) * pp(1) * cp(1) = 128 > GPUs(8)"),
    ("POST", "/v1/estimates", with_(EST, ["plan", "dp"], 0), 422, "plan.dp"),
    ("POST", "/v1/estimates", with_(EST, ["plan", "cpu_offload_layers"], 4), 422,
     "plan.cpu_offload_layers: CPU offloading needs the bandwidth between a GPU and host "
     "memory"),
    ("POST", "/v1/estimates", with_(EST, ["training", "recompute_modules"], ["moe_act"]), 422,
     "training.recompute_modules: moe_act needs a mixture-of-experts model"),
    ("POST", "/v1/plans", with_(OK, ["training", "recompute_modules"], ["mlp", "mlp"]), 422,
     "training.recompute_modules: mlp listed more than once"),
    ("POST", "/v1/estimates", with_(with_(EST, ["model", "preset"], "mixtral-8x7b"),
                                    ["training", "selective_recompute"], "per_op"), 422,
     "training.selective_recompute: 'per_op' is costed for dense layers"),
    ("POST", "/v1/estimates", {**EST, "efficiency": {"view_call_us": -1}}, 422,
     "efficiency.view_call_us"),
    ("POST", "/v1/estimates", with_(EST, ["training", "zero3_max_reuse_params"], 0), 422,
     "training.zero3_max_reuse_params"),
    ("POST", "/v1/estimates", with_(with_(EST, ["model", "preset"], "mixtral-8x7b"),
                                    ["training", "zero3_max_reuse_params"], 1e9), 422,
     "training.zero3_max_reuse_params: DeepSpeed's reuse distance is costed for dense models"),
    ("POST", "/v1/estimates", with_(EST, ["training", "precision"], "fp6"), 422,
     "training.precision"),
    # NVFP4 needs an fp4 peak: not on H100 (EST's cluster).
    ("POST", "/v1/estimates", with_(EST, ["training", "precision"], "fp4"), 422,
     "training.precision: GPU 'h100-sxm' has no fp4 peak"),
    ("POST", "/v1/estimates", with_(with_(EST, ["cluster", "gpu"], "v100-32gb"),
                                    ["training", "precision"], "bf16"), 422, "no bf16 peak"),
    ("POST", "/v1/plans", with_(OK, ["training", "attention_kernel"], "flash_triton"), 422,
     "training.attention_kernel: GPU 'h100-sxm' has no rate for attention kernel"),
    # A search on GPUs without the training's precision (V100 has no bf16), on one cluster or
    # on one of its pools.
    ("POST", "/v1/plans", with_(OK, ["cluster"], {"preset": "dgx-2", "num_nodes": 1}), 422,
     "training.precision: GPU 'v100-32gb' has no bf16 peak; it supports fp32, fp16"),
    ("POST", "/v1/plans", with_(OK, ["cluster"], {"pools": [
        {"preset": "dgx-h100", "num_nodes": 1}, {"preset": "dgx-1", "num_nodes": 1}]}), 422,
     "training.precision: GPU 'v100-32gb' has no bf16 peak"),
    ("POST", "/v1/plans", with_(with_(OK, ["cluster"], {"preset": "dgx-a100", "num_nodes": 1}),
                                ["training", "precision"], "fp8"), 422,
     "training.precision: GPU 'a100-80gb' has no fp8 peak"),
    ("POST", "/v1/plans", with_(OK, ["training", "fp8_param_gather"], True), 422,
     "fp8_param_gather needs precision fp8 (got bf16)"),
    # MXFP8 needs Blackwell's block-scaled tensor cores: not on H100 (OK's cluster).
    ("POST", "/v1/plans", with_(with_(OK, ["training", "precision"], "fp8"),
                                ["training", "fp8_recipe"], "mxfp8"), 422,
     "training.fp8_recipe: GPU 'h100-sxm' has no block-scaled fp8 tensor cores"),
    ("POST", "/v1/clusters", {"preset": "dgx-h100", "num_nodes": 0}, 422, "num_nodes"),
    ("POST", "/v1/clusters", {"preset": "dgx-h100", "num_nodes": 2,
                              "inter_node": {"nvls_busbw_ratio": 1.3}}, 422,
     "inter_node.nvls_busbw_ratio: NVLink SHARP reduces inside an NVSwitch node"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "intra_node"], {"kind": "nvlink"}), 422,
     "intra_node.nvls_busbw_ratio needs NVSwitch"),
    ("POST", "/v1/plans", with_(OK, ["cluster", "intra_node"], {"nvls_busbw_ratio": 0}), 422,
     "nvls_busbw_ratio"),
    ("POST", "/v1/jobs", {"kind": "sleep", "request": OK}, 422, "kind"),
    ("POST", "/v1/jobs", {"kind": "plan", "request": {**OK, "validation": {}}}, 422,
     "request.validation"),
    ("POST", "/v1/plans", {**OK, "validation": {"nproc": 99}}, 422, "validation.nproc"),
    ("POST", "/v1/plans", {**OK, "validation": {"mode": "most"}}, 422, "validation.mode"),
    ("POST", "/v1/jobs", {"kind": "plan", "request": with_(OK, ["cluster"], {"id": "cl-x"})},
     422, "cluster.id"),
    ("GET", "/v1/plans/plan-0000", None, 404, "plan-0000"),
    ("GET", "/v1/clusters/nope", None, 404, "nope"),
    ("GET", "/v1/jobs/nope", None, 404, "nope"),
    ("DELETE", "/v1/clusters/nope", None, 404, "nope"),
    ("GET", "/v1/plans?limit=0", None, 422, "limit"),
    ("POST", "/v1/estimates", with_(EST, ["plan", "dp_replicate"], 3), 422,
     "dp_replicate(3) must divide dp(8)"),
    ("POST", "/v1/estimates", with_(EST, ["plan", "dp_replicate"], 2), 422,
     "needs zero_stage >= 1"),
    ("POST", "/v1/plans", with_(OK, ["search"], {"dp_replicate": -2}), 422,
     "search.dp_replicate"),
    ("GET", "/v1/plans?limit=abc", None, 422, "limit"),
    ("GET", "/v1/jobs?state=exploded", None, 422, "state"),
    ("GET", "/v1/nothing-here", None, 404, None),
]


@pytest.mark.parametrize("method,url,body,status,text", CASES,
                         ids=[f"{c[0]} {c[1]} {c[4]}" for c in CASES])
def test_bad_input_gets_a_problem(shared_server, method, url, body, status, text):
    with shared_server.client() as c:
        r = c.request(method, url, json=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["status"] == status and problem["title"]
    if text:
        assert text in problem["detail"], problem


def test_malformed_json_and_wrong_media(shared_server):
    with shared_server.client() as c:
        r = c.post("/v1/plans", content=b'{"model": ', headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["type"] == "/problems/malformed-json"
        r = c.post("/v1/estimates", content=b"model=llama", headers={"content-type": "text/plain"})
        assert 400 <= r.status_code < 500
        assert r.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("method,url,allowed", [
    ("PUT", "/v1/plans", "GET, POST"), ("DELETE", "/v1/clusters", "GET, POST"),
    ("PATCH", "/v1/jobs", "GET, POST"), ("PUT", "/v1/jobs/job-x", "DELETE, GET"),
    ("PUT", "/v1/clusters/cl-x/calibrations", "GET, POST"),
])
def test_405_lists_every_method_of_the_path(shared_server, method, url, allowed):
    with shared_server.client() as c:
        r = c.request(method, url)
    assert r.status_code == 405 and r.headers["allow"] == allowed
    assert r.headers["content-type"] == "application/problem+json"
    assert allowed in r.json()["detail"]


def test_oversized_bodies_get_413(shared_server):
    big = b'{"model": {"name": "' + b"x" * 10_000_000 + b'"}}'
    with shared_server.client() as c:
        r = c.post("/v1/plans", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"

        def chunks():                       # no Content-Length: counted while streaming
            for _ in range(40):
                yield b" " * 262_144

        r = c.post("/v1/estimates", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        # The service is unharmed.
        assert c.get("/healthz").status_code == 200


def test_nothing_stored_is_lost_or_changed_by_bad_input(shared_server):
    with shared_server.client() as c:
        before = c.get("/v1/plans").json()
        c.post("/v1/plans", json=with_(OK, ["training", "seq_length"], -5))
        c.post("/v1/plans", content=b"{{{", headers={"content-type": "application/json"})
        assert c.get("/v1/plans").json() == before


def test_token_protects_writes_but_not_reads(tmp_path):
    env = {"PLANNER_API_TOKEN": "s3cret"}
    with live_server(f"sqlite:///{tmp_path / 'auth.db'}", env=env) as srv, srv.client() as c:
        r = c.post("/v1/plans", json=OK)
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert c.post("/v1/plans", json=OK,
                      headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = c.post("/v1/plans", json=OK, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 201
        assert c.get(r.headers["location"]).status_code == 200      # reads stay open
        assert c.delete("/v1/clusters/x").status_code == 401
        assert c.get("/v1/presets/models").status_code == 200
    env["PLANNER_PROTECT_READS"] = "true"
    with live_server(f"sqlite:///{tmp_path / 'auth2.db'}", env=env) as srv, srv.client() as c:
        assert c.get("/v1/plans").status_code == 401
        assert c.get("/v1/plans", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/healthz").status_code == 200                # probes stay open


def test_sweeps_are_bounded_and_can_be_switched_off(shared_server):
    with shared_server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "local-cpu"}).json()["id"]
        url = f"/v1/clusters/{cid}/calibrations"
        r = c.post(url, json={"source": "sweep", "sweep": {"sizes": [4096, 8192, 2**29]}})
        assert r.status_code == 422 and "64 MiB" in r.json()["detail"]
        r = c.post(url, json={"source": "sweep", "sweep": {"nproc": 64}})
        assert r.status_code == 422 and "sweep.nproc" in r.json()["detail"]
        r = c.post(url, json={"source": "sweep"})
        assert r.status_code == 403 and "PLANNER_ALLOW_LOCAL_SWEEPS" in r.json()["detail"]


def test_a_stored_clusters_gpu_is_checked_against_the_attention_kernel(shared_server):
    """A cluster given by id is resolved after the body is validated; its GPU is then held to
    the same rule as one given in full: no figure for the named kernel, a 422 naming it."""
    with shared_server.client() as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "num_nodes": 1}).json()["id"]
        body = with_(with_(OK, ["cluster"], {"id": cid}), ["training", "attention_kernel"],
                     "flash_triton")
        for url, payload in (("/v1/plans", body), ("/v1/estimates", {**body, "plan": {"dp": 8}})):
            r = c.post(url, json=payload)
            assert r.status_code == 422, r.text
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["detail"].startswith("training.attention_kernel: GPU 'h100-sxm'")
        body["training"]["attention_kernel"] = "flash2"            # a kernel it has a rate for
        assert c.post("/v1/estimates", json={**body, "plan": {"dp": 8}}).status_code == 200
        # and to the training's precision: a stored DGX-2 (V100) has no bf16.
        v100 = c.post("/v1/clusters", json={"preset": "dgx-2", "num_nodes": 1}).json()["id"]
        body = with_(OK, ["cluster"], {"id": v100})
        for url, payload in (("/v1/plans", body), ("/v1/estimates", {**body, "plan": {"dp": 16}})):
            r = c.post(url, json=payload)
            assert r.status_code == 422, r.text
            assert r.json()["detail"].startswith("training.precision: GPU 'v100-32gb' has no bf16")
        body["training"]["precision"] = "fp16"
        assert c.post("/v1/estimates", json={**body, "plan": {"dp": 16}}).status_code == 200
