"""``training.microbatch_grad_upcast``: under a pipeline, torch.distributed.pipelining turns
FSDP's gradient sync off for every backward (``stage.py``: ``set_requires_gradient_sync(False)``,
the reduce-scatter after the last backward by hand), so FSDP2 keeps each stage's unsharded
gradients and adds every micro-batch's bf16 ones into fp32 ones, its reduce dtype
(``_fsdp_param.py``: ``to_accumulated_grad_if_needed``, ``accumulate_unsharded_grad_if_needed``)
on the compute stream: 10 bytes of HBM traffic a parameter and one kernel a parameter tensor per
micro-batch. torchtitan runs it (its ``mixed_precision_reduce`` is always float32); Megatron-LM
accumulates inside the weight-gradient GEMMs."""

import pytest

from planner.cost.batch import GRAD_UPCAST_BYTES, LAYER_PARAM_TENSORS
from planner.cost.step import estimate
from planner.frameworks import capability_matrix, reasons_by_framework
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

MODEL = ModelSpec.from_preset("llama3-8b")
CLUSTER = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
PIPELINED = ParallelPlan(dp=2, pp=4, micro_batch_size=1, zero_stage=1, recompute="none")


def training(upcast: bool) -> TrainingSpec:
    return TrainingSpec(global_batch_size=16, seq_length=4096, microbatch_grad_upcast=upcast)


def test_each_micro_batch_pays_ten_bytes_a_parameter_of_the_slowest_stage():
    """Llama 3 8B over pp 4, 8 layers a stage, 8 micro-batches: the last stage (the slowest,
    with the LM head) holds 8 x 218,112,000 layer parameters and the head's 128,256 x 4,096 =
    525,336,576. Each micro-batch adds 10 bytes a parameter at H100's achieved HBM rate and
    12 kernels a layer; the step's per-micro-batch time grows by exactly that, 8 times."""
    layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    assert layer == 218_112_000
    stage = 8 * layer + 128_256 * 4096
    hbm = CLUSTER.gpu.memory_bandwidth_gb_per_s * 1e9 * CLUSTER.gpu.hbm_efficiency
    per_mb = stage * GRAD_UPCAST_BYTES / hbm + 8 * LAYER_PARAM_TENSORS * 2.5e-6
    assert round(per_mb * 1e3, 1) == 7.8                  # ms, as the README says
    off, on = (estimate(MODEL, CLUSTER, training(u), PIPELINED) for u in (False, True))
    assert on.grad_accum_steps == 8 and on.layers_per_stage == [8, 8, 8, 8]
    assert on.breakdown["overhead"] - off.breakdown["overhead"] == pytest.approx(8 * per_mb,
                                                                                rel=1e-9)
    assert round(100 * (on.step_time_s / off.step_time_s - 1)) == 6
    for key in ("compute", "dp_comm", "zero_comm", "optimizer"):
        assert on.breakdown[key] == off.breakdown[key]


def test_only_plans_whose_fsdp_shards_under_a_pipeline_pay_it():
    """No pipeline (FSDP reduce-scatters every micro-batch, ZeRO-3 here), no sharding (dp 1),
    or no ZeRO: the flag changes nothing."""
    for fields in (dict(dp=8, zero_stage=3), dict(dp=1, pp=8, zero_stage=1),
                   dict(dp=2, pp=4, zero_stage=0)):
        p = ParallelPlan(micro_batch_size=1, recompute="none", **fields)
        a, b = (estimate(MODEL, CLUSTER, training(u), p).step_time_s for u in (False, True))
        assert a == b, fields


def test_torchtitan_runs_pipelined_fsdp_only_with_it_and_megatron_only_without():
    def reasons(upcast):
        return reasons_by_framework(PIPELINED, 8, True, training(upcast))

    without, with_ = reasons(False), reasons(True)
    assert any("microbatch_grad_upcast" in r for r in without["torchtitan"])
    assert not any("microbatch_grad_upcast" in r for r in with_["torchtitan"])
    assert any("microbatch_grad_upcast" in r for r in with_["megatron"])
    assert not any("microbatch_grad_upcast" in r for r in without["megatron"])
    row = capability_matrix()["microbatch_gradient_upcast"]
    assert (row["torchtitan"]["status"], row["megatron"]["status"]) == ("yes", "no")


def test_a_torchtitan_search_costs_it_on_its_pipelined_plans():
    """A torchtitan search sets the switch (the request leaves it unset): its pipelined plans
    carry the accumulation; the same request for Megatron-LM costs none."""
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 16, "seq_length": 4096},
            "search": {"pp": [4], "top_k": 1}}
    titan = PlanRequest.model_validate({**body, "search": {**body["search"],
                                                           "framework": "torchtitan"}})
    assert titan.training.microbatch_grad_upcast is True
    mega = PlanRequest.model_validate({**body, "search": {**body["search"],
                                                          "framework": "megatron"}})
    assert mega.training.microbatch_grad_upcast is False
    best = plan(titan).plans[0]
    assert best.pp == 4 and "torchtitan" in best.frameworks
    fields = {k: getattr(best, k) for k in ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size",
                                            "recompute", "zero_stage", "sequence_parallel")}
    same, unset = (estimate(MODEL, CLUSTER, titan.training.model_copy(
        update={"microbatch_grad_upcast": u}), ParallelPlan(**fields)) for u in (True, False))
    assert best.step_time_s == pytest.approx(same.step_time_s, rel=1e-9)
    assert same.step_time_s > unset.step_time_s


def test_the_fp32_accumulators_are_in_memory_where_the_gradients_are_16_bit():
    """torchtitan's pure bf16 (training.dtype "bfloat16": bf16 gradients reduced in fp32)
    under a pipeline: the unsharded gradients FSDP2 keeps between micro-batches are its fp32
    accumulators, 4 bytes a parameter of the stage, not the 2 of bf16 gradients; with fp32
    gradients (the default) nothing changes. Stage 0 of Llama 3 8B on pp 4 holds 8 layers and
    the embedding: 2,270,232,576 parameters, 8.457 GiB of fp32 gradients."""
    pure = {"master_weights": False, "grad_dtype": "bf16", "grad_reduce_dtype": "fp32",
            "optimizer_state_dtype": "bf16", "zero3_per_parameter": True}
    gib = 2 ** 30
    stage = 8 * 218_112_000 + 128_256 * 4096
    mem = {u: estimate(MODEL, CLUSTER, training(u).model_copy(update=pure), PIPELINED).memory
           for u in (False, True)}
    assert mem[False].gradients_gib == pytest.approx(2 * stage / gib, rel=1e-12)
    assert mem[True].gradients_gib == pytest.approx(4 * stage / gib, rel=1e-12)
    assert (round(mem[False].gradients_gib, 2), round(mem[True].gradients_gib, 2)) == (4.23, 8.46)
    assert mem[True].total_gib - mem[False].total_gib == pytest.approx(2 * stage / gib,
                                                                       rel=1e-12)
    fp32 = {u: estimate(MODEL, CLUSTER, training(u), PIPELINED).memory.total_gib
            for u in (False, True)}
    assert fp32[True] == fp32[False]


def test_torchtitans_pure_bf16_runs_under_a_pipeline_with_its_fp32_accumulators():
    """training.dtype "bfloat16" only sets the default dtype the model is built in
    (torchtitan/train.py set_default_dtype), pipeline or not: under a pipeline its FSDP (ZeRO-1
    here) runs bf16 weights, gradients and optimizer states, and accumulates the gradients in
    fp32. Without the pipeline the same ZeRO-1 is not torchtitan's (FSDP shards weights)."""
    pure = training(True).model_copy(update={
        "master_weights": False, "grad_dtype": "bf16", "grad_reduce_dtype": "fp32",
        "optimizer_state_dtype": "bf16", "zero3_per_parameter": True,
        "grad_reduce_after_last_backward": True})
    assert reasons_by_framework(PIPELINED, 8, True, pure)["torchtitan"] == []
    flat = ParallelPlan(dp=8, micro_batch_size=1, zero_stage=1, recompute="none")
    assert any("ZeRO-1 without a pipeline" in r
               for r in reasons_by_framework(flat, 2, True, pure)["torchtitan"])
    assert not any("master weights" in r
                   for r in reasons_by_framework(flat.model_copy(update={"zero_stage": 3}), 2,
                                                 True, pure)["torchtitan"])
