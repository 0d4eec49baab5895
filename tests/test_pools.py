"""Clusters of pools (GPUs of different types): the cluster form, the exact layer split of a
pipeline over pools against brute force, the search against brute force over every uniform
plan, order of pools and layer split, and never worse than a pool alone."""

import itertools
import re

import numpy as np
import pytest
from pydantic import ValidationError

from planner.cost import estimate
from planner.cost.batch import PlanArrays
from planner.cost.caveats import MEASURED_OVER_PREDICTED
from planner.cost.mixed import best_layers, mixed_cost
from planner.cost.tables import cost_tables
from planner.errors import PlannerInputError
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ParallelPlan, plan_violations

H100_A100 = {"pools": [{"preset": "dgx-h100", "num_nodes": 2},
                       {"preset": "dgx-a100", "num_nodes": 4}]}


def test_a_cluster_of_pools_takes_its_first_pools_fields_and_the_sum_of_nodes():
    c = ClusterSpec.model_validate(H100_A100)
    assert c.num_nodes == 6 and c.num_gpus == 48 and c.gpu.name == "h100-sxm"
    assert [p.gpu.name for p in c.pools] == ["h100-sxm", "a100-80gb"]
    assert ClusterSpec.model_validate(c.model_dump(mode="json")) == c     # stored and read
    mixed = ClusterSpec.model_validate({"pools": [
        {"preset": "dgx-h100", "num_nodes": 1}, {"preset": "dgx-a100", "num_nodes": 2,
                                                  "gpus_per_node": 4}]})
    assert mixed.num_gpus == 16


@pytest.mark.parametrize("cluster,words", [
    ({"preset": "dgx-h100", "pools": [{"preset": "dgx-a100", "num_nodes": 1}]},
     "give pools or a preset, not both"),
    ({"gpu": "a100-40gb", "pools": [{"preset": "dgx-a100", "num_nodes": 1}]},
     "takes its gpu, gpus_per_node and links from its first pool"),
    ({"pools": [{"preset": "dgx-a100", "num_nodes": 1,
                 "pools": [{"preset": "dgx-a100", "num_nodes": 1}]}]},
     "pools[0]: give pools or a preset, not both"),
    ({"pools": [{"preset": "dgx-h100", "num_nodes": 2}, {"preset": "dgx-a100", "num_nodes": 0}]},
     "pools[1].num_nodes: Input should be greater than or equal to 1"),
    ({"pools": [{"preset": "dgx-a100", "num_nodes": 2, "free_gpus_per_node": [8, 4]}]},
     "a pool is plain nodes"),
    ({"pools": [{"preset": "dgx-a100", "num_nodes": 1}], "num_nodes": 3},
     "num_nodes (3) must be the pools' total (1)"),
])
def test_pool_forms_are_checked(cluster, words):
    with pytest.raises(ValidationError, match=re.escape(words)):
        ClusterSpec.model_validate(cluster)


def test_the_layer_split_is_the_brute_force_optimum():
    rng = np.random.default_rng(7)
    for _ in range(200):
        P = int(rng.integers(1, 5))
        L = int(rng.integers(P, 11))
        m = int(rng.integers(1, 9))
        layer = rng.choice([1.0, 1.6, 2.9], P)
        fixed = rng.uniform(0, 3, P)
        room = rng.integers(1, L + 1, P).astype(float)
        best = None
        for n in itertools.product(*[range(1, int(r) + 1) for r in room]):
            if sum(n) == L:
                t = np.array(n) * layer + fixed
                v = (m - 1) * t.max() + t.sum()
                best = v if best is None else min(best, v)
        got = best_layers(layer, fixed, room, L, m)
        if best is None:
            assert got is None
        else:
            assert got is not None and got[0] == pytest.approx(best, rel=1e-12)
            assert got[1].sum() == L and (got[1] >= 1).all() and (got[1] <= room).all()


TINY = {"name": "tiny", "num_layers": 6, "hidden_size": 1024, "num_attention_heads": 8,
        "num_kv_heads": 8, "ffn_hidden_size": 4096, "vocab_size": 32000}


def _tiny_request(top_k=3):
    return PlanRequest.model_validate({
        "model": TINY,
        "cluster": {"pools": [{"preset": "dgx-h100", "num_nodes": 1, "gpus_per_node": 2},
                              {"preset": "dgx-a100", "num_nodes": 2, "gpus_per_node": 2}]},
        "training": {"global_batch_size": 16, "seq_length": 2048},
        "search": {"top_k": top_k}})


def _brute_force(req):
    """Every uniform plan (no interleaving, ZeRO 0/1) on each pool alone, and over both pools
    in both orders with every layer split: the best step time that fits."""
    pools = req.cluster.pools
    caps = [p.gpu.memory_bytes * (1 - req.search.memory_headroom) for p in pools]
    tables = [cost_tables(req.model, p, req.training, req.efficiency) for p in pools]
    L = req.model.num_layers
    best = np.inf
    for pool in pools:
        for p in plan(req.model_copy(update={"cluster": pool})).plans[:1]:
            best = min(best, p.step_time_s)
    g = [p.num_gpus for p in pools]
    for dp, tp, cp, mbs, rec, zero, sp in itertools.product(
            (1, 2), (1, 2), (1, 2), (1, 2, 4), range(3), (0, 1), (0, 1)):
        inner = dp * tp * cp
        if any(x % inner for x in g) or (sp and tp == 1) or (zero and dp * cp == 1):
            continue
        P = sum(x // inner for x in g)
        fields = dict(dp=dp, tp=tp, pp=P, cp=cp, micro_batch_size=mbs,
                      recompute=("none", "selective", "full")[rec], zero_stage=zero,
                      sequence_parallel=bool(sp))
        virtual = pools[0].model_copy(update={"num_nodes": sum(g) // 2})
        if plan_violations(ParallelPlan(**fields), req.model, virtual, req.training):
            continue
        row = PlanArrays.from_plans([ParallelPlan(**fields)])
        for order in ((0, 1), (1, 0)):
            stage_pool = np.concatenate([np.full(g[j] // inner, j) for j in order])
            for split in itertools.product(range(1, L + 1), repeat=P):
                if sum(split) != L:
                    continue
                mc = mixed_cost(row, tables, stage_pool, np.array(split))
                if (mc.stage_memory <= np.array([caps[j] for j in stage_pool])).all():
                    best = min(best, mc.step_time_s)
    return best


def test_the_search_over_pools_is_the_brute_force_optimum_within_its_gap():
    req = _tiny_request()
    res = plan(req)
    brute = _brute_force(req)
    got = res.plans[0].step_time_s
    gap = (res.search.gap_pct or 0.0) / 100
    assert got >= brute * (1 - 1e-9)                 # nothing better than the brute force
    assert got <= brute * (1 + gap) + 1e-9           # and within the gap it reports
    assert res.search.status == ("OPTIMAL" if gap == 0 else "FEASIBLE")
    mixed = [p for p in res.plans if len({s.pool for s in p.stages}) > 1]
    assert mixed, "the 2 H100 + 4 A100 pipeline beats either pool alone here"
    p = mixed[0]
    assert [s.layers for s in p.stages] == p.layers_per_stage
    assert sum(p.layers_per_stage) == TINY["num_layers"] and p.gpus_used == 6
    assert sum(p.breakdown.values()) == pytest.approx(p.step_time_s, rel=1e-9)
    # Stages on the faster GPUs hold more layers per GPU of the stage.
    per = {s.gpu: s.layers for s in p.stages}
    assert per["h100-sxm"] >= per["a100-80gb"]
    # No published run spans GPU families, so such a plan carries its class's band on every
    # GPU; a plan on one pool, that pool's family's.
    runs, sources, low, _, high = MEASURED_OVER_PREDICTED["dense"]
    band = p.step_time_band
    assert (band.gpu, band.runs, band.sources) == (None, runs, sources)
    assert (band.low_s, band.high_s) == pytest.approx((p.step_time_s * low, p.step_time_s * high))
    for q in res.plans:
        families = {s.gpu.split("-")[0] for s in q.stages}
        if len(families) == 1:
            assert q.step_time_band.gpu == families.pop()
    # This request's best plans all span both pools; a search on one pool alone gives that
    # pool's family's band.
    for pool in req.cluster.pools:
        alone = plan(req.model_copy(update={"cluster": pool})).plans[0]
        assert alone.step_time_band.gpu == pool.gpu.name.split("-")[0]


@pytest.mark.parametrize("seed", range(4))
def test_random_small_pools_against_brute_force(seed):
    """Random tiny models, batches and pool shapes (H100 or A100 with A100 40/80 GB, nodes of
    2 GPUs): never better than brute force, never worse than it by more than the gap."""
    import random

    rng = random.Random(seed)
    model = {**TINY, "num_layers": rng.choice([4, 5, 8]),
             "hidden_size": rng.choice([1024, 2048]), "vocab_size": rng.choice([32000, 128000])}
    a, b = rng.choice([(1, 1), (1, 2), (2, 1)])
    req = PlanRequest.model_validate({
        "model": model,
        "cluster": {"pools": [
            {"preset": rng.choice(["dgx-h100", "dgx-a100"]), "num_nodes": a, "gpus_per_node": 2},
            {"preset": "dgx-a100", "num_nodes": b, "gpus_per_node": 2,
             "gpu": rng.choice(["a100-40gb", "a100-80gb"])}]},
        "training": {"global_batch_size": rng.choice([8, 16, 32]),
                     "seq_length": rng.choice([1024, 4096])},
        "search": {"top_k": 2}})
    res = plan(req)
    brute = _brute_force(req)
    got = res.plans[0].step_time_s
    gap = (res.search.gap_pct or 0.0) / 100
    assert brute * (1 - 1e-9) <= got <= brute * (1 + gap) + 1e-9


def test_pools_are_never_worse_than_the_best_pool_alone():
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"},
        "cluster": {"pools": [{"preset": "dgx-h100", "num_nodes": 2},
                              {"preset": "dgx-a100", "num_nodes": 1, "gpu": "a100-40gb"}]},
        "training": {"global_batch_size": 64, "seq_length": 4096}, "search": {"top_k": 3}})
    res = plan(req)
    alone = [plan(req.model_copy(update={"cluster": p})) for p in req.cluster.pools]
    best_alone = min(r.plans[0].step_time_s for r in alone if r.plans)
    # Pipelines over both pools were priced too (equal GPUs per node), not only each pool.
    assert res.search.space_size > sum(r.search.space_size for r in alone)
    assert res.plans[0].step_time_s <= best_alone
    for p in res.plans:
        assert p.stages and len(p.stages) == p.pp
        pools_used = {s.pool for s in p.stages}
        if len(pools_used) == 1:       # a single pool's plan, placed on that pool's nodes
            j = pools_used.pop()
            first = sum(q.num_nodes for q in req.cluster.pools[:j])
            assert [n.index for n in p.placement.nodes] == list(
                range(first, first + p.placement.nnodes))


def test_an_estimate_on_pools_names_the_field():
    c = ClusterSpec.model_validate(H100_A100)
    with pytest.raises(PlannerInputError, match="cluster.pools: an estimate costs a plan on "
                                                "one pool"):
        estimate(PlanRequest.model_validate({"model": {"preset": "llama3-8b"}, "cluster": c,
                                             "training": {"global_batch_size": 8,
                                                          "seq_length": 4096}}).model,
                 c, PlanRequest.model_fields["training"].annotation.model_validate(
                     {"global_batch_size": 8, "seq_length": 4096}),
                 ParallelPlan(dp=48))


def test_stage_terms_are_the_composition_of_explicit_layer_counts():
    """A stage's time and memory on a pool, from the split terms, equal the composition of the
    same plan with those layers on that stage (first, middle and last stages alike)."""
    from planner.cost.batch import compose
    from planner.cost.mixed import stage_terms

    req = _tiny_request()
    pool = req.cluster.pools[1]
    tables = cost_tables(req.model, pool, req.training, req.efficiency)
    plans = PlanArrays.from_plans([
        ParallelPlan(dp=1, pp=3, micro_batch_size=2, recompute="full"),
        ParallelPlan(dp=2, tp=2, pp=2, micro_batch_size=1, zero_stage=1,
                     sequence_parallel=True),
        ParallelPlan(dp=1, pp=6, cp=1, micro_batch_size=1, recompute="selective")])
    terms = stage_terms(plans, tables)
    for i in range(len(plans)):
        p = int(plans.pp[i])
        for split in ((6 - (p - 1),) + (1,) * (p - 1), (1,) * (p - 1) + (6 - (p - 1),)):
            bc = compose(plans.take(np.array([i])), tables,
                         stages=np.array([split], dtype=np.int64))
            n = np.array(split, dtype=float)
            assert np.allclose(n * terms.layer[i, :p] + terms.fixed[i, :p],
                               bc.class_time[0, :p], rtol=1e-9)
            assert np.allclose(n * terms.mem_layer[i, :p] + terms.mem_fixed[i, :p],
                               bc.class_memory[0, :p], rtol=1e-9)


def test_validation_refuses_pools_naming_the_field():
    from planner.validation.evaluate import prepare

    with pytest.raises(PlannerInputError, match="cluster.pools: validation probes one"):
        prepare(_tiny_request(), nproc=2)


def test_a_trace_is_drawn_on_the_plans_own_pool_or_refused_naming_the_field():
    """A plan of a cluster of pools whose stages are all on one pool is traced on that pool's
    GPUs; a pipeline over pools is refused (no trace can show two GPU types' kernels), by the
    core, so that the CLI and the API say the same."""
    from planner.validation.predicted_trace import predicted_trace

    req = _tiny_request(top_k=40)
    res = plan(req)
    mixed = [p for p in res.plans if len({s.pool for s in p.stages}) > 1]
    single = [p for p in res.plans if len({s.pool for s in p.stages}) == 1]
    assert mixed and single
    with pytest.raises(PlannerInputError, match="cluster.pools: this plan's stages run on"):
        predicted_trace(mixed[0], req.model, req.cluster, req.training)
    p = single[0]
    pool = req.cluster.pools[p.stages[0].pool]
    got = predicted_trace(p, req.model, req.cluster, req.training)
    assert got == predicted_trace(p, req.model, pool, req.training)


def test_the_time_limit_bounds_the_whole_search_over_pools():
    """One time limit for every search of a request over pools: each pool's search gets what
    is left of it, not the whole limit again."""
    import time

    from planner.search.plan_result import PlanResult, SearchStats
    from planner.search.pools import plan_on_pools

    limits = []

    def one_pool(r):
        limits.append(r.search.time_limit_ms)
        time.sleep(0.05)                 # a pool's search takes at least 50 ms here
        return PlanResult(id="x", plans=[], search=SearchStats(
            status="INFEASIBLE", solve_ms=50, space_size=0, memory_feasible=0,
            lattice_points=0, solver_candidates=0))

    req = _tiny_request().model_copy(update={"search": _tiny_request().search.model_copy(
        update={"time_limit_ms": 1000, "framework": "torchtitan"})})
    plan_on_pools(req, one_pool)
    assert len(limits) == 2 and limits[0] <= 1000 and limits[1] <= 1000 - 50
