"""The search against exhaustive enumeration, and its behaviour on real requests."""

import json
import random

import numpy as np
import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.batch import PlanArrays, compose
from planner.cost.tables import RECOMPUTE, CostTables
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import plan_violations
from tests.search_oracle import assert_equals_oracle, enumerate_top_k

GIB = 2**30


def random_request(rng: random.Random) -> PlanRequest:
    heads = rng.choice([2, 4, 8])
    kv = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0])
    head_dim = rng.choice([8, 16])
    layers = rng.randint(2, 8)
    gpn = rng.choice([1, 2, 4])
    nodes = rng.choice([1, 2]) if gpn < 4 else 1
    search = {"top_k": rng.randint(1, 6), "rebalance_stages": False,
              "memory_headroom": rng.choice([0.0, 0.05])}
    extra = rng.random()
    if extra < 0.15:
        search["recompute"] = rng.choice(["full", ["none", "selective"]])
    elif extra < 0.3:
        search["micro_batch_size"] = {"min": 2}
    elif extra < 0.4:
        search["zero_stage"] = [0, 1]
    elif extra < 0.5:
        search["allow_idle_gpus"] = True
    elif extra < 0.6:
        search["allow_cross_node_tp"] = True
    elif extra < 0.7:
        search["tp"] = rng.choice([1, 2, [1, 2]])
    elif extra < 0.8:
        search["dp_replicate"] = rng.choice([2, [1, 2], {"min": 2}])
    body = {
        "model": {"name": "tiny", "num_layers": layers, "hidden_size": heads * head_dim,
                  "num_attention_heads": heads, "num_kv_heads": kv,
                  "ffn_hidden_size": heads * head_dim * rng.choice([2, 4]),
                  "ffn_type": rng.choice(["gelu", "swiglu"]), "vocab_size": rng.choice([97, 512])},
        "cluster": {"preset": "dgx-a100", "num_nodes": nodes, "gpus_per_node": gpn,
                    # Small enough that memory binds for part of each space.
                    "gpu": {"preset": "a100-80gb", "memory_gib": rng.uniform(0.002, 0.03)}},
        "training": {"global_batch_size": rng.choice([1, 2, 4, 6, 8, 12, 16]),
                     "seq_length": rng.choice([32, 64, 128]),
                     "flash_attention": rng.random() < 0.5},
        "search": search,
        "efficiency": {"memory_reserve_gib": 0.0},
    }
    # A host link (activations may be offloaded to the CPU), drawn from a copy of the
    # generator so that callers drawing more from ``rng`` get what they got before.
    fork = random.Random()
    fork.setstate(rng.getstate())
    if fork.random() < 0.3:
        body["cluster"]["host_link_gb_per_s"] = fork.choice([0.05, 1.0, 50.0])
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(200))
def test_solver_top_k_equals_exhaustive_enumeration(seed):
    req = random_request(random.Random(seed))
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_batched_and_single_plan_costs_agree():
    # The search costs plans in one array; estimate costs one: the numbers must be identical.
    rng = random.Random(7)
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    tr = TrainingSpec(global_batch_size=256, seq_length=4096)
    plans = []
    while len(plans) < 40:
        p = ParallelPlan(dp=rng.choice([1, 2, 4, 8]), tp=rng.choice([1, 2, 4, 8]),
                         pp=rng.choice([1, 2, 4]), cp=rng.choice([1, 2]),
                         micro_batch_size=rng.choice([1, 2]),
                         recompute=rng.choice(RECOMPUTE), zero_stage=rng.randint(0, 3))
        if not plan_violations(p, m, c, tr) and p.world_size == 32:
            plans.append(p)
    tables = CostTables(m, c, tr, EfficiencyModel())
    bc = compose(PlanArrays.from_plans(plans), tables)
    for i, p in enumerate(plans):
        est = estimate(m, c, tr, p)
        assert est.step_time_s == pytest.approx(float(bc.step_time_s[i]), rel=1e-12)
        assert est.memory_per_gpu_gib * GIB == pytest.approx(float(bc.memory_bytes[i]), rel=1e-12)


def request(**search):
    return PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
        "training": {"global_batch_size": 256, "seq_length": 4096}, "search": search})


def test_restrictions_are_honoured():
    res = plan(request(tp=[4, 8], recompute=["selective", "full"], micro_batch_size={"min": 2},
                       zero_stage=1, top_k=8))
    assert res.search.status == "OPTIMAL" and len(res.plans) == 8
    for p in res.plans:
        assert p.tp in (4, 8) and p.recompute != "none" and p.micro_batch_size >= 2
        assert p.zero_stage == 1 and p.fits_in_memory
        assert p.dp * p.tp * p.pp * p.cp == 32
    times = [p.step_time_s for p in res.plans]
    assert times == sorted(times)
    assert len({(p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch_size, p.recompute, p.zero_stage,
                 p.sequence_parallel, tuple(p.layers_per_stage)) for p in res.plans}) == 8


def test_same_request_same_answer():
    a = plan(request(top_k=5)).model_dump(mode="json")
    b = plan(request(top_k=5)).model_dump(mode="json")
    a["search"].pop("solve_ms")
    b["search"].pop("solve_ms")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["id"].startswith("plan-")


def test_time_limit_still_returns_plans():
    res = plan(request(time_limit_ms=1))
    assert res.search.status in ("FEASIBLE", "OPTIMAL")
    assert res.plans and res.plans[0].fits_in_memory


def test_structurally_impossible_request_names_the_rule():
    res = plan(request(tp=3))
    assert res.search.status == "INFEASIBLE" and res.search.space_size == 0
    assert "num_attention_heads(64)" in res.infeasible_reasons[0]
    res = plan(PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 3},
        "training": {"global_batch_size": 7, "seq_length": 4096},
        # dp divides 7, so tp * pp * cp must make 24 (or 24/7): tp <= 8 needs pp * cp >= 3.
        "search": {"pp": {"max": 2}, "cp": 1}}))
    assert res.search.status == "INFEASIBLE"
    assert "no dp * tp * pp * cp lands on 24 GPUs" in res.infeasible_reasons[0]


def test_out_of_memory_request_explains_with_numbers():
    res = plan(PlanRequest.model_validate({
        "model": {"preset": "llama3-405b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "training": {"global_batch_size": 64, "seq_length": 8192}}))
    assert res.search.status == "INFEASIBLE" and res.search.space_size > 0
    text = " ".join(res.infeasible_reasons)
    assert "GiB per GPU" in text and "h100-sxm has 80 GiB" in text
    assert "alone need" in text and "GPUs in all" in text
    # About 857 GiB per GPU: no larger GPU holds it, so none is suggested as if it would.
    help_ = res.infeasible_reasons[-1]
    assert "no GPU preset holds" in help_ and "gb300" in help_ and "more GPUs" in help_
    assert "h200-sxm" not in help_ and "b200-sxm" not in help_


def test_a_larger_gpu_is_suggested_only_where_the_smallest_footprint_fits_it():
    """Llama 3 70B on 8 A100 80GB needs about 150 GiB per GPU at the least: the B200/B300
    class (180-270 GiB) holds it, H200 (141 GB, 124.6 GiB usable) does not."""
    from planner.search.explain import larger_gpu_hint
    from planner.specs import GPUSpec

    res = plan(PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
        "training": {"global_batch_size": 64, "seq_length": 4096}}))
    assert res.search.status == "INFEASIBLE"
    named = float(res.infeasible_reasons[0].split("footprint in the space is ")[1]
                  .split(" GiB")[0])
    help_ = res.infeasible_reasons[-1]
    for name in GPUSpec.preset_names():
        gib = GPUSpec.from_preset(name).memory_gib
        suggested = name + "," in help_ or name + ")" in help_
        assert suggested == (gib > 80 and gib * 0.95 >= named), (name, gib, named, help_)
    assert "b200-sxm" in help_ and "h200-sxm" not in help_
    # The hint by hand: an H200 is named just under 0.95 of its memory, not just over it.
    h100 = GPUSpec.from_preset("h100-sxm")
    h200 = GPUSpec.from_preset("h200-sxm").memory_gib
    assert "h200-sxm" in larger_gpu_hint(h100, 0.95 * h200 - 0.1, 0.95)
    assert "h200-sxm" not in larger_gpu_hint(h100, 0.95 * h200 + 0.1, 0.95)
    top = max(GPUSpec.preset_names(), key=lambda g: GPUSpec.from_preset(g).memory_gib)
    assert larger_gpu_hint(GPUSpec.from_preset(top), 10.0, 0.95).startswith(
        "no GPU preset has more memory")


def test_uneven_stages_make_a_plan_fit():
    # 80 layers on 3 stages: the even split (27, 27, 26) overflows the first stage, which holds
    # 3 micro-batches of activations; moving layers to later stages makes it fit.
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=3)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    even = estimate(m, c, tr, ParallelPlan(dp=1, tp=8, pp=3))
    cap = 80 * GIB * 0.95
    assert even.memory_per_gpu_gib * GIB > cap
    res = plan(PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 3},
        "training": {"global_batch_size": 64, "seq_length": 4096},
        "search": {"dp": 1, "tp": 8, "pp": 3, "recompute": "none", "zero_stage": 0,
                   "sequence_parallel": False, "micro_batch_size": 1, "top_k": 1}}))
    assert res.plans, res.infeasible_reasons
    best = res.plans[0]
    assert sum(best.layers_per_stage) == 80 and best.layers_per_stage[0] < 27
    assert best.fits_in_memory and best.memory_per_gpu_gib * GIB <= cap


def uneven_request(seed: int) -> PlanRequest:
    """A random small request with uneven stages on, pipelines likely, and heavy first and
    last stages (a large vocabulary), so that uneven splits often win."""
    rng = random.Random(1000 + seed)
    body = random_request(rng).model_dump(mode="json")
    body["search"]["rebalance_stages"] = True
    if rng.random() < 0.5:
        body["search"]["pp"] = {"min": 2}
    body["model"]["num_layers"] = rng.randint(3, 9)
    body["model"]["vocab_size"] = rng.choice([512, 4096, 16384])
    # Multi-token prediction: fixed layers and head passes on the last stage.
    body["model"]["mtp_num_layers"] = (0, 0, 1, 2)[seed % 4]
    body["training"]["global_batch_size"] = rng.choice([2, 4, 8])
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(60))
def test_uneven_splits_are_searched_exactly(seed):
    """With uneven stages on, the top k equal brute force over every plan and every
    first/last split of its layers (the pruning by the split bound loses nothing)."""
    req = uneven_request(seed)
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_the_uneven_comparison_covers_uneven_winners():
    hits = sum(any(p.pipeline_layout in ("first_last", "custom") for p in
                   plan(uneven_request(seed)).plans) for seed in range(60))
    assert hits >= 10


def interleaved_request(seed: int) -> PlanRequest:
    """A random small request whose plans interleave (vpp >= 2, pp >= 2) with uneven stages
    on for them too (``rebalance_interleaved``): 6-14 layers, a large vocabulary, 4 or 8
    GPUs."""
    rng = random.Random(5000 + seed)
    body = random_request(rng).model_dump(mode="json")
    body["search"].pop("tp", None)
    body["search"].pop("allow_idle_gpus", None)
    body["search"].update({"rebalance_stages": True, "rebalance_interleaved": True,
                           "vpp": {"min": 2}, "pp": {"min": 2}})
    body["model"]["num_layers"] = rng.randint(6, 14)
    body["model"]["vocab_size"] = rng.choice([4096, 16384, 65536])
    body["model"]["mtp_num_layers"] = seed % 2
    body["training"]["global_batch_size"] = rng.choice([8, 16, 32])
    body["cluster"].update({"gpus_per_node": 4, "num_nodes": rng.choice([1, 2])})
    body["cluster"]["gpu"]["memory_gib"] = rng.uniform(0.01, 0.06)
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(12))
def test_interleaved_uneven_splits_are_searched_exactly(seed):
    """Interleaved plans get uneven stages too (each rank's layers spread over its chunks):
    the top k equal brute force over every plan and every such split."""
    req = interleaved_request(seed)
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_the_interleaved_comparison_covers_uneven_winners():
    from planner.specs.layout import default_layout

    hits = 0
    for seed in range(12):
        req = interleaved_request(seed)
        for p in plan(req).plans[:1]:
            layout = default_layout(req.model.num_layers, p.pp, p.vpp)
            hits += p.vpp > 1 and (layout is None or tuple(p.layers_per_stage) != layout.stages)
    assert hits >= 3


@pytest.mark.parametrize("model,nodes", [("llama3-70b", 8), ("llama3-405b", 128)])
def test_split_bounds_leave_the_default_layouts_costs_unchanged(model, nodes):
    """Costing for the split pass changes nothing for the default layouts: the same plans
    fit with the same step times, and every bound is at most the default layout's time."""
    req = PlanRequest.model_validate({
        "model": {"preset": model}, "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
        "training": {"global_batch_size": 1024, "seq_length": 8192}})
    from planner.cost.tables import cost_tables
    from planner.search.space import build_space

    plans = build_space(req.model, req.cluster, req.training, req.search).plans
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency)
    cap = req.cluster.gpu.memory_bytes * (1 - req.search.memory_headroom)
    a = compose(plans, tables, memory_cap=cap)
    b = compose(plans, tables, memory_cap=cap, any_split=True)
    fa, fb = a.memory_bytes <= cap, b.memory_bytes <= cap
    assert (fa == fb).all() and fa.any()
    assert np.allclose(a.step_time_s[fa], b.step_time_s[fb], rtol=1e-12)
    # The bound covers the first/last splits (a layer on every stage): where the default
    # layout is one of them, it cannot exceed its time.
    from planner.specs.layout import default_layout

    full = np.array([min(default_layout(req.model.num_layers, int(p), 1).stages) >= 1
                     if v == 1 else True for p, v in zip(plans.pp, plans.vpp, strict=True)])
    sel = fb & full
    assert sel.sum() > 100
    assert (b.split_bound[sel] <= b.step_time_s[sel] * (1 + 1e-12)).all()


def test_uneven_split_counterexample_is_found():
    """The issue's case: a 12-layer, 256k-vocabulary model on one DGX A100-40GB with pp >= 2;
    dp2/pp2/cp2/ZeRO-2 with [8, 4] layers fits and beats every even plan."""
    body = {"model": {"name": "m", "num_layers": 12, "hidden_size": 4096,
                      "num_attention_heads": 32, "ffn_hidden_size": 11008,
                      "ffn_type": "swiglu", "vocab_size": 256000},
            "cluster": {"preset": "dgx-a100", "num_nodes": 1, "gpu": "a100-40gb"},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "search": {"pp": {"min": 2}, "top_k": 3}}
    req = PlanRequest.model_validate(body)
    got = plan(req)
    alt = estimate(req.model, req.cluster, req.training,
                   ParallelPlan(dp=2, pp=2, cp=2, micro_batch_size=1, zero_stage=2,
                                layers_per_stage=(8, 4)))
    cap = req.cluster.gpu.memory_bytes * (1 - req.search.memory_headroom)
    assert alt.memory_per_gpu_gib * GIB <= cap
    assert got.search.status == "OPTIMAL"
    assert got.plans[0].step_time_s <= alt.step_time_s * (1 + 1e-9)
    even = plan(PlanRequest.model_validate({**body, "search": {**body["search"],
                                                                "rebalance_stages": False}}))
    assert got.plans[0].step_time_s < even.plans[0].step_time_s


def megatron_request(nodes, gbs, **search):
    return PlanRequest.model_validate({
        "model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "num_nodes": nodes},
        "training": {"global_batch_size": gbs, "seq_length": 2048, "precision": "fp16",
                     "flash_attention": False, "dropout": True, "overlap_grad_reduce": False},
        # The PTD-P space of Narayanan et al.: no CP, no ZeRO, full recompute, no SP.
        "search": {"cp": 1, "zero_stage": 0, "recompute": "full", "sequence_parallel": False,
                   "vpp": 1, "allow_cross_node_tp": True, "top_k": 1, **search}})


@pytest.mark.parametrize("nodes,gbs", [(8, 32), (16, 64)])
def test_megatron_rule_tp_within_node_pp_across_nodes(nodes, gbs):
    # SC'21 takeaway #1: tensor parallelism up to the GPUs of a node, pipeline across nodes.
    best = plan(megatron_request(nodes, gbs)).plans[0]
    assert best.tp == 8 and best.pp > 1
    assert {c.tier for c in best.communication if c.strategy == "TP"} == {"intra_node"}
    assert {c.tier for c in best.communication if c.strategy == "PP"} == {"inter_node"}
    for tp in (2, 4, 16):
        other = plan(megatron_request(nodes, gbs, tp=tp)).plans[0]
        assert other.step_time_s > 1.05 * best.step_time_s, tp


def test_larger_micro_batches_help_until_memory_binds():
    body = {"model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
            "training": {"global_batch_size": 512, "seq_length": 4096},
            "search": {"dp": 8, "tp": 1, "pp": 1, "cp": 1, "recompute": "none", "zero_stage": 1,
                       "top_k": 1}}
    times, fits = {}, {}
    for mbs in (1, 2, 4, 8):
        body["search"]["micro_batch_size"] = mbs
        res = plan(PlanRequest.model_validate(body))
        fits[mbs] = bool(res.plans)
        if res.plans:
            times[mbs] = res.plans[0].step_time_s
    fitting = [b for b in (1, 2, 4, 8) if fits[b]]
    assert fitting[0] == 1 and not all(fits.values())        # memory binds at some size
    assert [times[b] for b in fitting] == sorted((times[b] for b in fitting), reverse=True)
    body["search"].pop("micro_batch_size")
    assert plan(PlanRequest.model_validate(body)).plans[0].micro_batch_size == fitting[-1]


def test_the_exhaustive_comparison_covers_block_recompute():
    # The random requests above must put block-recompute plans in the top k often enough for
    # the comparison to check their fewest-layers rule and their pruning.
    hits = sum(any(p.recompute_num_layers for p in plan(random_request(random.Random(s))).plans)
               for s in range(200))
    assert hits >= 5


def offload_request(seed: int) -> PlanRequest:
    """A random small request on a cluster with a host link, without recompute: plans that do
    not fit must offload activations to the CPU (``cpu_offload_layers``)."""
    rng = random.Random(9000 + seed)
    body = random_request(rng).model_dump(mode="json")
    body["search"].update({"recompute": "none", "top_k": rng.randint(2, 6)})
    if seed % 2:
        body["search"]["pp"] = 1        # then only offloading makes a tight plan fit
    body["cluster"]["host_link_gb_per_s"] = rng.choice([0.02, 0.2, 2.0, 50.0])
    body["model"]["num_layers"] = rng.randint(4, 12)
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(40))
def test_cpu_offloading_is_searched_exactly(seed):
    """The fewest offloaded layers that fit, for every plan without pipelining: the top k
    equal brute force over every plan and every number of offloaded layers."""
    req = offload_request(seed)
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_the_offload_comparison_covers_offloading_winners():
    # The requests above must put offloading plans in the top k often enough for the
    # comparison to check the fewest-layers rule (their copies exposed beyond their windows).
    got = [p for s in range(40) for p in plan(offload_request(s)).plans if p.cpu_offload_layers]
    assert len(got) >= 5 and all(p.breakdown["offload"] > 0 for p in got)


def test_the_smallest_footprint_named_is_the_true_minimum():
    """Llama 3 405B on 8 A100-40GB: the footprint the reasons name is the smallest in the
    space (full recompute shrinks the activations), not one of a plan skipped early."""
    body = {"model": {"preset": "llama3-405b"},
            "cluster": {"preset": "dgx-a100", "num_nodes": 1, "gpu": "a100-40gb"},
            "training": {"global_batch_size": 64, "seq_length": 4096}}
    res = plan(PlanRequest.model_validate(body))
    assert res.search.status == "INFEASIBLE"
    head = res.infeasible_reasons[0]
    named = float(head.split("smallest footprint in the space is ")[1].split(" GiB")[0])
    assert "recompute=full" in head
    req = PlanRequest.model_validate(body)
    other = estimate(req.model, req.cluster, req.training,
                     ParallelPlan(tp=8, recompute="full", micro_batch_size=1))
    assert named <= other.memory_per_gpu_gib + 1e-6
    states = float(res.infeasible_reasons[1].split("need ")[1].split(" GiB")[0])
    assert states <= named < states + 10


def test_pareto_frontier_by_hand():
    from planner.search.frontier import pareto_frontier, space_sample

    step = np.array([3.0, 1.0, 2.0, 1.0, 4.0, 2.0])
    mem = np.array([1.0, 9.0, 5.0, 7.0, 0.5, 5.0])
    # (1, 7) beats (1, 9); (2, 5) twice: kept once; (3, 1); (4, 0.5).
    assert pareto_frontier(step, mem).tolist() == [3, 2, 0, 4]
    fits = np.array([True, True, True, True, False, True])
    idx, front = space_sample(step, mem, fits, 5)
    assert idx[:3].tolist() == [3, 2, 0] and front.tolist() == [True] * 3 + [False] * 2
    assert len(set(idx.tolist())) == 5                       # no plan twice
    idx, front = space_sample(step, mem, fits, 2)           # the frontier is cut to n
    assert idx.tolist() == [3, 2] and front.all()
    assert len(space_sample(step, mem, fits, 0)[0]) == 0


def test_the_space_sample_holds_the_best_plan_and_only_costed_plans():
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
        "training": {"global_batch_size": 128, "seq_length": 4096},
        "search": {"top_k": 3, "space_sample": 200, "rebalance_stages": False,
                   "partial_recompute": False}})
    result = plan(req)
    points = result.space_sample
    assert 0 < len(points) <= 200
    front = [p for p in points if p.frontier]
    assert front and all(p.fits for p in front)
    # The frontier's fastest point is the best plan the search returned.
    assert min(p.step_time_s for p in front) == pytest.approx(result.plans[0].step_time_s,
                                                              rel=1e-9)
    # Along the frontier, each slower plan needs less memory.
    mems = [p.memory_gib for p in sorted(front, key=lambda p: p.step_time_s)]
    assert mems == sorted(mems, reverse=True)
    assert plan(req.model_copy(update={"search": req.search.model_copy(
        update={"space_sample": 0})})).space_sample == []


def test_the_space_is_kept_for_requests_of_the_same_setup():
    """build_space is a pure function of the setup and the search's restrictions: a request
    that changes only top_k, the time limit or the headroom reuses it; a restriction does not."""
    from planner.search.space import build_space
    from planner.search.spec import SearchSpec
    from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    a = build_space(m, c, tr, SearchSpec(top_k=3))
    assert build_space(m, c, tr, SearchSpec(top_k=7, time_limit_ms=500,
                                            memory_headroom=0.2)) is a
    narrowed = build_space(m, c, tr, SearchSpec(tp=[2, 4]))
    assert narrowed is not a and set(narrowed.plans.tp.tolist()) == {2, 4}
    assert build_space(m, c, tr.model_copy(update={"global_batch_size": 128}),
                       SearchSpec()) is not a


def test_a_request_whose_degrees_fit_but_whose_vpp_cannot_says_so():
    """DeepSeek-V3's 61 layers over pp 8 x vpp 4 (Megatron-Bridge's published plan) is a
    custom layout, which the search does not enumerate: the reason says that, not that no
    degrees land on the GPUs (they do: dp 64 x tp 2 x pp 8)."""
    res = plan(PlanRequest.model_validate({
        "model": {"preset": "deepseek-v3"}, "cluster": {"preset": "dgx-h100", "num_nodes": 128},
        "training": {"global_batch_size": 8192, "seq_length": 4096, "precision": "fp8"},
        "search": {"pp": 8, "vpp": 4, "tp": 2}}))
    assert res.search.status == "INFEASIBLE" and not res.plans
    text = " ".join(res.infeasible_reasons)
    assert "land on the GPUs" in text and "lands on" not in text
    assert "num_layers(61) dividing pp * vpp, or 63" in text and "pp in [8]" in text


def software_2021_request(seed: int) -> PlanRequest:
    """A random small request described as 2021 software runs (TP all-reduce not overlapped,
    DeepSpeed ZeRO-3's per-rank gather copies, pipeline scatter/gather), which no framework
    of today runs as predicted, searched with ``framework: "any"``."""
    rng = random.Random(9000 + seed)
    body = random_request(rng).model_dump(mode="json")
    body["training"].update({"async_tensor_model_parallel_allreduce": False,
                             "zero3_per_rank_copies": rng.random() < 0.5,
                             "p2p_scatter_gather": rng.random() < 0.5})
    body["search"]["framework"] = "any"
    return PlanRequest.model_validate(body)


@pytest.mark.parametrize("seed", range(40))
def test_any_framework_searches_every_plan_exactly(seed):
    req = software_2021_request(seed)
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_any_framework_admits_plans_no_framework_of_today_runs():
    """tp 2 x pp 2 without sequence parallelism, with a blocking TP all-reduce (Megatron-LM
    before 2021-09): Megatron-LM of today always overlaps it and DeepSpeed's pipeline engine
    takes no TP, so the default search finds nothing and says why, while 'any' costs those
    plans and lists no framework for them."""
    body = {"model": {"name": "tiny", "num_layers": 4, "hidden_size": 64,
                      "num_attention_heads": 4, "ffn_hidden_size": 256, "vocab_size": 512},
            "cluster": {"preset": "dgx-a100", "num_nodes": 1, "gpus_per_node": 4},
            "training": {"global_batch_size": 8, "seq_length": 64,
                         "async_tensor_model_parallel_allreduce": False},
            "search": {"tp": 2, "pp": 2, "sequence_parallel": False}}
    default = plan(PlanRequest.model_validate(body))
    assert default.search.status == "INFEASIBLE" and not default.plans
    assert "'any'" in default.infeasible_reasons[0]
    assert "plans satisfy the request, but no framework runs any of them" in (
        default.infeasible_reasons[0])
    body["search"]["framework"] = "any"
    free = plan(PlanRequest.model_validate(body))
    assert free.search.status == "OPTIMAL"
    assert all((p.tp, p.pp, p.frameworks) == (2, 2, []) for p in free.plans)
