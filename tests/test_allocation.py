"""Fragmented allocations: the cluster forms, the search over the allocation's uniform slices
against brute force, the placement, and the launch files that follow it."""

import random
import re
import shlex

import pytest
from pydantic import ValidationError

from planner.cost import estimate
from planner.launch import render, with_launch
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.allocation import uniform_clusters
from planner.specs.plan import plan_key
from tests.search_oracle import enumerate_top_k
from tests.test_search import random_request

GIB = 2**30


@pytest.mark.parametrize("cluster,words", [
    ({"free_gpus_per_node": [8, 9]}, "free_gpus_per_node[1] = 9 is not in [0, gpus_per_node(8)]"),
    ({"free_gpus": [{"name": "a", "gpus": [0, 0]}]}, "distinct indices"),
    ({"free_gpus": [{"name": "a", "gpus": [8]}]}, "distinct indices in [0, gpus_per_node(8))"),
    ({"free_gpus": [{"name": "a", "gpus": [0]}, {"name": "a", "gpus": [1]}]},
     "names in free_gpus must be distinct"),
    ({"free_gpus_per_node": [8], "free_gpus": [{"gpus": [0]}]}, "not both"),
    ({"free_gpus_per_node": [0, 0]}, "no free GPU"),
    ({"num_nodes": 3, "free_gpus_per_node": [8, 8]}, "lists 2 nodes; num_nodes is 3"),
])
def test_allocation_forms_are_checked(cluster, words):
    with pytest.raises(ValidationError, match=re.escape(words)):
        ClusterSpec.model_validate({"preset": "dgx-h100", **cluster})


def test_slices_hold_the_nodes_with_enough_free_gpus():
    c = ClusterSpec.model_validate({"preset": "dgx-h100",
                                    "free_gpus_per_node": [8, 8, 8, 6, 4, 2]})
    parts = {p.gpus_per_node: (p.nodes, p.cluster.num_gpus) for p in uniform_clusters(c)}
    assert parts[8] == ((0, 1, 2), 24) and parts[6] == ((0, 1, 2, 3), 24)
    assert parts[4] == ((0, 1, 2, 3, 4), 20) and parts[2] == ((0, 1, 2, 3, 4, 5), 12)
    assert set(parts) == set(range(1, 9))


def random_allocation_request(seed: int) -> PlanRequest:
    rng = random.Random(seed)
    body = random_request(rng).model_dump(mode="json")
    G = rng.choice([2, 4])
    body["cluster"].pop("num_nodes")
    body["cluster"]["gpus_per_node"] = G
    body["cluster"]["free_gpus_per_node"] = [rng.randint(0, G) for _ in range(rng.randint(1, 3))]
    if not any(body["cluster"]["free_gpus_per_node"]):
        body["cluster"]["free_gpus_per_node"][0] = G
    body["search"]["rebalance_stages"] = rng.random() < 0.5
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(40))
def test_allocation_search_equals_brute_force_over_its_slices(seed):
    req = random_allocation_request(seed)
    free = [len(n.gpus) for n in req.cluster.free_nodes]
    want = []
    for part in uniform_clusters(req.cluster):
        sub = req.model_copy(update={"cluster": part.cluster})
        want += [(round(t * 1e6), round(m), key, -part.gpus_per_node, t)
                 for key, t, m in enumerate_top_k(sub)]
    want.sort()
    want = want[:req.search.top_k]
    got = plan(req)
    if not want:
        assert got.search.status == "INFEASIBLE" and got.infeasible_reasons
        return
    assert got.search.status == "OPTIMAL"
    keys = [(plan_key(p), -p.placement.nproc_per_node) for p in got.plans]
    assert keys == [(w[2], w[3]) for w in want]
    for p, w in zip(got.plans, want, strict=True):
        assert p.step_time_s == pytest.approx(w[4], rel=1e-9)
        pl = p.placement
        # Every node used has the GPUs it is given free, the same number on each.
        assert pl.nnodes * pl.nproc_per_node == p.gpus_used
        assert all(len(n.local_gpus) == pl.nproc_per_node <= free[n.index] for n in pl.nodes)
        assert len({n.index for n in pl.nodes}) == pl.nnodes


def test_best_fit_leaves_the_larger_fragments_free_and_launch_files_follow():
    body = {"model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "free_gpus": [
                {"name": "big1", "gpus": list(range(8))}, {"name": "big2", "gpus": list(range(8))},
                {"name": "mid", "gpus": [2, 3, 4, 5, 6, 7]}, {"name": "odd", "gpus": [1, 3, 5, 7]}]},
            "training": {"global_batch_size": 64, "seq_length": 4096}}
    model, cluster = ModelSpec.from_preset("llama3-8b"), ClusterSpec.model_validate(body["cluster"])
    training = TrainingSpec(global_batch_size=64, seq_length=4096)
    # An estimate takes the most GPUs per node that place its ranks evenly: 8 ranks on one
    # full node, 16 on the two.
    est = estimate(model, cluster, training, ParallelPlan(dp=2, tp=4, zero_stage=1))
    assert est.placement.nproc_per_node == 8 and [n.name for n in est.placement.nodes] == ["big1"]
    est = estimate(model, cluster, training, ParallelPlan(dp=4, tp=4, zero_stage=1))
    assert [n.name for n in est.placement.nodes] == ["big1", "big2"]
    # Four nodes of 4: the odd node's GPUs 1, 3, 5, 7 and the lowest four elsewhere.
    res = plan(PlanRequest.model_validate({**body, "search": {"tp": 4, "dp": 4, "pp": 1,
                                                              "cp": 1, "top_k": 20}}))
    four_per_node = [p for p in res.plans if p.placement.nproc_per_node == 4]
    assert four_per_node
    p = four_per_node[0]
    by_name = {n.name: n.local_gpus for n in p.placement.nodes}
    assert by_name == {"big1": [0, 1, 2, 3], "big2": [0, 1, 2, 3], "mid": [2, 3, 4, 5],
                       "odd": [1, 3, 5, 7]}
    launched = with_launch(p, model, cluster, training)
    script = render(launched.launch, "torchrun")
    lines = [ln for ln in script.splitlines() if not ln.startswith("#")]
    assert len(lines) == 4
    for rank, (line, node) in enumerate(zip(lines, p.placement.nodes, strict=True)):
        env, *argv = shlex.split(line)
        assert env == "CUDA_VISIBLE_DEVICES=" + ",".join(map(str, node.local_gpus))
        assert f"--node-rank={rank}" in argv and "--nproc-per-node=4" in argv
        assert "--nnodes=4" in argv and "--rdzv-endpoint=big1:29500" in argv
    assert render(launched.launch, "hostfile") == (
        "big1 slots=4\nbig2 slots=4\nmid slots=4\nodd slots=4\n")
    sbatch = render(launched.launch, "sbatch")
    assert "#SBATCH --nodelist=big1,big2,mid,odd" in sbatch and "--exclusive" not in sbatch
    assert "#SBATCH --gpus-per-node=4" in sbatch
    assert "kubernetes.io/hostname" in render(launched.launch, "kubernetes")


def test_a_plan_that_does_not_fit_the_allocation_evenly_is_refused():
    from planner.errors import PlannerInputError

    cluster = ClusterSpec.model_validate({"preset": "dgx-h100", "free_gpus_per_node": [4, 2]})
    with pytest.raises(PlannerInputError, match="do not fit the allocation evenly"):
        estimate(ModelSpec.from_preset("llama3-8b"), cluster,
                 TrainingSpec(global_batch_size=60, seq_length=4096), ParallelPlan(dp=6))
