"""Hybrid sharding (``plan.dp_replicate``): ZeRO over one replica's dp / dp_replicate ranks
(times cp), the replicas all-reducing the sharded gradients once per step (PyTorch HSDP,
Megatron-LM's --num-distributed-optimizer-instances, DeepSpeed's MiCS)."""

import json
import math
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner.cost.memory import GIB
from planner.cost.step import estimate
from planner.frameworks import reasons_by_framework
from planner.request import EstimateRequest
from planner.search import PlanRequest, answer, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import plan_key, plan_violations
from tests.search_oracle import assert_equals_oracle, enumerate_top_k
from tests.test_launch import check_same_plan, estimated, random_plan, read_back
from tests.test_search import random_request

ROOT = Path(__file__).resolve().parents[1]
# Llama 3 70B, by hand: a layer holds 8192 x (8192 + 2 x 1024 + 8192) attention weights,
# 3 x 8192 x 28672 SwiGLU weights and two 8192-wide norms: 855,654,400 parameters; the
# embedding and the untied LM head 128,256 x 8192 = 1,050,673,152 each.
LAYER = 8192 * (8192 + 2 * 1024 + 8192) + 3 * 8192 * 28672 + 2 * 8192
EMBED = 128_256 * 8192
MODEL = ModelSpec.from_preset("llama3-70b")
CLUSTER = ClusterSpec.from_preset("dgx-h100", num_nodes=128)          # 1,024 GPUs
TRAINING = TrainingSpec(global_batch_size=1024, seq_length=8192, precision="bf16")


def hybrid(zero: int, rep: int, **more) -> ParallelPlan:
    return ParallelPlan(dp=128, tp=8, zero_stage=zero, dp_replicate=rep, micro_batch_size=1,
                        recompute="full", sequence_parallel=True, **more)


def items(est, strategy: str, op: str):
    return [c for c in est.communication if c.strategy == strategy and c.op == op]


def test_hand_worked_figures():
    assert (LAYER, EMBED) == (855_654_400, 1_050_673_152)
    assert MODEL.nonexpert_params_per_layer == LAYER and MODEL.embedding_params == EMBED


def test_states_shard_over_one_replica():
    """dp 128, tp 8, ZeRO-3 over 16 replicas: each GPU's 8,819,212,288 parameters ((80 x
    855,654,400 + 2 x 1,050,673,152) / 8) shard over 128 / 16 = 8 ranks, 2 bytes of weights,
    4 of gradients and 12 of Adam each; over all 128 without hybrid sharding."""
    per_gpu = (80 * LAYER + 2 * EMBED) / 8
    assert per_gpu == 8_819_212_288
    for rep, shard in ((16, 8), (1, 128)):
        mem = estimate(MODEL, CLUSTER, TRAINING, hybrid(3, rep)).memory
        assert mem.weights_gib * GIB == pytest.approx(per_gpu * 2 / shard, rel=1e-12)
        assert mem.gradients_gib * GIB == pytest.approx(per_gpu * 4 / shard, rel=1e-12)
        assert mem.optimizer_gib * GIB == pytest.approx(per_gpu * 12 / shard, rel=1e-12)
    # ZeRO-1 over 16 instances: only the optimizer states shard, over 8 ranks.
    mem = estimate(MODEL, CLUSTER, TRAINING, hybrid(1, 16)).memory
    assert mem.optimizer_gib * GIB == pytest.approx(per_gpu * 12 / 8, rel=1e-12)
    assert mem.weights_gib * GIB == pytest.approx(per_gpu * 2, rel=1e-12)


def test_zero3_collectives_by_hand():
    """ZeRO-3 over 16 replicas of 8 ranks, 8 micro-batches: each layer's 855,654,400 / 8 TP
    shares gathered over the 8 (213,913,600 bytes, twice a layer a micro-batch: 1,280 calls)
    and its gradients reduce-scattered over them in fp32 (427,827,200 bytes, 640 calls); then
    once a step the 8,819,212,288 parameters' reduced shards all-reduced across the 16
    replicas, in Megatron's buckets of max(4e7, 1e6 x 128) = 1.28e8 parameters (sized by the
    whole data-parallel group, distributed_data_parallel.py): 69 buckets of
    8,819,212,288 / 69 x 4 / 8 = 63,907,335 bytes."""
    est = estimate(MODEL, CLUSTER, TRAINING, hybrid(3, 16))
    (ag,) = items(est, "ZeRO", "all_gather")
    assert (ag.group_size, ag.message_bytes, ag.count_per_step) == (8, LAYER / 8 * 2, 1280)
    (rs,) = items(est, "DP", "reduce_scatter")
    assert (rs.group_size, rs.message_bytes, rs.count_per_step) == (8, LAYER / 8 * 4, 640)
    (ar,) = items(est, "DP", "all_reduce")
    buckets = math.ceil(8_819_212_288 / 128_000_000)
    assert buckets == 69
    assert (ar.group_size, ar.count_per_step) == (16, 69)
    assert ar.message_bytes == pytest.approx(8_819_212_288 / 69 * 4 / 8, rel=1e-12)
    assert round(ar.message_bytes) == 63_907_335
    # Without hybrid sharding the gathers span all 128 data-parallel ranks, and nothing is
    # all-reduced.
    flat = estimate(MODEL, CLUSTER, TRAINING, hybrid(3, 1))
    assert {c.group_size for c in flat.communication if c.strategy in ("ZeRO", "DP")} == {128}
    assert not items(flat, "DP", "all_reduce")


def test_zero2_reduces_every_micro_batch_and_all_reduces_once():
    """ZeRO-2 over 16 replicas, 8 micro-batches: every micro-batch reduce-scatters its
    gradients inside the replica (69 buckets, 552 calls a step), the replicas all-reduce the
    accumulated shards once (69 calls), and the updated weights gather inside the replica
    once (69)."""
    est = estimate(MODEL, CLUSTER, TRAINING, hybrid(2, 16))
    (rs,) = items(est, "DP", "reduce_scatter")
    (ar,) = items(est, "DP", "all_reduce")
    (ag,) = items(est, "ZeRO", "all_gather")
    assert (rs.group_size, rs.count_per_step) == (8, 69 * 8)
    assert (ar.group_size, ar.count_per_step) == (16, 69)
    assert (ag.group_size, ag.count_per_step) == (8, 69)


def test_fsdp2_all_reduces_every_micro_batch_without_a_pipeline():
    """FSDP2's HSDP all-reduces every micro-batch (``hsdp_all_reduce_every_microbatch``,
    torchtitan's way): the ZeRO-3 plan above all-reduces its 69 buckets 8 times a step (552
    calls) and takes longer; only torchtitan runs it so, and Megatron-LM and MiCS, which
    all-reduce once, refuse it. Under a pipeline the schedule reduces at the last micro-batch:
    a pipelined ZeRO-1 plan all-reduces once a step with or without the flag."""
    titan = TRAINING.model_copy(update={"zero3_per_parameter": True,
                                        "async_tensor_model_parallel_allreduce": False})
    every = titan.model_copy(update={"hsdp_all_reduce_every_microbatch": True})
    once, each = (estimate(MODEL, CLUSTER, t, hybrid(3, 16)) for t in (titan, every))
    ((ar_once,), (ar_each,)) = (items(e, "DP", "all_reduce") for e in (once, each))
    assert (ar_once.count_per_step, ar_each.count_per_step) == (69, 552)
    assert ar_each.message_bytes == ar_once.message_bytes
    assert each.step_time_s > once.step_time_s
    assert each.breakdown["dp_comm"] > 5 * once.breakdown["dp_comm"]
    assert (once.frameworks, each.frameworks) == ([], ["torchtitan"])
    flat = estimate(MODEL, CLUSTER, TRAINING.model_copy(
        update={"hsdp_all_reduce_every_microbatch": True}), hybrid(3, 16))
    assert flat.frameworks == []
    piped = ParallelPlan(dp=16, tp=8, pp=8, zero_stage=1, dp_replicate=2, micro_batch_size=1,
                         recompute="full", sequence_parallel=True)
    counts = {flag: items(estimate(MODEL, CLUSTER, titan.model_copy(
        update={"hsdp_all_reduce_every_microbatch": flag}), piped), "DP", "all_reduce")[0]
        .count_per_step for flag in (False, True)}
    assert counts[False] == counts[True] < 100


def test_the_replicas_all_reduce_waits_for_the_nics_zero3_holds():
    """Llama 3 8B on 16,384 A100 as dp2048 tp4 cp2 with ZeRO-3: sharded over all 4,096
    data- and context-parallel ranks the step is gather-bound; 128 replicas of 32 ranks
    (4 nodes) keep the gathers on few nodes and run fastest; 1,024 replicas of 4 ranks
    all-reduce an eighth of the gradients across 1,024 ranks, and as the last backward's
    ZeRO-3 gathers and reduce-scatters already hold the NICs for most of its compute, that
    all-reduce is almost all exposed."""
    model = ModelSpec.from_preset("llama3-8b")
    cluster = ClusterSpec.from_preset("dgx-a100", num_nodes=2048)
    training = TrainingSpec(global_batch_size=2048, seq_length=8192, precision="bf16")
    steps = {}
    for rep in (1, 128, 1024):
        p = ParallelPlan(dp=2048, tp=4, cp=2, zero_stage=3, dp_replicate=rep,
                         micro_batch_size=1, sequence_parallel=True)
        est = estimate(model, cluster, training, p)
        steps[rep] = est.step_time_s
        if rep == 1024:
            (ar,) = items(est, "DP", "all_reduce")
            assert est.breakdown["dp_comm"] > 0.85 * ar.total_time_s
    assert steps[128] < steps[1024] < steps[1]
    assert steps[1] > 2 * steps[128]


def test_invalid_hybrid_plans_are_refused_with_the_reason():
    with pytest.raises(ValidationError, match=r"dp_replicate\(3\) must divide dp\(8\)"):
        ParallelPlan(dp=8, zero_stage=3, dp_replicate=3)
    with pytest.raises(ValidationError, match="needs zero_stage >= 1"):
        ParallelPlan(dp=8, dp_replicate=2)
    with pytest.raises(ValidationError, match="one rank per shard group"):
        ParallelPlan(dp=8, zero_stage=1, dp_replicate=8)
    ParallelPlan(dp=8, cp=2, zero_stage=1, dp_replicate=8)      # the cp ranks still shard
    # A MoE replica holds whole expert groups: 8 ranks of Mixtral with ep 8 cannot split in 2.
    moe = ModelSpec.from_preset("mixtral-8x7b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    training = TrainingSpec(global_batch_size=64, seq_length=4096)
    bad = ParallelPlan(dp=8, ep=8, zero_stage=1, dp_replicate=2)
    assert ("plan.dp_replicate", "ep(8) * etp(1) = 8 does not divide one replica's tp(1) * "
            "cp(1) * dp(8) / dp_replicate(2) = 4 ranks (each replica holds whole expert "
            "groups)") in plan_violations(bad, moe, cluster, training)
    assert not plan_violations(bad.model_copy(update={"ep": 4}), moe, cluster, training)


def test_which_frameworks_run_it():
    """Megatron-LM runs every hybrid stage (the distributed optimizer's instances, Megatron-
    FSDP's HSDP); torchtitan's FSDP2 all-reduces every micro-batch without a pipeline, so only
    one micro-batch runs as costed there, and under a pipeline its HSDP is ZeRO-1's; DeepSpeed's
    MiCS is ZeRO-3 without AutoTP."""
    def reasons(p, m, training=TRAINING):
        return reasons_by_framework(p, m, True, training)

    titan = TRAINING.model_copy(update={"zero3_per_parameter": True})
    z3 = ParallelPlan(dp=16, zero_stage=3, dp_replicate=2)
    assert not reasons(z3, 8)["megatron"]
    assert any("more than one micro-batch and no pipeline" in r for r in reasons(z3, 8, titan)
               ["torchtitan"])
    assert not any("hybrid" in r for r in reasons(z3, 1, titan)["torchtitan"])
    # Costed as FSDP2 runs it, every micro-batch: torchtitan, not the others.
    every = titan.model_copy(update={"hsdp_all_reduce_every_microbatch": True})
    assert not reasons(z3, 8, every)["torchtitan"]
    assert any("every micro-batch" in r for r in reasons(z3, 8, every)["megatron"])
    assert any("every micro-batch" in r for r in reasons(z3, 8, every)["deepspeed"])
    # Under a pipeline torchtitan's FSDP is ZeRO-1 (reduced at the last micro-batch), its HSDP
    # all-reducing once a step as costed, after the stage's last backward
    # (training.grad_reduce_after_last_backward, tests/test_reduce_after_backward.py).
    piped = ParallelPlan(dp=8, pp=2, zero_stage=1, dp_replicate=2)
    after = titan.model_copy(update={"grad_reduce_after_last_backward": True,
                                     "microbatch_grad_upcast": True})
    assert not reasons(piped, 8, after)["torchtitan"]
    refused = reasons(piped, 8, titan.model_copy(update={"microbatch_grad_upcast": True})
                      )["torchtitan"]
    assert refused and all("last backward" in r for r in refused)
    assert not any("hybrid" in r for r in reasons(z3, 8)["deepspeed"])
    z1 = ParallelPlan(dp=16, zero_stage=1, dp_replicate=2)
    assert not reasons(z1, 8)["megatron"]
    assert any("MiCS shards ZeRO-3 only" in r for r in reasons(z1, 8)["deepspeed"])
    tp = ParallelPlan(dp=8, tp=2, zero_stage=3, dp_replicate=2)
    assert any("consecutive global ranks" in r for r in reasons(tp, 8)["deepspeed"])


def test_launches_carry_the_replicas():
    est = estimated(MODEL, CLUSTER, TRAINING, hybrid(3, 16))
    args = est.launch.megatron_args
    assert args[args.index("--num-distributed-optimizer-instances") + 1] == "16"
    assert "--use-megatron-fsdp" in args
    titan = TRAINING.model_copy(update={"zero3_per_parameter": True,
                                        "async_tensor_model_parallel_allreduce": False})
    one = ParallelPlan(dp=128, tp=8, zero_stage=3, dp_replicate=16, micro_batch_size=8,
                       sequence_parallel=True, recompute="full")
    est = estimated(MODEL, CLUSTER, titan, one)
    assert "torchtitan" in est.frameworks
    assert "data_parallel_replicate_degree = 16" in est.launch.torchtitan_toml
    assert "data_parallel_shard_degree = 8" in est.launch.torchtitan_toml
    small = ModelSpec.from_preset("llama3-8b")
    mics = ParallelPlan(dp=64, zero_stage=3, dp_replicate=8, micro_batch_size=1,
                        recompute="full")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=8)
    training = TrainingSpec(global_batch_size=64, seq_length=4096, precision="bf16",
                            overlap_param_gather=False)
    est = estimated(small, cluster, training, mics)
    assert "deepspeed" in est.frameworks, est.launch.not_runnable
    assert est.launch.deepspeed_config["zero_optimization"]["mics_shard_size"] == 8


def test_random_hybrid_plans_read_back_exactly():
    """Random sharded plans, each with every replica count it admits: every framework that
    runs one launches it with the replicas and shard groups the plan costs (read back with the
    frameworks' own names), and each framework runs some."""
    rng = random.Random(5)
    seen = {"megatron": 0, "torchtitan": 0, "deepspeed": 0}
    tried = 0
    while tried < 900:
        model, cluster, training, base = random_plan(rng)
        if base.zero_stage == 0:
            continue
        tried += 1
        # A third as drawn; a third costed as torchtitan runs FSDP2, TP and rings; a third
        # as DeepSpeed runs (flat ZeRO-3 buffers, bf16, no per-micro-batch gradient copy, the
        # ZeRO-1/2 gather after the step, full recompute or none).
        training = training.model_copy(update=[{}, {
            "zero3_per_parameter": True, "async_tensor_model_parallel_allreduce": False,
            "ring_attention": "torch_allgather"}, {
            "zero3_per_parameter": False, "overlap_param_gather": False, "precision": "bf16",
            "microbatch_grad_copy": False}][tried % 3])
        if tried % 3 == 2 and base.recompute != "none":
            base = base.model_copy(update={"recompute": "full", "recompute_num_layers": None})
        for rep in range(2, base.dp + 1):
            if base.dp % rep or base.dp // rep * base.cp < 2:
                continue
            p = base.model_copy(update={"dp_replicate": rep})
            if plan_violations(p, model, cluster, training):
                continue
            est = estimated(model, cluster, training, p)
            req = EstimateRequest(model=model, cluster=cluster, training=training, plan=p)
            for fw, got in read_back(est, req).items():
                check_same_plan(got, est)
                assert got["dp_replicate"] == rep
                seen[fw] += 1
    assert all(n >= 5 for n in seen.values()), seen


def test_search_finds_hybrid_plans_exactly():
    """Random small requests asking for hybrid sharding: the search's answer is the exhaustive
    enumeration's, and some answers shard over replicas."""
    hits = 0
    for seed in range(60):
        req = random_request(random.Random(seed))
        body = req.model_dump()
        body["search"] = {**body["search"], "dp_replicate": [1, 2, 4]}
        req = PlanRequest.model_validate(body)
        got = plan(req)
        assert_equals_oracle(got, enumerate_top_k(req))
        hits += any(p.dp_replicate > 1 for p in got.plans)
    assert hits >= 5, hits
    assert plan_key(hybrid(3, 16))[-1] == 16


def test_a_torchtitan_search_costs_its_hsdp_every_micro_batch():
    """search.framework 'torchtitan' implies FSDP2's per-micro-batch all-reduce: Llama 3 8B on
    16 DGX H100 nodes with 2 micro-batches finds HSDP plans, each listing torchtitan and
    all-reducing across its replicas twice a bucket a step."""
    body = {"model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 16},
            "training": {"seq_length": 8192, "global_batch_size": 256, "precision": "bf16"},
            "search": {"top_k": 3, "framework": "torchtitan"}}
    req = PlanRequest.model_validate(body)
    assert req.training.hsdp_all_reduce_every_microbatch
    got = [p for p in plan(req).plans if p.dp_replicate > 1]
    assert got
    once = req.training.model_copy(update={"hsdp_all_reduce_every_microbatch": False})
    for p in got:
        assert p.frameworks == ["torchtitan"] and p.grad_accum_steps == 2
        (ar,) = items(p, "DP", "all_reduce")
        (ar_once,) = items(estimate(req.model, req.cluster, once, ParallelPlan.of(
            p.model_dump())), "DP", "all_reduce")
        assert ar.count_per_step == 2 * ar_once.count_per_step


def test_a_search_at_scale_picks_hybrid_sharding_where_it_is_faster():
    """Llama 3 8B on 1,024 H100 (README, winners): the free search's winner shards ZeRO-3 over
    16 replicas of 64 ranks, ahead of the same degrees sharded over all 1,024, which is what a
    search restricted to dp_replicate 1 picks; its Megatron-LM arguments carry the replicas."""
    body = {"model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 128},
            "training": {"seq_length": 8192, "global_batch_size": 512, "precision": "bf16"},
            "search": {"top_k": 1}}
    (best,) = answer(PlanRequest.model_validate(body)).plans
    body["search"]["dp_replicate"] = 1
    (flat,) = plan(PlanRequest.model_validate(body)).plans
    assert (best.dp, best.cp, best.zero_stage, best.dp_replicate) == (512, 2, 3, 16)
    assert (flat.dp, flat.cp, flat.zero_stage, flat.dp_replicate) == (512, 2, 3, 1)
    assert best.step_time_s < flat.step_time_s
    args = best.launch.megatron_args
    assert args[args.index("--num-distributed-optimizer-instances") + 1] == "16"


def test_the_probe_replays_hybrid_sharding_over_its_groups():
    """ZeRO-3 over 2 replicas of 2 ranks on 4 gloo ranks: the probe gathers the weights and
    reduce-scatters the gradients over a replica's 2 ranks, and all-reduces the reduced shards
    across the 2 replicas, as the plan is costed."""
    from planner.probe.validate import validate
    from tests.test_validation import TINY

    req = {**TINY, "search": {**TINY["search"], "tp": 1, "dp": 4, "pp": 1, "zero_stage": 3,
                              "dp_replicate": 2, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert (p.plan["dp_replicate"], p.plan["zero_stage"], p.mode) == (2, 3, "full"), p.note
    ops = {(s.op, s.group_size) for s in res.samples}
    assert {("all_gather", 2), ("reduce_scatter", 2), ("all_reduce", 2)} <= ops, ops
    assert not any(size == 4 for op, size in ops if op != "send_recv")
    assert p.measured["breakdown"]["zero_comm"] > 0 and p.measured["breakdown"]["dp_comm"] > 0


def test_the_cli_shows_the_replicas_and_refuses_a_bad_count(tmp_path):
    from typer.testing import CliRunner

    from planner.cli.main import app

    body = {"model": {"preset": "llama3-70b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 128},
            "training": {"global_batch_size": 1024, "seq_length": 8192, "precision": "bf16"},
            "plan": {"dp": 128, "tp": 8, "zero_stage": 3, "dp_replicate": 16,
                     "micro_batch_size": 1, "recompute": "full", "sequence_parallel": True}}
    path = tmp_path / "hsdp.json"
    path.write_text(json.dumps(body))
    runner = CliRunner()
    res = runner.invoke(app, ["estimate", str(path)])
    assert res.exit_code == 0, res.output
    assert "dp_replicate=16" in " ".join(res.stdout.split())
    res = runner.invoke(app, ["estimate", str(path), "--json"])
    assert json.loads(res.stdout)["dp_replicate"] == 16
    body["plan"]["dp_replicate"] = 3
    path.write_text(json.dumps(body))
    res = runner.invoke(app, ["estimate", str(path)])
    assert res.exit_code != 0 and "dp_replicate(3) must divide dp(128)" in res.output


def test_pipelines_over_pools_leave_hybrid_sharding_out():
    """A search over GPU pools that allows hybrid ZeRO-1 (dp 2, cp 2: replicas of one dp rank
    still shard over the cp pair): the candidates of the pipelines across pools (one dp and
    ZeRO stage for every stage, as Megatron-LM launches them) leave it out, and so do the
    answers."""
    from planner.search.pools import _candidates
    from planner.search.space import build_space

    body = json.loads((ROOT / "examples" / "plan-pools.json").read_text())
    body["search"] = {"top_k": 10, "zero_stage": 1, "dp": 2, "cp": 2, "dp_replicate": [1, 2]}
    req = PlanRequest.model_validate(body)
    pool = req.cluster.pools[0].model_copy(update={"num_nodes": 6})
    assert (build_space(req.model, pool, req.training, req.search).plans.rep == 2).any()
    cands = _candidates(req, (0, 1))
    assert cands is not None and len(cands) and (cands.rep == 1).all()
    mixed = [p for p in plan(req).plans if p.stages and len({s.pool for s in p.stages}) > 1]
    assert len(mixed) == 10 and all(p.dp_replicate == 1 for p in mixed)


def test_the_openapi_estimate_examples_estimate():
    """Every estimate example of the OpenAPI docs is a valid request that estimates, the
    hybrid sharding one with its replicas."""
    from api.routes.examples import ESTIMATE_EXAMPLES

    for name, example in ESTIMATE_EXAMPLES.items():
        req = EstimateRequest.model_validate(example["value"])
        est = estimate(req.model, req.cluster, req.training, req.plan)
        assert est.step_time_s > 0, name
    hsdp = EstimateRequest.model_validate(ESTIMATE_EXAMPLES["llama3-8b hsdp"]["value"])
    est = estimate(hsdp.model, hsdp.cluster, hsdp.training, hsdp.plan)
    assert (est.dp_replicate, est.fits_in_memory, est.frameworks) == (16, True, ["megatron"])


def test_only_fsdp2s_sharded_gradients_all_reduce_every_micro_batch():
    """The flag is FSDP2's: a ZeRO-1 plan (the distributed optimizer's instances) still
    all-reduces once a step with it, and Megatron-LM runs it."""
    every = TRAINING.model_copy(update={"hsdp_all_reduce_every_microbatch": True})
    est = estimate(MODEL, CLUSTER, every, hybrid(1, 16))
    (ar,) = items(est, "DP", "all_reduce")
    assert ar.count_per_step == 69 and est.grad_accum_steps == 8
    assert est.frameworks == ["megatron"]
