"""A scheduler's round trip with a cluster of pools: store it, plan on it by reference, read
each stage's pool and the launch files; what cannot be answered for pools says so."""

POOLS = {"name": "mixed-lab", "pools": [{"preset": "dgx-h100", "num_nodes": 1},
                                        {"preset": "dgx-a100", "num_nodes": 2}]}
SETUP = {"model": {"preset": "llama3-8b"},
         "training": {"global_batch_size": 64, "seq_length": 4096}}


def test_plan_on_stored_pools_and_launch_files(server):
    with server.client() as c:
        r = c.post("/v1/clusters", json=POOLS)
        assert r.status_code == 201, r.text
        cluster = r.json()
        assert [p["gpu"]["name"] for p in cluster["spec"]["pools"]] == ["h100-sxm", "a100-80gb"]
        r = c.post("/v1/plans", json={**SETUP, "cluster": {"id": cluster["id"]},
                                      "search": {"top_k": 3}})
        assert r.status_code == 201, r.text
        res = r.json()
        best = res["plans"][0]
        assert res["search"]["status"] in ("OPTIMAL", "FEASIBLE")
        pools_used = {s["pool"] for s in best["stages"]}
        assert pools_used == {0, 1}                      # H100 and A100 stages together
        assert [s["layers"] for s in best["stages"]] == best["layers_per_stage"]
        gpus = {s["gpu"] for s in best["stages"]}
        assert gpus == {"h100-sxm", "a100-80gb"}
        # The placement lists every node of both pools, in pipeline order.
        nodes = [n["index"] for n in best["placement"]["nodes"]]
        assert sorted(nodes) == [0, 1, 2]
        hostfile = c.get(f"/v1/plans/{res['id']}/launch/hostfile")
        assert hostfile.status_code == 200 and hostfile.text.count("slots=8") == 3
        args = c.get(f"/v1/plans/{res['id']}/launch/megatron").text
        assert "--pipeline-model-parallel-size" in args
        # Node rank r must run on the node the placement names: per-node torchrun commands,
        # no sbatch or JobSet (they would put node ranks on nodes of any pool).
        torchrun = c.get(f"/v1/plans/{res['id']}/launch/torchrun").text
        assert torchrun.count("--node-rank=") == 3
        for fmt in ("sbatch", "kubernetes"):
            refused = c.get(f"/v1/plans/{res['id']}/launch/{fmt}")
            assert refused.status_code == 409 and "cluster of pools" in refused.text
        trace = c.get(f"/v1/plans/{res['id']}/trace")
        assert trace.status_code == 409
        assert trace.headers["content-type"].startswith("application/problem+json")
        assert "pipeline over pools" in trace.json()["detail"]
        val = c.post(f"/v1/plans/{res['id']}/validations", json={"top_k": 1, "nproc": 2})
        assert val.status_code == 409 and "over pools" in val.json()["detail"]
        est = c.post("/v1/estimates", json={**SETUP, "cluster": POOLS,
                                            "plan": {"dp": 4, "pp": 6}})
        assert est.status_code == 422
        assert "cluster.pools" in est.text and "one pool" in est.text
        bad = c.post("/v1/clusters", json={"pools": [{"preset": "dgx-h100", "num_nodes": 0}]})
        assert bad.status_code == 422
        assert "pools[0].num_nodes" in bad.json()["detail"]
