"""Mixture-of-experts models: parameter counts against the published ones, HF import, the
expert parallel plan (rules, costs worked by hand, memory), the search against brute force,
frameworks and launch arguments."""

import json
import random
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.cost import estimate
from planner.cost.layers import per_expert_kernels
from planner.cost.memory import GIB
from planner.frameworks import reasons_by_framework
from planner.launch import with_launch
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import plan_violations
from tests.launch_readers import megatron_parser, megatron_plan, moe_layer_flags
from tests.search_oracle import assert_equals_oracle, enumerate_top_k

# (preset, published total, published active; the model cards and reports: Mixtral 46.7B /
# 12.9B and 141B / 39B, Qwen3 30.5B / 3.3B and 235B / 22B, DeepSeek-V3 671B / 37B (without
# its 14B multi-token-prediction module), gpt-oss-120b 116.83B / 5.13B (gpt-oss counts the
# active parameters without the embedding).
PUBLISHED = [
    ("mixtral-8x7b", 46.7e9, 12.9e9), ("mixtral-8x22b", 141e9, 39e9),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9), ("qwen3-235b-a22b", 235e9, 22e9),
    ("deepseek-v3", 671e9, 37e9), ("gpt-oss-120b", 116.83e9, 5.13e9),
]


@pytest.mark.parametrize("name,total,active", PUBLISHED)
def test_parameter_counts_match_the_published_ones(name, total, active):
    m = ModelSpec.from_preset(name)
    assert m.num_params == pytest.approx(total, rel=0.01)
    counted = m.active_params - (m.embedding_params if name == "gpt-oss-120b" else 0)
    # Active counts are published to two digits (3.3B is 3.35B rounded).
    assert counted == pytest.approx(active, rel=0.02)


def test_dense_models_count_every_parameter_as_active():
    m = ModelSpec.from_preset("llama3-70b")
    assert m.active_params == m.num_params and not m.is_moe and m.moe_share == 0


# config.json fields as published on the Hugging Face hub (transformers' config classes).
HF = {
    "mixtral-8x7b": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
                     "num_attention_heads": 32, "num_key_value_heads": 8,
                     "intermediate_size": 14336, "vocab_size": 32000,
                     "num_local_experts": 8, "num_experts_per_tok": 2,
                     "tie_word_embeddings": False},
    "qwen3-30b-a3b": {"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048,
                      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                      "intermediate_size": 6144, "moe_intermediate_size": 768,
                      "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
                      "mlp_only_layers": [], "vocab_size": 151936,
                      "tie_word_embeddings": False},
    "deepseek-v3": {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
                    "num_attention_heads": 128, "num_key_value_heads": 128,
                    "intermediate_size": 18432, "moe_intermediate_size": 2048,
                    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                    "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
                    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "scoring_func": "sigmoid", "vocab_size": 129280,
                    "n_group": 8, "topk_group": 4, "num_nextn_predict_layers": 1,
                    "tie_word_embeddings": False},
    "gpt-oss-120b": {"model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                     "intermediate_size": 2880, "num_local_experts": 128,
                     "num_experts_per_tok": 4, "sliding_window": 128,
                     "layer_types": ["sliding_attention", "full_attention"] * 18,
                     "vocab_size": 201088, "tie_word_embeddings": False},
}


@pytest.mark.parametrize("name", sorted(HF))
def test_hf_import_of_moe_configs_matches_the_presets(name):
    got = ModelSpec.model_validate({"hf_config": HF[name]})
    want = ModelSpec.from_preset(name)
    assert (got.num_params, got.active_params) == (want.num_params, want.active_params)
    for f in ("num_experts", "moe_top_k", "expert_ffn", "shared_ffn", "num_moe_layers",
              "mla", "num_sliding_window_layers", "moe_router_score", "router_groups",
              "mtp_num_layers"):
        assert getattr(got, f) == getattr(want, f), f


def test_qwen2_moe_shared_experts_and_sparse_step_import():
    cfg = {"model_type": "qwen2_moe", "num_hidden_layers": 8, "hidden_size": 512,
           "num_attention_heads": 8, "intermediate_size": 2048, "moe_intermediate_size": 256,
           "shared_expert_intermediate_size": 1024, "num_experts": 16,
           "num_experts_per_tok": 4, "decoder_sparse_step": 2, "mlp_only_layers": [0],
           "vocab_size": 1000}
    m = ModelSpec.model_validate({"hf_config": cfg})
    # Layers 1, 3, 5, 7 are sparse ((i + 1) % 2 == 0, i not in mlp_only_layers).
    assert (m.num_moe_layers, m.shared_ffn, m.first_k_dense_layers) == (4, 1024, 1)
    h = 512
    attn = 4 * h * h
    moe_layer = h * 16 + 3 * h * 1024 + 16 * 3 * h * 256
    dense_layer = 3 * h * 2048
    assert m.num_params == 8 * (attn + 2 * h) + 4 * moe_layer + 4 * dense_layer + 2 * 1000 * h + h
    bad = {**cfg, "mlp_only_layers": [3]}
    with pytest.raises(ValueError, match="only leading dense layers"):
        ModelSpec.model_validate({"hf_config": bad})


def test_moe_layer_count_counts_every_layer_the_rule_makes_moe():
    """``num_moe_layers``'s closed form against the rule layer by layer: layer i is MoE when
    i >= first_k_dense_layers and (i + 1) % moe_layer_freq == 0."""
    for layers in range(1, 30):
        for k in range(0, 31, 3):
            for f in range(1, 8):
                if not any(i >= k and (i + 1) % f == 0 for i in range(layers)):
                    continue              # (the spec refuses a MoE model with no MoE layer)
                m = ModelSpec(name="m", num_layers=layers, hidden_size=64, num_attention_heads=4,
                              ffn_hidden_size=256, vocab_size=100, num_experts=4, moe_top_k=2,
                              first_k_dense_layers=k, moe_layer_freq=f)
                assert m.num_moe_layers == sum(i >= k and (i + 1) % f == 0 for i in range(layers))


TINY = ModelSpec(name="tiny-moe", num_layers=4, hidden_size=1024, num_attention_heads=8,
                 ffn_hidden_size=4096, ffn_type="swiglu", vocab_size=1000, num_experts=8,
                 moe_top_k=2, moe_ffn_hidden_size=2048)
NODE = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
TRAIN = TrainingSpec(global_batch_size=16, seq_length=1024, moe_load_imbalance=1.25)


def test_expert_parallel_costs_worked_by_hand():
    est = estimate(TINY, NODE, TRAIN, ParallelPlan(dp=8, ep=4, zero_stage=1))
    h, s, k, load = 1024, 1024, 2, 1.25
    # Each GPU dispatches T k / tp = 2048 token copies; the busiest receives 1.25x the mean.
    a2a = [c for c in est.communication if c.strategy == "EP"]
    assert len(a2a) == 1 and a2a[0].op == "all_to_all"
    assert a2a[0].message_bytes == 2048 * load * h * 2
    # 2 micro-batches x 4 MoE layers x (dispatch + combine, forward and backward).
    assert a2a[0].count_per_step == 2 * 4 * 4
    assert (a2a[0].group_size, a2a[0].tier) == (4, "intra_node")
    assert est.breakdown["ep_comm"] == pytest.approx(a2a[0].total_time_s, rel=1e-9)
    # Expert gradients reduce over the expert data parallel group: 8 / 4 = 2 ranks.
    grads = [c for c in est.communication if c.strategy == "DP"]
    assert sorted(c.group_size for c in grads) == [2, 8]
    # Weights: the non-expert part whole (tp = 1), a quarter of the experts (ep = 4).
    nonexpert = 4 * (4 * h * h + 8 * h + 2 * h) + 2 * 1000 * h
    experts = 4 * 8 * 3 * h * 2048 / 4
    assert est.memory.weights_gib * GIB == pytest.approx(2 * (nonexpert + experts), rel=1e-9)
    # Model FLOPs count the active experts at the mean load (not the busiest rank's).
    per_token = 2 * (4 * h * h + h * 8 + k * 3 * h * 2048) + 2 * 2 * s * h
    vocab = 1024                                      # padded to a multiple of 128
    flops = 3 * 16 * s * (4 * per_token + 2 * vocab * h)
    assert est.tflops_per_gpu * 1e12 * est.step_time_s * 8 == pytest.approx(flops, rel=1e-9)
    assert est.parameters.total == TINY.num_params
    assert est.parameters.active == TINY.num_params - 4 * 6 * 3 * h * 2048


def test_per_expert_gemms_pay_a_kernel_each_worked_by_hand():
    """TE's GroupedLinear launches one cuBLAS GEMM per local expert (and, in fp8 with current
    scaling, amax + scale + cast per expert tensor); a grouped kernel launches one. TINY has 8
    experts: ep 4 leaves 2 a GPU, so one more GEMM launch per routed GEMM and pass."""
    assert per_expert_kernels(TINY, TRAIN, ParallelPlan(dp=8, ep=4)) == (2.0, 4.0)
    fp8 = TRAIN.model_copy(update={"precision": "fp8", "fp8_recipe": "tensorwise"})
    # Forward: 2 GEMMs + 2 inputs x 3 quantising kernels; backward 4 GEMMs + 2 gradients x 3.
    assert per_expert_kernels(TINY, fp8, ParallelPlan(dp=8)) == (7 * 8, 7 * 10)
    delayed = fp8.model_copy(update={"fp8_recipe": "delayed"})    # one fused multi-tensor cast
    assert per_expert_kernels(TINY, delayed, ParallelPlan(dp=8)) == (7 * 2, 7 * 4)
    grouped = TRAIN.model_copy(update={"moe_expert_gemm": "grouped"})
    assert per_expert_kernels(TINY, grouped, ParallelPlan(dp=8)) == (0.0, 0.0)
    assert per_expert_kernels(TINY, TRAIN, ParallelPlan(dp=8, ep=8)) == (0.0, 0.0)
    # In the step: every MoE layer (4) and micro-batch (2) pays them at the per-kernel cost
    # (2.5 us), forward and backward; the longer backward hides more of the gradient
    # reduction, so the step grows by less.
    plan = ParallelPlan(dp=8, zero_stage=1)
    per, one = estimate(TINY, NODE, TRAIN, plan), estimate(TINY, NODE, grouped, plan)
    kernels = 4 * 2 * 7 * (2 + 4)
    assert per.breakdown["compute"] - one.breakdown["compute"] == pytest.approx(
        kernels * 2.5e-6, rel=1e-6)
    assert 0 < per.step_time_s - one.step_time_s < kernels * 2.5e-6
    assert per.breakdown["dp_comm"] < one.breakdown["dp_comm"]


def test_expert_parallelism_and_imbalance_move_the_step_the_right_way():
    def step(**kw):
        training = TRAIN.model_copy(update=kw.pop("training", {}))
        return estimate(TINY, NODE, training, ParallelPlan(dp=8, zero_stage=1, **kw))
    one, four = step(ep=1), step(ep=4)
    assert four.memory.weights_gib < one.memory.weights_gib
    assert one.breakdown["ep_comm"] == 0 and four.breakdown["ep_comm"] > 0
    balanced = step(ep=4, training={"moe_load_imbalance": 1.0})
    assert balanced.step_time_s < four.step_time_s
    assert balanced.tflops_per_gpu > four.tflops_per_gpu
    # A capacity factor caps the busiest rank's load (tokens beyond it are dropped).
    capped = step(ep=4, training={"moe_capacity_factor": 1.0})
    assert capped.step_time_s == pytest.approx(balanced.step_time_s, rel=1e-12)
    # Expert tensor parallelism adds its all-gather and reduce-scatter over the ETP group.
    etp = estimate(TINY, NODE, TRAIN, ParallelPlan(dp=4, tp=2, ep=4, etp=2, zero_stage=1,
                                                   sequence_parallel=True))
    ops = sorted(c.op for c in etp.communication if c.strategy == "EP")
    assert ops == ["all_gather", "all_to_all", "reduce_scatter"]


@pytest.mark.parametrize("plan_kw,field,words", [
    ({"dp": 8, "ep": 3}, "plan.ep", "num_experts(8) is not divisible by ep(3)"),
    ({"dp": 2, "pp": 4, "ep": 4}, "plan.ep", "does not divide tp(1) * cp(1) * dp(2)"),
    ({"dp": 4, "tp": 2, "ep": 2, "etp": 3}, "plan.etp", "not divisible by etp(3)"),
])
def test_expert_plans_breaking_the_folding_rules_are_refused(plan_kw, field, words):
    out = plan_violations(ParallelPlan(**plan_kw), TINY, NODE, TRAIN)
    assert any(f == field and words in r for f, r in out), out


def test_zero3_of_a_moe_model_gathers_the_experts_over_the_expert_data_parallel_group():
    est = estimate(TINY, NODE, TRAIN, ParallelPlan(dp=8, ep=4, zero_stage=3))
    z = sorted((c.op, c.group_size, c.message_bytes) for c in est.communication
               if c.strategy in ("ZeRO", "DP"))
    h = 1024
    dense = 4 * h * h + 8 * h + 2 * h             # attention, router, norms
    experts = 8 * 3 * h * 2048 / 4                # the layer's experts on one of 4 EP ranks
    # Per layer: the dense weights over all 8 ranks, the local experts over edp = 8 / 4 = 2.
    assert z == sorted([("all_gather", 8, 2 * dense), ("reduce_scatter", 8, 4 * dense),
                        ("all_gather", 2, 2 * experts), ("reduce_scatter", 2, 4 * experts)])
    # Weights: the dense part over 8 ranks, the experts over the 2 that share them.
    nonexpert = 4 * dense + 2 * 1000 * h
    assert est.memory.weights_gib * GIB == pytest.approx(
        2 * (nonexpert / 8 + 4 * experts / 2), rel=1e-9)
    # torchtitan shards experts with FSDP2 over dp_shard * cp * tp / ep: it runs this plan,
    # costed with FSDP2's per-parameter copies (and its experts' torch._grouped_mm, and its
    # MoE layer's own token copies, training.moe_routing).
    fsdp2 = TRAIN.model_copy(update={"zero3_per_parameter": True,
                                     "moe_expert_gemm": "grouped", "moe_routing": "torchtitan"})
    assert "torchtitan" not in est.frameworks
    assert "torchtitan" in estimate(TINY, NODE, fsdp2, ParallelPlan(dp=8, ep=4, zero_stage=3)
                                    ).frameworks


def test_expert_degrees_need_a_moe_model():
    dense = TINY.model_copy(update={"num_experts": None, "moe_top_k": None})
    out = plan_violations(ParallelPlan(dp=8, ep=2), dense, NODE, TRAIN)
    assert out == [("plan.ep", "ep(2) needs a mixture-of-experts model (num_experts > 1)")]


def test_frameworks_that_cannot_run_a_moe_plan_say_why():
    def reasons(**kw):
        return reasons_by_framework(ParallelPlan(**kw), 2, True, TRAIN, moe=True)
    r = reasons(dp=4, tp=2, ep=4)
    assert any("sequence parallelism" in x for x in r["megatron"])
    assert any("expert parallelism" in x for x in r["deepspeed"])
    assert reasons(dp=4, tp=2, ep=4, sequence_parallel=True)["megatron"] == []
    # torchtitan: EP borrows from FSDP and TP; with DDP (ZeRO-0) nothing but cp * tp. (Its
    # TP runs as DTensor's: costed with the blocking reduce-scatters.)
    blocking = TRAIN.model_copy(update={"async_tensor_model_parallel_allreduce": False,
                                        "moe_expert_gemm": "grouped",
                                        "moe_routing": "torchtitan"})
    # Nothing FSDP-sharded (dp shard x cp = 1): its MoE models build the experts' sharding
    # from the FSDP mesh, which does not exist then, and it would train in fp32.
    alone = reasons_by_framework(ParallelPlan(dp=1, tp=2, pp=4, ep=2, sequence_parallel=True),
                                 2, True, blocking, moe=True)["torchtitan"]
    assert any("expert layout" in x for x in alone) and any("fp32" in x for x in alone)
    piped = blocking.model_copy(update={"grad_reduce_after_last_backward": True,
                                        "zero3_per_parameter": True,
                                        "microbatch_grad_upcast": True})
    assert reasons_by_framework(ParallelPlan(dp=2, tp=2, pp=2, ep=2, zero_stage=1,
                                             sequence_parallel=True),
                                2, True, piped, moe=True)["torchtitan"] == []
    assert any("expert layout" in x for x in
               reasons(dp=2, tp=2, pp=2, ep=4, sequence_parallel=True)["torchtitan"])
    # How the experts' GEMMs launch: Megatron-Core's TE GroupedLinear one per expert,
    # torchtitan's torch._grouped_mm one for all, DeepSpeed's Experts a loop.
    plan = {"dp": 8, "ep": 4}
    assert any("torch._grouped_mm" in x for x in reasons(**plan)["torchtitan"])
    grouped = reasons_by_framework(ParallelPlan(**plan), 2, True,
                                   TRAIN.model_copy(update={"moe_expert_gemm": "grouped"}),
                                   moe=True)
    assert any("GroupedLinear" in x for x in grouped["megatron"])
    assert not any("torch._grouped_mm" in x for x in grouped["torchtitan"])
    # A dense model's plan is not held to the MoE rules.
    assert reasons_by_framework(ParallelPlan(dp=4, tp=2), 2, True, TRAIN)["megatron"] == []
    dense = reasons_by_framework(ParallelPlan(dp=8), 2, True, TRAIN)
    assert not any("torch._grouped_mm" in x for x in dense["torchtitan"])


def random_moe_request(rng: random.Random, mtp: int = 0) -> PlanRequest:
    heads = rng.choice([2, 4])
    layers = rng.randint(2, 6)
    experts = rng.choice([2, 4, 8])
    gpn = rng.choice([2, 4])
    search = {"top_k": rng.randint(1, 6), "rebalance_stages": False,
              "memory_headroom": rng.choice([0.0, 0.05]), "partial_recompute": False}
    if rng.random() < 0.3:
        search["ep"] = rng.choice([1, 2, [2, 4]])
    return PlanRequest.model_validate({
        "model": {"name": "tiny-moe", "num_layers": layers, "hidden_size": heads * 16,
                  "num_attention_heads": heads, "ffn_hidden_size": heads * 32,
                  "ffn_type": "swiglu", "vocab_size": 97, "num_experts": experts,
                  "moe_top_k": rng.randint(1, 2), "moe_ffn_hidden_size": heads * 8,
                  "first_k_dense_layers": rng.choice([0, 0, 1]),
                  "mtp_num_layers": mtp},
        "cluster": {"preset": "dgx-a100", "num_nodes": rng.choice([1, 2]), "gpus_per_node": gpn,
                    "gpu": {"preset": "a100-80gb", "memory_gib": rng.uniform(0.002, 0.03)}},
        "training": {"global_batch_size": rng.choice([2, 4, 8]),
                     "seq_length": rng.choice([32, 64]),
                     "moe_load_imbalance": rng.choice([1.0, 1.3])},
        "search": search,
        "efficiency": {"memory_reserve_gib": 0.0},
    })


@pytest.mark.parametrize("seed", range(40))
def test_moe_search_equals_exhaustive_enumeration(seed):
    req = random_moe_request(random.Random(seed), mtp=int(seed % 3 == 0))
    assert_equals_oracle(plan(req), enumerate_top_k(req))


def test_mixtral_on_32_h100_plans_expert_parallelism_megatron_runs():
    req = PlanRequest.model_validate({
        "model": {"preset": "mixtral-8x7b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
        "training": {"global_batch_size": 256, "seq_length": 4096}})
    res = plan(req)
    best = res.plans[0]
    assert res.search.status == "OPTIMAL" and best.ep > 1 and best.fits_in_memory
    assert "megatron" in best.frameworks and "deepspeed" not in best.frameworks
    launched = with_launch(best, req.model, req.cluster, req.training)
    argv = launched.launch.megatron_args
    got = megatron_plan(argv, best.gpus_used)
    for key in ("dp", "tp", "pp", "cp", "vpp", "ep", "etp", "micro_batch_size",
                "grad_accum_steps", "layers_per_stage"):
        assert got[key] == getattr(best, key), key
    a = megatron_parser().parse_args(argv)
    assert (a.num_experts, a.moe_router_topk, a.moe_ffn_hidden_size) == (8, 2, 14336)
    assert a.moe_grouped_gemm and a.moe_token_dispatcher_type == "alltoall"


def test_megatron_moe_layer_pattern_marks_the_leading_dense_layers():
    m = ModelSpec.from_preset("deepseek-v3")
    est = estimate(m, ClusterSpec.from_preset("dgx-h100", num_nodes=32),
                   TrainingSpec(global_batch_size=1024, seq_length=4096),
                   ParallelPlan(dp=32, pp=8, ep=32, zero_stage=1, recompute="full"))
    argv = with_launch(est, m, ClusterSpec.from_preset("dgx-h100", num_nodes=32),
                       TrainingSpec(global_batch_size=1024, seq_length=4096)).launch.megatron_args
    a = megatron_parser().parse_args(argv)
    assert moe_layer_flags(a.moe_layer_freq, 61) == [0] * 3 + [1] * 58
    assert a.multi_latent_attention and (a.q_lora_rank, a.kv_lora_rank) == (1536, 512)
    assert a.moe_shared_expert_intermediate_size == 2048
    assert (a.moe_router_num_groups, a.moe_router_group_topk) == (8, 4)


def test_cli_plans_a_moe_model_and_shows_expert_degrees(tmp_path):
    req = tmp_path / "moe.json"
    req.write_text(json.dumps({"model": {"preset": "qwen3-30b-a3b"},
                               "cluster": {"preset": "dgx-h100", "num_nodes": 1},
                               "training": {"global_batch_size": 64, "seq_length": 4096},
                               "search": {"top_k": 2}}))
    res = CliRunner().invoke(app, ["plan", str(req)])
    assert res.exit_code == 0, res.output
    assert " ep " in res.stdout.replace("┃", " ") and "ep_comm" in res.stdout
    js = CliRunner().invoke(app, ["plan", str(req), "--json"])
    body = json.loads(js.stdout)
    best = body["plans"][0]
    assert best["parameters"]["total"] == ModelSpec.from_preset("qwen3-30b-a3b").num_params
    assert best["ep"] >= 1 and "ep_comm" in best["breakdown"]


def test_deepep_dispatch_sends_a_token_once_per_remote_node_worked_by_hand():
    from planner.collectives import NCCL_BASE_LATENCY_S
    from planner.cost.efficiency import EfficiencyModel
    from planner.cost.tables import CostTables

    model = TINY.model_copy(update={"num_experts": 16})
    two = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    plain = TRAIN.model_copy(update={"moe_load_imbalance": 1.0})
    deep = plain.model_copy(update={"moe_dispatcher": "deepep"})
    plan_ = ParallelPlan(dp=16, ep=16, zero_stage=1)
    a, b = (estimate(model, two, t, plan_) for t in (plain, deep))
    ea = next(c for c in a.communication if c.strategy == "EP")
    eb = next(c for c in b.communication if c.strategy == "EP")
    assert eb.algorithm.startswith("deepep") and ea.message_bytes == eb.message_bytes
    # Per rank: 1024 tokens of 1024 bf16 values. Its 2 experts fall on 2 distinct GPUs (one
    # expert each) and on the other node with probability 1 - C(8, 2) / C(16, 2) = 0.7667.
    tokens = 1024 * 1024 * 2
    g = CostTables(model, two, deep, EfficiencyModel()).group(16, 1, 8)
    want = (NCCL_BASE_LATENCY_S["direct"][2] + g.flat_link.alpha_s
            + max(tokens * 2 * 7 / 8 / g.intra.bandwidth,
                  tokens * (1 - 28 / 120) / g.inter.bandwidth))
    assert eb.time_s == pytest.approx(want, rel=1e-12)
    # The plain all-to-all sends both copies, half of them across the network.
    assert ea.time_s > eb.time_s and b.step_time_s < a.step_time_s


def test_all_to_all_overlap_hides_the_ep_traffic_and_megatron_states_its_limits():
    overlapped = TRAIN.model_copy(update={"moe_a2a_overlap": True})
    p = ParallelPlan(dp=8, ep=8, zero_stage=1)
    plain, hidden = estimate(TINY, NODE, TRAIN, p), estimate(TINY, NODE, overlapped, p)
    assert hidden.breakdown["ep_comm"] < plain.breakdown["ep_comm"]
    assert hidden.step_time_s < plain.step_time_s
    r = reasons_by_framework(ParallelPlan(dp=8, ep=8, recompute="full"), 2, True, overlapped,
                             moe=True)
    assert any("all-to-all overlap" in x for x in r["megatron"])
    assert any("DualPipeV" in x for x in r["torchtitan"])
    r = reasons_by_framework(ParallelPlan(dp=4, pp=2, ep=4), 2, True, overlapped, moe=True)
    assert any("interleaving" in x for x in r["megatron"])
    assert reasons_by_framework(p, 2, True, overlapped, moe=True)["megatron"] == []


def _routed_hit_by_enumeration(E, k, unit, G, g):
    """P(the unit of experts [0, unit) gets a copy) over every equally likely routing: g of G
    groups, then k experts among theirs (balanced, group-limited routing)."""
    from itertools import combinations
    s, hits, total = E // G, 0, 0
    for groups in combinations(range(G), g):
        pool = [e for grp in groups for e in range(grp * s, (grp + 1) * s)]
        for chosen in combinations(pool, k):
            total += 1
            hits += any(e < unit for e in chosen)
    return hits / total


@pytest.mark.parametrize("E,k,unit,G,g", [
    (8, 2, 2, 1, 1), (8, 2, 1, 1, 1), (8, 2, 2, 4, 2), (8, 2, 4, 4, 2), (8, 3, 1, 4, 2),
    (12, 3, 6, 6, 3), (12, 4, 2, 3, 2), (16, 4, 8, 4, 1), (16, 4, 16, 4, 2)])
def test_routed_copy_probability_equals_exhaustive_enumeration(E, k, unit, G, g):
    from planner.cost.routing import unit_hit_probability
    assert unit_hit_probability(E, k, unit, G, g) == pytest.approx(
        _routed_hit_by_enumeration(E, k, unit, G, g), abs=1e-12)


def test_routed_copy_probability_worked_by_hand():
    from planner.cost.routing import unit_hit_probability
    # No groups: 1 - C(6, 2) / C(8, 2) = 13 / 28.
    assert unit_hit_probability(8, 2, 2) == pytest.approx(13 / 28)
    # 4 groups of 2, 2 picked: a group-sized unit is picked with probability 1/2, and then
    # misses both experts (drawn from the 4 of the 2 groups) only when they are the other
    # group's pair: 1/2 * (1 - 1 / 6).
    assert unit_hit_probability(8, 2, 2, 4, 2) == pytest.approx(0.5 * 5 / 6)
    # DeepSeek-V3 at EP 64 (32 experts a node, one group each): a token reaches at most 4 of
    # the 8 nodes, so the expected remote nodes fall from 7 x 0.662 to 7 x 0.454.
    free, limited = (unit_hit_probability(256, 8, 32, G, g) for G, g in ((1, 1), (8, 4)))
    assert free == pytest.approx(0.662, abs=1e-3) and limited == pytest.approx(0.454, abs=1e-3)
    assert 8 * limited <= 4


@pytest.mark.parametrize("fields,words", [
    ({"moe_router_num_groups": 8}, "go together"),
    ({"moe_router_num_groups": 3, "moe_router_group_topk": 1}, "does not divide"),
    ({"moe_router_num_groups": 4, "moe_router_group_topk": 5}, "exceeds moe_router_num_groups"),
    ({"moe_router_num_groups": 8, "moe_router_group_topk": 1}, "experts of 1 groups")])
def test_group_limited_routing_fields_are_checked(fields, words):
    with pytest.raises(ValueError, match=words):
        TINY.model_validate({**TINY.model_dump(), "num_experts": 16, "moe_top_k": 4, **fields})


def test_dispatch_latency_matches_the_megatron_core_moe_report_on_h100():
    """Megatron Core MoE report (arXiv 2603.07685) section 4.2.2, Table 7, H100: the model's
    NCCL all-to-all and DeepEP dispatch (``benchmarks/moe_dispatch.py``) land within 25% of
    every measured entry at EP 8 to 64 (-20% to +7%); without DeepSeek-V3's routing groups the
    deduplicated dispatch at EP 64 would be 39% slow."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import moe_dispatch

    rows = moe_dispatch.rows()
    assert [r["ep"] for r in rows] == [8, 16, 32, 64]
    for r in rows:
        assert r["alltoall_model_us"] == pytest.approx(r["alltoall_measured_us"], rel=0.25)
        assert r["deepep_model_us"] == pytest.approx(r["hybridep_measured_us"], rel=0.25)
    assert rows[-1]["deepep_model_without_groups_us"] > 1.3 * rows[-1]["hybridep_measured_us"]


def test_bf16_optimizer_states_let_the_published_deepseek_v3_plan_fit():
    """The Megatron Core MoE report's DeepSeek-V3 run on 1,024 H100 (Table 17: TP2 PP8 VPP4
    EP64) keeps Adam's moments in bf16 (section 9.2.2). With fp32 moments the plan needs more
    than 80 GiB; with bf16 ones it fits, the optimizer state shrinks by exactly a third and
    the optimizer step moves 22 bytes a parameter instead of 30; only Megatron-LM runs it."""
    m = ModelSpec.from_preset("deepseek-v3")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=128)
    t = TrainingSpec(global_batch_size=8192, seq_length=4096, precision="fp8",
                     fp8_recipe="blockwise",
                     moe_load_imbalance=1.0, moe_dispatcher="deepep", moe_a2a_overlap=True,
                     recompute_modules=("layernorm", "moe_act", "mla_up_proj", "mlp"))
    p = ParallelPlan(dp=64, tp=2, pp=8, vpp=4, ep=64, micro_batch_size=1,
                     recompute="selective", zero_stage=1, sequence_parallel=True,
                     layers_per_stage=[9, 8, 8, 8, 8, 8, 6, 6])
    fp32 = estimate(m, c, t, p)
    low = estimate(m, c, t.model_copy(update={"optimizer_state_dtype": "bf16"}), p)
    assert not fp32.fits_in_memory and low.fits_in_memory
    assert low.memory.optimizer_gib == pytest.approx(fp32.memory.optimizer_gib * 8 / 12)
    assert low.breakdown["optimizer"] == pytest.approx(fp32.breakdown["optimizer"] * 22 / 30)
    assert low.frameworks == ["megatron"]
    argv = with_launch(low, m, c, t.model_copy(update={"optimizer_state_dtype": "bf16"})
                       ).launch.megatron_args
    a = megatron_parser().parse_args(argv)
    assert a.use_precision_aware_optimizer and a.exp_avg_dtype == a.exp_avg_sq_dtype == "bf16"
    assert a.use_distributed_optimizer
    # Without the distributed optimizer Megatron-Core refuses the precision-aware optimizer.
    r = reasons_by_framework(p.model_copy(update={"zero_stage": 0}), 128, True,
                             t.model_copy(update={"optimizer_state_dtype": "bf16"}), moe=True)
    assert any("distributed optimizer" in x for x in r["megatron"])


def test_megatron_runs_the_fused_token_copies_it_is_costed_with():
    """A MoE plan is costed with Megatron-Core's fused permute and unpermute
    (training.moe_routing 'fused'); its launch turns them on (--moe-permute-fusion, a
    TransformerConfig field), and parses back with the rest."""
    model = ModelSpec.from_preset("mixtral-8x7b")
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    training = TrainingSpec(global_batch_size=256, seq_length=4096)
    est = estimate(model, cluster, training,
                   ParallelPlan(dp=32, ep=8, micro_batch_size=1, zero_stage=1,
                                recompute="selective"))
    assert "megatron" in est.frameworks
    args = with_launch(est, model, cluster, training).launch.megatron_args
    assert "--moe-permute-fusion" in args and "--moe-grouped-gemm" in args
    assert megatron_parser().parse_args(args).moe_permute_fusion is True


def test_the_all_to_all_dispatchers_sorts_by_local_expert_are_worked_by_hand():
    """Megatron-Core's all-to-all dispatcher sorts the rows it received by local expert and the
    outputs back (``sort_chunks_by_idxs``): read e and write e each, 4 e a row element each
    pass, where a rank holds more than one expert and the routing is Megatron-Core's."""
    from planner.cost import EfficiencyModel
    from planner.cost.layers import LayerShape, kernel_model, layer_work
    from planner.cost.moe_routing import chunk_sort_bytes
    from tests.cost_history import without_chunk_sorts

    assert chunk_sort_bytes("fused", "alltoall", 4, 1000, 2) == 8000
    assert chunk_sort_bytes("fused", "alltoall", 16, 1000, 1) == 4000
    # One expert a rank, DeepEP's dispatcher, torchtitan's and DeepSpeed's own layers: none.
    for args in (("fused", "alltoall", 1), ("fused", "deepep", 4),
                 ("torchtitan", "alltoall", 4), ("autoep", "alltoall", 4)):
        assert chunk_sort_bytes(*args, 1000, 2) == 0.0
    # In the layer: Qwen3-30B-A3B (every layer MoE, top 8 of 128, h 2048) at 4,096 tokens a
    # GPU, ep 8 (16 experts a rank), balanced: 32,768 rows of 2,048 elements received, so
    # 4 x 2 x 32,768 x 2,048 = 536,870,912 bytes more each pass.
    model = ModelSpec.from_preset("qwen3-30b-a3b")
    gpu = ClusterSpec.from_preset("dgx-h100").gpu
    training = TrainingSpec(global_batch_size=64, seq_length=4096, moe_load_imbalance=1.0)
    shape = LayerShape(1, 1, 1, "none", False, 8, 1)
    km = kernel_model(gpu, training, EfficiencyModel())
    now = layer_work(model, training, shape, gpu, EfficiencyModel())
    with without_chunk_sorts():
        then = layer_work(model, training, shape, gpu, EfficiencyModel())
    extra = 536_870_912 / km.hbm_bytes_per_s
    assert now.fwd_s - then.fwd_s == pytest.approx(extra, rel=1e-9)
    assert now.bwd_s - then.bwd_s == pytest.approx(extra, rel=1e-9)
    # ep 128 (one expert a rank) and DeepEP sort nothing.
    for t, s in ((training, LayerShape(1, 1, 1, "none", False, 128, 1)),
                 (training.model_copy(update={"moe_dispatcher": "deepep"}), shape)):
        a = layer_work(model, t, s, gpu, EfficiencyModel())
        with without_chunk_sorts():
            b = layer_work(model, t, s, gpu, EfficiencyModel())
        assert (a.fwd_s, a.bwd_s) == (b.fwd_s, b.bwd_s)


def test_the_gpu_outlasts_the_hosts_wait_at_each_dispatch_on_the_qwen3_runs():
    """README ('What the model leaves out, sized'): a fine-grained MoE block issues about 80
    kernels forward in bf16 (about 210 with fp8 current scaling) after the host waits for the
    token counts, 0.4 ms (1.05 ms) of host time at 5 us a launch; the model gives the GPU
    1.8 ms (bf16) and 2.5 ms (fp8) for a layer's forward in Megatron-Bridge's Qwen3-30B-A3B
    runs on 16 H100
    (ep 16, one 4,096-token sequence a micro-batch), so the wait does not make them
    host-bound."""
    from benchmarks.published_accuracy import load_runs
    from planner.cost import EfficiencyModel
    from planner.cost.tables import cost_tables

    corpus = {r["id"]: r for r in load_runs()}
    forward_ms = {}
    for run_id in ("mbridge-guide-qwen3-30b-a3b-h100-16-bf16",
                   "mbridge-2606-qwen3-30b-a3b-h100-16-fp8"):
        run = corpus[run_id]
        p = ParallelPlan.model_validate(run["plan"])
        tables = cost_tables(ModelSpec.model_validate(run["model"]),
                             ClusterSpec.model_validate(run["cluster"]),
                             TrainingSpec.model_validate(run["training"]),
                             EfficiencyModel.model_validate(run.get("efficiency") or {}))
        assert (p.ep, p.micro_batch_size, p.recompute) == (16, 1, "none")
        layer = tables.layer(p.tp, p.cp, p.micro_batch_size, 0, int(p.sequence_parallel), 8,
                             p.ep, p.etp)
        forward_ms[run_id] = round(layer.fwd * 1e3, 1)
    assert forward_ms == {"mbridge-guide-qwen3-30b-a3b-h100-16-bf16": 1.8,
                          "mbridge-2606-qwen3-30b-a3b-h100-16-fp8": 2.5}
