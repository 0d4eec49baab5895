"""DeepSpeed's AutoEP (``"expert_parallel": {"enabled", "autoep_size"}``, DeepSpeed 0.19.2 and
later): which MoE plans DeepSpeed now runs with expert parallelism, the config that says so
and reads back to the plan, and the hint that tells a DeepSpeed search of the other way it
runs experts."""

import random

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, kernel_model, layer_work
from planner.cost.moe_routing import routing_bytes
from planner.frameworks import CAPABILITIES, reasons_by_framework
from planner.launch.context import LaunchContext
from planner.launch.deepspeed import deepspeed_config
from planner.search import PlanRequest, answer, plan
from planner.search.hints import MIN_GAIN
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from tests.launch_readers import deepspeed_plan
from tests.search_oracle import assert_equals_oracle, enumerate_top_k
from tests.test_launch import check_same_plan
from tests.test_moe import random_moe_request

MIXTRAL = ModelSpec.from_preset("mixtral-8x7b")
NODES = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
# What a DeepSpeed search costs (planner.search.plan_request.FRAMEWORK_TRAINING), grouped.
GROUPED = TrainingSpec(global_batch_size=64, seq_length=4096, moe_expert_gemm="grouped",
                       overlap_param_gather=False, grad_reduce_after_last_backward=True,
                       zero_grad_allreduce=True, vocab_parallel_loss=False,
                       moe_routing="autoep")


def test_the_moe_layers_copies_are_worked_by_hand():
    # 1,000 routed copies and 100 tokens, one element each, in bf16. AutoEP: forward
    # 13 x 2 + 16 = 42 bytes a copy and 8 + 2 a token; backward 10 x 2 + 12 = 32 and 2 x 2 + 4.
    assert routing_bytes("autoep", 1000, 100, 2) == (43_000, 32_800)
    # torchtitan's: forward 12 x 2 + 8 = 32 and 10; backward as AutoEP's.
    assert routing_bytes("torchtitan", 1000, 100, 2) == (33_000, 32_800)
    # Megatron-Core's fused permutation: 4 x 2 = 8 a copy forward, 16 backward.
    assert routing_bytes("fused", 1000, 100, 2) == (8_000, 16_000)
    # In the layer they replace the all-to-all dispatch's permutation: Mixtral 8x7B (every
    # layer MoE, top 2) at 4,096 tokens a GPU, ep 8, balanced routing: 8,192 copies of 4,096
    # elements.
    even = GROUPED.model_copy(update={"moe_load_imbalance": 1.0})
    shape = LayerShape(1, 1, 1, "full", False, 8, 1)
    km = kernel_model(NODES.gpu, even, EfficiencyModel())
    a2a = layer_work(MIXTRAL, even.model_copy(update={"moe_routing": "fused"}),
                     shape, NODES.gpu, EfficiencyModel())
    auto = layer_work(MIXTRAL, even, shape, NODES.gpu, EfficiencyModel())
    copies, tokens = 8192 * 4096, 4096 * 4096
    fwd, bwd = routing_bytes("autoep", copies, tokens, 2)
    generic = 2 * 2 * copies * 2
    assert auto.fwd_s - a2a.fwd_s == pytest.approx((fwd - generic) / km.hbm_bytes_per_s,
                                                   rel=1e-6)
    assert auto.bwd_s - a2a.bwd_s == pytest.approx(bwd / km.hbm_bytes_per_s - 2 * generic
                                                   / km.hbm_bytes_per_s, rel=1e-6)


def _deepspeed(plan_kw: dict, training: TrainingSpec = GROUPED) -> list[str]:
    plan_ = ParallelPlan(micro_batch_size=1, recompute="full", **plan_kw)
    m = 64 // (plan_.dp * 1)
    return reasons_by_framework(plan_, m, True, training, None, moe=True)["deepspeed"]


def test_autoep_runs_expert_parallel_plans_without_autotp_pipelines_or_mics():
    # ZeRO-2/3 over 16 ranks, the experts over 8 of them: runs. ZeRO-0/1 are held to
    # DeepSpeed's gradient rules of their own (its BF16_Optimizer), none about the experts.
    for zero in (2, 3):
        assert _deepspeed({"dp": 16, "ep": 8, "zero_stage": zero}) == [], zero
    for zero in (0, 1):
        assert not any("expert" in r for r in _deepspeed({"dp": 16, "ep": 8,
                                                          "zero_stage": zero}))
    # AutoTP folding, pipelines, MiCS and expert tensor parallelism: refused, saying why.
    for kw in ({"dp": 8, "tp": 2, "ep": 4, "zero_stage": 1},
               {"dp": 8, "pp": 2, "ep": 8, "zero_stage": 1},
               {"dp": 16, "ep": 8, "zero_stage": 3, "dp_replicate": 2},
               {"dp": 8, "tp": 2, "ep": 4, "etp": 2, "zero_stage": 1}):
        assert any(r.startswith("expert parallelism in this layout") for r in _deepspeed(kw))
    # AutoEP's experts run grouped GEMMs; without it DeepSpeed loops over them.
    per_expert = GROUPED.model_copy(update={"moe_expert_gemm": "per_expert"})
    assert any("AutoEP's experts run grouped GEMMs" in r
               for r in _deepspeed({"dp": 16, "ep": 8, "zero_stage": 3}, per_expert))
    assert _deepspeed({"dp": 16, "zero_stage": 3}, per_expert) == []
    assert any("DeepSpeed's Experts loop" in r for r in _deepspeed({"dp": 16, "zero_stage": 3}))
    assert CAPABILITIES["expert_parallel"]["deepspeed"].status == "partial"


def test_the_config_enables_autoep_and_keeps_reduce_scatter_for_the_experts():
    for zero in (2, 3):
        est = estimate(MIXTRAL, NODES, GROUPED,
                       ParallelPlan(dp=16, ep=8, micro_batch_size=1, zero_stage=zero,
                                    recompute="full"))
        assert "deepspeed" in est.frameworks
        cfg, notes = deepspeed_config(LaunchContext(est, MIXTRAL, NODES, GROUPED))
        assert cfg["expert_parallel"] == {"enabled": True, "autoep_size": 8}
        # ZeRO-1/2's MoE path asserts reduce_scatter: never turned off with experts (it
        # all-reduces the buckets either way, use_multi_rank_bucket_allreduce).
        assert cfg["zero_optimization"].get("reduce_scatter", True) is True
        assert any("AutoEP" in n and "0.19.2" in n for n in notes)
        assert any("split_params_into_different_moe_groups_for_optimizer" in n
                   for n in notes) is (zero == 2)
        got = deepspeed_plan(cfg, est.gpus_used, MIXTRAL.num_layers)
        assert (got["ep"], got["etp"], got["dp"], got["zero_stage"]) == (8, 1, 16, zero)
    # Without experts over several ranks the config has no AutoEP section, and ZeRO-2's
    # all-reduce of the buckets turns reduce_scatter off as before.
    llama = ModelSpec.from_preset("llama3-8b")
    dense = estimate(llama, NODES, GROUPED,
                     ParallelPlan(dp=16, micro_batch_size=1, zero_stage=2, recompute="full"))
    assert "deepspeed" in dense.frameworks
    cfg, _ = deepspeed_config(LaunchContext(dense, llama, NODES, GROUPED))
    assert "expert_parallel" not in cfg and cfg["zero_optimization"]["reduce_scatter"] is False


def test_random_moe_plans_deepspeed_runs_read_back_exactly():
    seen = 0
    for seed in range(60):
        req = random_moe_request(random.Random(seed))
        body = req.model_dump(mode="json")
        body["training"].update(moe_expert_gemm="grouped", moe_routing="autoep")
        body["search"] = {**body["search"], "framework": "deepspeed"}
        ds = PlanRequest.model_validate(body)
        got = plan(ds)
        if seed % 4 == 0:       # the search's answer is exhaustive enumeration's
            assert_equals_oracle(got, enumerate_top_k(ds))
        for p in got.plans:
            est = estimate(ds.model, ds.cluster, ds.training, ParallelPlan.model_validate(
                {k: getattr(p, k) for k in ("dp", "tp", "pp", "cp", "ep", "etp", "vpp",
                                           "micro_batch_size", "recompute", "zero_stage",
                                           "dp_replicate", "sequence_parallel")}))
            cfg, _ = deepspeed_config(LaunchContext(est, ds.model, ds.cluster, ds.training))
            check_same_plan(deepspeed_plan(cfg, est.gpus_used, ds.model.num_layers), est,
                            keys=("dp", "tp", "pp", "ep", "etp", "zero_stage",
                                  "micro_batch_size"))
            seen += p.ep > 1
    assert seen >= 10, seen


def test_a_deepspeed_search_of_a_moe_model_is_told_of_the_other_way_it_runs_experts():
    def request(model, nodes, gbs, gemm):
        return PlanRequest.model_validate({
            "model": {"preset": model}, "cluster": {"preset": "dgx-h100", "num_nodes": nodes},
            "training": {"global_batch_size": gbs, "seq_length": 4096,
                         "moe_expert_gemm": gemm},
            "search": {"framework": "deepspeed", "top_k": 1}})

    # A DeepSpeed search costs AutoEP's layer (FRAMEWORK_TRAINING: moe_routing 'autoep').
    assert request("mixtral-8x7b", 4, 256, "per_expert").training.moe_routing == "autoep"
    # Mixtral 8x7B (8 experts, top 2) on 32 H100: with one GEMM per expert DeepSpeed keeps
    # every expert on every GPU, gathering all of them under ZeRO-3; AutoEP over 8 ranks
    # gathers an eighth and is at least MIN_GAIN faster. The hint is that search's answer.
    result = answer(request("mixtral-8x7b", 4, 256, "per_expert"))
    assert result.plans[0].ep == 1
    (hint,) = result.settings_hints
    assert hint.changes == {"moe_expert_gemm": "grouped"} and "AutoEP" in hint.reason
    assert hint.plan["ep"] == 8 and hint.faster_pct >= 100 * MIN_GAIN
    again = plan(request("mixtral-8x7b", 4, 256, "grouped"))
    assert again.plans[0].step_time_s == pytest.approx(hint.step_time_s)
    # Qwen3-30B-A3B (128 experts, top 8) on 16 H100 the other way round: AutoEP's copies of
    # every token's 8 routed rows (permuted, unpermuted, combined in fp32) cost more than the
    # ZeRO-3 gathers they save, and a search asked for grouped GEMMs is told of the loop.
    qwen = answer(request("qwen3-30b-a3b", 2, 512, "grouped"))
    assert qwen.plans[0].ep > 1
    (back,) = qwen.settings_hints
    assert back.changes == {"moe_expert_gemm": "per_expert"} and back.plan["ep"] == 1
    # The README's figures.
    assert (round(hint.faster_pct, 1), round(back.faster_pct, 1)) == (6.5, 8.2)


def test_the_openapi_plan_examples_search():
    """Every plan example of the OpenAPI docs is a valid request with an answer; the AutoEP
    one's plans spread the experts over ranks and run on DeepSpeed, the all-to-all context
    parallel one's split the sequence."""
    from api.routes.examples import PLAN_EXAMPLES

    for name, example in PLAN_EXAMPLES.items():
        assert answer(PlanRequest.model_validate(example["value"])).plans, name
    autoep = answer(PlanRequest.model_validate(PLAN_EXAMPLES["deepspeed autoep"]["value"]))
    assert all(p.ep > 1 and p.frameworks == ["deepspeed"] for p in autoep.plans)
    a2a = answer(PlanRequest.model_validate(
        PLAN_EXAMPLES["long context, all-to-all CP"]["value"]))
    assert a2a.plans[0].cp > 1 and "megatron" in a2a.plans[0].frameworks
