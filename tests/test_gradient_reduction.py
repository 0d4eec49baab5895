"""How the data-parallel gradients are reduced. ZeRO-1/2 plans that all-reduce them instead of
reduce-scattering them (TrainingSpec.zero_grad_allreduce): the gradient reduction costs a ring
all-reduce of the same bytes, about twice the reduce-scatter; the weight gather, plain data
parallelism and ZeRO-3 do not move; DeepSpeed's launch config says ``reduce_scatter: false``.
Gradients kept in one dtype and reduced in another (TrainingSpec.grad_reduce_dtype): memory
counts the first, the wire the second."""

import math

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.tables import CostTables
from planner.frameworks import reasons_by_framework
from planner.launch import with_launch
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

M8 = ModelSpec.from_preset("llama3-8b")
C16 = ClusterSpec.from_preset("dgx-a100", num_nodes=2)
TR = TrainingSpec(global_batch_size=64, seq_length=4096, overlap_grad_reduce=False,
                  overlap_param_gather=False)
AR = TR.model_copy(update={"zero_grad_allreduce": True})


def test_zero_1_all_reducing_pays_a_ring_all_reduce_of_the_same_bytes():
    """16 ranks over two nodes, one bucket of every fp32 gradient (no overlap): the ring
    all-reduce moves 2 (n - 1) / n of the bytes a rank holds, the reduce-scatter (n - 1) / n,
    so the gradient reduction takes twice as long but for the fixed latencies; the all-gather
    of the updated weights is the same."""
    plan = ParallelPlan(dp=16, zero_stage=1, micro_batch_size=1)
    rs, ar = (estimate(M8, C16, t, plan) for t in (TR, AR))
    assert rs.breakdown["zero_comm"] == ar.breakdown["zero_comm"] > 0
    assert ar.breakdown["dp_comm"] / rs.breakdown["dp_comm"] == pytest.approx(2.0, rel=0.02)
    tables = CostTables(M8, C16, AR, EfficiencyModel())
    (grads, gather) = tables.dp_uses(1, 1, 16, 1, float(M8.num_params), 8)
    assert (grads.cost.op, gather.cost.op) == ("all_reduce", "all_gather")
    assert grads.cost.message_bytes == M8.num_params * 4
    assert ar.step_time_s - rs.step_time_s == pytest.approx(
        ar.breakdown["dp_comm"] - rs.breakdown["dp_comm"], rel=1e-6)


@pytest.mark.parametrize("plan", [ParallelPlan(dp=16, zero_stage=0, micro_batch_size=1),
                                  ParallelPlan(dp=16, zero_stage=3, micro_batch_size=1)])
def test_plain_data_parallelism_and_zero_3_do_not_move(plan):
    assert estimate(M8, C16, AR, plan).step_time_s == estimate(M8, C16, TR, plan).step_time_s


def test_deepspeeds_config_turns_its_reduce_scatter_off():
    # bf16 gradients: DeepSpeed's ZeRO-1 optimizer (with fp32 ones it would be its
    # BF16_Optimizer, which all-reduces them anyway). Since 0.12.4 it all-reduces each bucket
    # even with reduce_scatter on (average_tensor: use_multi_rank_bucket_allreduce, true by
    # default), so it runs only the plan costed all-reducing; its config says reduce_scatter
    # false, the path that all-reduces each bucket whole.
    plan = ParallelPlan(dp=16, zero_stage=1, micro_batch_size=1)
    bf16 = {"grad_dtype": "bf16"}
    scattered = estimate(M8, C16, TR.model_copy(update=bf16), plan)
    assert "deepspeed" not in scattered.frameworks
    why = reasons_by_framework(plan, scattered.grad_accum_steps, True,
                               TR.model_copy(update=bf16))["deepspeed"]
    assert any("use_multi_rank_bucket_allreduce" in r for r in why), why
    training = AR.model_copy(update=bf16)
    est = with_launch(estimate(M8, C16, training, plan), M8, C16, training)
    assert "deepspeed" in est.frameworks
    cfg = est.launch.deepspeed_config
    assert cfg["zero_optimization"].get("reduce_scatter") is False
    assert cfg["data_types"] == {"grad_accum_dtype": "bf16"}
    assert cfg["communication_data_type"] == "bf16"


def test_deepspeeds_config_accumulates_and_reduces_in_the_costed_dtypes():
    # DeepSpeed's defaults are the weights' 16 bits for both; the config names what the plan
    # is costed with: fp32 gradients (ZeRO-1: its BF16_Optimizer, with the copy and the
    # all-reduce it runs), reduced in fp32.
    plan = ParallelPlan(dp=16, zero_stage=1, micro_batch_size=1)
    training = AR.model_copy(update={"microbatch_grad_copy": True})
    est = with_launch(estimate(M8, C16, training, plan), M8, C16, training)
    assert est.frameworks == ["deepspeed"]
    cfg = est.launch.deepspeed_config
    assert (cfg["data_types"], cfg["communication_data_type"]) == (
        {"grad_accum_dtype": "fp32"}, "fp32")


def test_bf16_gradients_reduced_in_fp32_keep_two_bytes_and_send_four():
    """Aleph Alpha's trainer: bf16 gradients on the parameters, all-reduced in fp32. Against
    fp32 gradients the memory holds 2 bytes a parameter less (8.03B parameters: 14.96 GiB
    less with ZeRO-1, which does not shard gradients) and the reduction moves the same bytes;
    against bf16 gradients reduced in bf16, twice the bytes. No framework runs the mix."""
    plan = ParallelPlan(dp=16, zero_stage=1, micro_batch_size=1)
    fp32, bf16 = (TR.model_copy(update={"grad_dtype": d}) for d in ("fp32", "bf16"))
    mixed = bf16.model_copy(update={"grad_reduce_dtype": "fp32"})
    a, b, c = (estimate(M8, C16, t, plan) for t in (fp32, bf16, mixed))
    saved = a.memory.gradients_gib - c.memory.gradients_gib
    assert saved == pytest.approx(M8.num_params * 2 / 2**30) and round(saved, 2) == 14.96
    assert c.memory.gradients_gib == b.memory.gradients_gib
    assert c.breakdown["dp_comm"] == pytest.approx(a.breakdown["dp_comm"])
    assert c.breakdown["dp_comm"] / b.breakdown["dp_comm"] == pytest.approx(2.0, rel=0.02)
    assert c.frameworks == [] and "megatron" in a.frameworks


def test_deepspeeds_config_reduces_in_the_buckets_the_plan_is_costed_with():
    # ZeRO-2 over 16 ranks, overlapped: the model reduces the 8.03B gradients in Megatron's
    # buckets of max(4e7, 1e6 x 16) = 40M parameters, 201 of them, the last one exposed; the
    # config sets DeepSpeed's buckets (5e8 elements by default, 17 of them) to the same.
    plan = ParallelPlan(dp=16, zero_stage=2, micro_batch_size=1)
    training = TR.model_copy(update={"overlap_grad_reduce": True, "grad_dtype": "bf16",
                                     "zero_grad_allreduce": True})
    est = with_launch(estimate(M8, C16, training, plan), M8, C16, training)
    assert "deepspeed" in est.frameworks
    zero = est.launch.deepspeed_config["zero_optimization"]
    assert zero["reduce_bucket_size"] == zero["allgather_bucket_size"] == 40_000_000
    tables = CostTables(M8, C16, training, EfficiencyModel())
    (grads, _) = tables.dp_uses(1, 1, 16, 2, float(M8.num_params), 8)
    assert grads.calls == math.ceil(M8.num_params / 40_000_000) == 201
    # Not overlapped, the model reduces in one bucket and the config leaves DeepSpeed's.
    quiet = training.model_copy(update={"overlap_grad_reduce": False})
    est = with_launch(estimate(M8, C16, quiet, plan), M8, C16, quiet)
    assert "reduce_bucket_size" not in est.launch.deepspeed_config["zero_optimization"]


@pytest.mark.parametrize("framework", ["deepspeed", "megatron", "torchtitan", "any"])
def test_a_deepspeed_search_costs_its_all_reduce_and_whole_logits(framework):
    """A DeepSpeed search costs ZeRO-1/2 all-reducing (average_tensor's
    use_multi_rank_bucket_allreduce) and the loss over AutoTP's whole logits; the other
    searches keep the defaults, and a request that names its own keeps it."""
    from planner.search import PlanRequest

    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "search": {"framework": framework}}
    tr = PlanRequest.model_validate(body).training
    deepspeed = framework == "deepspeed"
    assert (tr.zero_grad_allreduce, tr.vocab_parallel_loss) == (deepspeed, not deepspeed)
    body["training"].update(zero_grad_allreduce=False, vocab_parallel_loss=True)
    tr = PlanRequest.model_validate(body).training
    assert (tr.zero_grad_allreduce, tr.vocab_parallel_loss) == (False, True)
