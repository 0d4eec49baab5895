"""Specs: presets, Hugging Face config import and validation of nonsense."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner.errors import PlannerInputError
from planner.request import EstimateRequest, parse_request
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import plan_violations, stage_layers

HF = Path(__file__).parent / "data" / "hf_configs"


@pytest.mark.parametrize("preset,billions", [
    ("llama2-7b", 6.74), ("llama2-13b", 13.02), ("llama2-70b", 68.98), ("llama3-8b", 8.03),
    ("llama3-70b", 70.55), ("llama3-405b", 405.85), ("gpt3-175b", 174.57),
])
def test_preset_parameter_counts_match_the_published_sizes(preset, billions):
    assert ModelSpec.from_preset(preset).num_params / 1e9 == pytest.approx(billions, abs=0.01)


def test_llama2_7b_parameter_count_by_hand():
    # 32 x (4 h^2 + 3 h f + 2h) + 2 V h + h, h = 4096, f = 11008, V = 32000
    h, f, V = 4096, 11008, 32000
    expected = 32 * (4 * h * h + 3 * h * f + 2 * h) + 2 * V * h + h
    assert ModelSpec.from_preset("llama2-7b").num_params == expected == 6_738_415_616


@pytest.mark.parametrize("file,fields,billions", [
    ("llama3-8b.json", {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                        "kv_heads": 8, "ffn": 14336, "ffn_type": "swiglu", "vocab_size": 128256,
                        "tied_embeddings": False}, 8.03),
    ("mistral-7b-v0.1.json", {"kv_heads": 8, "ffn": 14336, "ffn_type": "swiglu",
                              "vocab_size": 32000}, 7.24),
    ("qwen2-7b.json", {"num_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
                       "kv_heads": 4, "ffn": 18944, "vocab_size": 152064}, 7.62),
    ("gpt2.json", {"num_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
                   "kv_heads": 12, "ffn": 3072, "ffn_type": "gelu", "tied_embeddings": True},
     0.124),
    ("gpt-neox-20b.json", {"num_layers": 44, "hidden_size": 6144, "ffn": 24576,
                           "ffn_type": "gelu", "tied_embeddings": False}, 20.55),
])
def test_hf_config_import(file, fields, billions):
    cfg = json.loads((HF / file).read_text())
    m = ModelSpec.model_validate({"hf_config": cfg})
    for key, value in fields.items():
        assert getattr(m, key) == value, key
    # Biases and learned positions are not counted: within 1% of the published size.
    assert m.num_params / 1e9 == pytest.approx(billions, rel=0.01)


def test_hf_config_from_a_preset_equals_the_preset():
    cfg = json.loads((HF / "llama3-8b.json").read_text())
    imported = ModelSpec.model_validate({"hf_config": cfg, "name": "llama3-8b"})
    assert imported == ModelSpec.from_preset("llama3-8b")


def test_unknown_architecture_names_the_missing_keys():
    with pytest.raises(ValidationError, match="lacks required keys: num_hidden_layers"):
        ModelSpec.model_validate({"hf_config": {"model_type": "mamba", "d_model": 768,
                                                "vocab_size": 50280}})
    with pytest.raises(ValidationError, match="intermediate_size"):
        ModelSpec.model_validate({"hf_config": {"model_type": "llama", "num_hidden_layers": 2,
                                                "hidden_size": 64, "num_attention_heads": 4,
                                                "vocab_size": 100}})


@pytest.mark.parametrize("fields,msg", [
    ({"num_layers": 2, "hidden_size": 100, "num_attention_heads": 3, "vocab_size": 10},
     "not divisible by num_attention_heads"),
    ({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "num_kv_heads": 3,
      "vocab_size": 10}, "not a multiple of num_kv_heads"),
    ({"num_layers": 0, "hidden_size": 64, "num_attention_heads": 8, "vocab_size": 10},
     "greater than or equal to 1"),
    ({"preset": "llama3-70b", "hiden_size": 3}, "Extra inputs are not permitted"),
    ({"preset": "llama4"}, "unknown preset 'llama4'"),
])
def test_model_rejects_nonsense(fields, msg):
    with pytest.raises(ValidationError, match=msg):
        ModelSpec.model_validate(fields)


def test_gpu_presets_and_missing_precision():
    h100 = GPUSpec.from_preset("h100-sxm")
    assert h100.peak_flops("bf16") == pytest.approx(989.4e12)
    assert h100.peak_flops("fp8") == pytest.approx(1978.9e12)
    assert GPUSpec.from_preset("a100-80gb").peak_flops("tf32") == pytest.approx(156e12)
    with pytest.raises(ValueError, match="no bf16 peak"):
        GPUSpec.from_preset("v100-32gb").peak_flops("bf16")
    assert GPUSpec.from_preset("h200-sxm").memory_gib == 141


def test_cluster_preset_with_overrides_merges_nested_links():
    c = ClusterSpec.model_validate({"preset": "dgx-h100", "num_nodes": 4, "gpu": "h200-sxm",
                                    "inter_node": {"bandwidth_gb_per_s": 100}})
    assert c.num_gpus == 32
    assert c.gpu.name == "h200-sxm"
    assert c.inter_node.bandwidth_gb_per_s == 100
    assert c.inter_node.kind == "infiniband"        # kept from the preset
    assert c.intra_node.effective_bandwidth == pytest.approx(450e9 * 0.8)
    with pytest.raises(ValidationError, match="network link"):
        ClusterSpec.model_validate({"preset": "dgx-a100", "intra_node": {"kind": "infiniband"}})
    local = ClusterSpec.from_preset("local-cpu")
    assert (local.num_gpus, local.gpu.name, local.intra_node.kind) == (4, "cpu", "loopback")


def test_training_optimizer_state_bytes():
    assert TrainingSpec(global_batch_size=8, seq_length=8).optimizer_state_bytes == 12
    assert TrainingSpec(global_batch_size=8, seq_length=8, precision="fp32").optimizer_state_bytes == 8
    assert TrainingSpec(global_batch_size=8, seq_length=8, optimizer="sgd").optimizer_state_bytes == 8
    # Megatron-LM's precision-aware optimizer: bf16 moments beside the fp32 master weights.
    low = TrainingSpec(global_batch_size=8, seq_length=8, optimizer_state_dtype="bf16")
    assert low.optimizer_state_bytes == 4 + 2 * 2
    fp8 = TrainingSpec(global_batch_size=8, seq_length=8, optimizer_state_dtype="fp8")
    assert fp8.optimizer_state_bytes == 4 + 2 * 1
    with pytest.raises(ValidationError, match="needs Adam"):
        TrainingSpec(global_batch_size=8, seq_length=8, optimizer="sgd",
                     optimizer_state_dtype="bf16")
    # Pure bf16 (torchtitan's training.dtype "bfloat16", torch.optim on bf16 weights): no
    # master copy, bf16 moments: 2 + 2 bytes of state; with fp32 moments 8; weights 2 and
    # gradients 2 bytes as before, so 8 bytes a parameter in all against mixed precision's 18.
    pure = TrainingSpec(global_batch_size=8, seq_length=8, master_weights=False,
                        grad_dtype="bf16", optimizer_state_dtype="bf16")
    assert (pure.param_bytes, pure.grad_bytes, pure.optimizer_state_bytes) == (2, 2, 4)
    assert pure.no_master_copy and not low.no_master_copy
    assert pure.model_copy(update={"optimizer_state_dtype": "fp32"}).optimizer_state_bytes == 8
    # fp32 training keeps no copy whatever the field says.
    fp32 = TrainingSpec(global_batch_size=8, seq_length=8, precision="fp32", master_weights=False)
    assert fp32.optimizer_state_bytes == 8 and not fp32.no_master_copy


def test_optimizer_step_bytes_worked_by_hand():
    t = TrainingSpec(global_batch_size=8, seq_length=8)
    # Reads the fp32 gradient, master weight and two moments, writes master, moments and the
    # bf16 working copy: (4 + 4 + 8) + (4 + 8 + 2).
    assert t.optimizer_step_bytes == 30
    assert t.model_copy(update={"optimizer_state_dtype": "bf16"}).optimizer_step_bytes == 22
    assert t.model_copy(update={"grad_dtype": "bf16"}).optimizer_step_bytes == 28
    # fp32 training: no master copy; the weight itself is read and written.
    assert TrainingSpec(global_batch_size=8, seq_length=8,
                        precision="fp32").optimizer_step_bytes == 4 + 16 + 8
    # Pure bf16: reads the bf16 gradient, the two bf16 moments and the weight, writes the
    # moments and the weight: 2 + 2 (2 + 2) + 2 (2).
    assert t.model_copy(update={"master_weights": False, "grad_dtype": "bf16",
                                "optimizer_state_dtype": "bf16"}).optimizer_step_bytes == 2 + 8 + 4


LLAMA70 = ModelSpec.from_preset("llama3-70b")
DGX96 = ClusterSpec.from_preset("dgx-h100", num_nodes=12)
TRAIN = TrainingSpec(global_batch_size=512, seq_length=4096)


@pytest.mark.parametrize("plan,field,reason", [
    (dict(dp=4, tp=8, pp=4), "plan", "dp(4) * tp(8) * pp(4) * cp(1) = 128 > GPUs(96)"),
    (dict(dp=3, tp=8, pp=4), "plan.micro_batch_size",
     "global_batch_size(512) is not divisible by dp(3) * micro_batch_size(1) = 3"),
    (dict(dp=2, tp=8, grad_accum_steps=3), "plan.grad_accum_steps",
     "dp(2) * micro_batch_size(1) * grad_accum_steps(3) = 6 != global_batch_size(512)"),
    (dict(dp=1, tp=16), "plan.tp", "num_kv_heads(8) is not divisible by tp(16)"),
    (dict(dp=1, tp=3), "plan.tp", "num_attention_heads(64) is not divisible by tp(3)"),
    (dict(dp=1, tp=8, pp=4, vpp=30), "plan.vpp",
     "pp(4) * vpp(30) = 120 model chunks cannot be filled by num_layers(80)"),
    (dict(dp=1, tp=8, cp=3), "plan.cp", "seq_length(4096) is not divisible by 2 * cp(3) = 6"),
    (dict(dp=1, tp=8, pp=2, layers_per_stage=(30, 30)), "plan.layers_per_stage",
     "sum[30, 30] = 60 != num_layers(80)"),
    (dict(dp=1, tp=8, pp=8, vpp=2, micro_batch_size=128), "plan.grad_accum_steps",
     "interleaved 1F1B needs grad_accum_steps(4) >= pp(8)"),
    (dict(dp=1, tp=8, pp=4, vpp=2, micro_batch_size=64, microbatch_group_size=5),
     "plan.microbatch_group_size", "leave a last group of 0 or >= pp micro-batches (8 % 5 = 3)"),
])
def test_plan_violations_show_the_arithmetic(plan, field, reason):
    found = plan_violations(ParallelPlan(**plan), LLAMA70, DGX96, TRAIN)
    assert (field, reason) in [(f, r) for f, r in found] or any(
        f == field and reason in r for f, r in found), found


def test_valid_plan_has_no_violations_and_uneven_split():
    assert plan_violations(ParallelPlan(dp=4, tp=8, pp=3), LLAMA70, DGX96, TRAIN) == []
    # Fewer micro-batches than stages (1F1B; Megatron-LM runs it) and layers that pp * vpp
    # does not divide (a custom layout) are plans, not errors.
    assert plan_violations(ParallelPlan(dp=1, tp=8, pp=8, micro_batch_size=128), LLAMA70,
                           DGX96, TRAIN) == []
    assert plan_violations(ParallelPlan(dp=1, tp=8, pp=3, vpp=2), LLAMA70, DGX96, TRAIN) == []
    # Middle stages equal (what Megatron-LM can launch): c = ceil(80 / 3) = 27, the first and
    # last stages share 80 - 27 = 53, the last (with the LM head) taking the smaller half.
    assert stage_layers(ParallelPlan(dp=4, tp=8, pp=3), LLAMA70) == (27, 27, 26)
    # c = ceil(80 / 6) = 14; the ends share 80 - 4 * 14 = 24.
    assert stage_layers(ParallelPlan(dp=2, tp=8, pp=6), LLAMA70) == (12, 14, 14, 14, 14, 12)
    # 10 layers on 8 stages: c = 2 would leave nothing for the ends, so c = 1.
    from planner.specs.layout import split_layers

    assert split_layers(10, 8) == (2, 1, 1, 1, 1, 1, 1, 2)
    for layers in range(1, 60):
        for pp in range(1, layers + 1):
            split = split_layers(layers, pp)
            assert sum(split) == layers and min(split) >= 1 and len(split) == pp
            assert len(set(split[1:-1])) <= 1


def test_plan_self_consistency():
    with pytest.raises(ValidationError, match="needs pipeline parallelism"):
        ParallelPlan(vpp=2)
    with pytest.raises(ValidationError, match="needs tensor parallelism"):
        ParallelPlan(sequence_parallel=True)
    assert ParallelPlan(dp=2, tp=4, pp=2, cp=2).world_size == 32


def test_parse_request_names_the_nested_field():
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100"},
            "training": {"global_batch_size": 8, "seq_length": -4}, "plan": {"dp": 8}}
    with pytest.raises(PlannerInputError) as info:
        parse_request(EstimateRequest, body)
    assert info.value.field == "training.seq_length"
    assert "greater than or equal to 1" in info.value.reason
    with pytest.raises(PlannerInputError, match="JSON object"):
        parse_request(EstimateRequest, [1, 2])


def test_an_allocation_too_large_to_place_is_refused_before_it_is_built():
    # The schema bounds each entry (a fuzzer's 123456789012 ran the service out of memory).
    with pytest.raises(ValidationError, match=r"free_gpus_per_node.0\n.*less than or equal "
                                              r"to 1024"):
        ClusterSpec.model_validate({"preset": "dgx-h100", "free_gpus_per_node": [123456789012]})
    with pytest.raises(ValidationError, match=r"free_gpus_per_node\[0\] = 9 is not in"):
        ClusterSpec.model_validate({"preset": "dgx-h100", "free_gpus_per_node": [9]})
    with pytest.raises(ValidationError, match="at most 1,048,576 are planned"):
        ClusterSpec.model_validate({"preset": "dgx-h100", "gpus_per_node": 1024,
                                    "free_gpus_per_node": [1024] * 2000})
