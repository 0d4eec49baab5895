"""CPU activation offloading (plan.cpu_offload_layers, Megatron-Core --cpu-offloading-num-layers):
its exposed copies worked by hand, its memory, its rules, its launch and the search's choice of
the fewest offloaded layers that fit, on Megatron-Bridge's GB200 Llama 3 70B recipe."""

import numpy as np
import pytest
from pydantic import ValidationError

from planner.cost import estimate
from planner.cost.batch import offload_exposed
from planner.errors import PlannerInputError
from planner.launch import with_launch
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from tests.launch_readers import megatron_plan


def test_exposed_copies_worked_by_hand():
    """80 layers, a copy of 1 s per layer, 0.6 s forward and 1.2 s backward a layer. 40
    offloaded: each copy has floor(80 / 40) - 1 = 1 layer of compute to hide behind, so the
    forward exposes 40 x (1 - 0.6) = 16 s and the backward nothing; 50 offloaded: no layer of
    window (floor(80 / 50) - 1 = 0), every copy exposed in both passes, 50 s each; none
    offloaded, nothing."""
    layers = np.array([[80.0]])
    stored = np.array([[1.0e9]])                   # bytes: 1 s at 1 GB/s
    f, b = offload_exposed(np.array([40]), layers, stored, np.array([0.6]),
                           np.array([[1.2]]), 1.0)
    assert (f[0, 0], b[0, 0]) == pytest.approx((16.0, 0.0))
    f, b = offload_exposed(np.array([50]), layers, stored, np.array([0.6]),
                           np.array([[1.2]]), 1.0)
    assert (f[0, 0], b[0, 0]) == pytest.approx((50.0, 50.0))
    f, b = offload_exposed(np.array([0]), layers, stored, np.array([0.6]),
                           np.array([[1.2]]), 1.0)
    assert (f[0, 0], b[0, 0]) == (0.0, 0.0)


RACK = ClusterSpec.model_validate({"preset": "gb200-nvl72", "num_nodes": 1})
MODEL = ModelSpec.model_validate({"preset": "llama3-70b"})
# Megatron-Bridge's LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS: 64 GPUs, Megatron FSDP, micro-batch
# 2, GBS 256, no recompute, cpu_offloading_num_layers 40; its performance configs run
# Transformer Engine's fused cross-entropy (cross_entropy_fusion_impl 'te').
TRAINING = TrainingSpec.model_validate({
    "global_batch_size": 256, "seq_length": 8192, "precision": "fp8", "fp8_recipe": "tensorwise",
    "grad_dtype": "bf16", "overlap_grad_reduce": True, "overlap_param_gather": True,
    "loss_implementation": "fused"})
FSDP = {"dp": 64, "tp": 1, "pp": 1, "micro_batch_size": 2, "zero_stage": 3}


def test_the_recipes_forty_offloaded_layers_fit_and_thirty_eight_do_not():
    """Each offloaded layer beyond the first frees one layer's activations: 38 layers leave
    the plan over the GB200's 186 GiB, 39 fit and the recipe's 40 with a layer to spare;
    the copies over NVLink-C2C hide but for a fraction of a second."""
    def est(n):
        return estimate(MODEL, RACK, TRAINING, ParallelPlan(**FSDP, cpu_offload_layers=n))
    none, e38, e39, e40 = est(0), est(38), est(39), est(40)
    act = (e38.memory.activations_gib - e39.memory.activations_gib)
    assert act == pytest.approx(e39.memory.activations_gib - e40.memory.activations_gib)
    assert none.memory.activations_gib == pytest.approx(e40.memory.activations_gib + 39 * act)
    assert not e38.fits_in_memory and e39.fits_in_memory and e40.fits_in_memory
    assert (round(e39.memory_per_gpu_gib, 1), round(e40.memory_per_gpu_gib, 1)) == (183.1, 179.4)
    assert RACK.gpu.memory_gib == 186
    assert (round(e40.breakdown["offload"], 2), round(e40.step_time_s, 2)) == (0.1, 7.28)
    assert none.breakdown["offload"] == 0


def test_the_search_offloads_what_megatron_bridge_offloads():
    """The search restricted to the recipe's degrees (and no memory headroom, as the
    estimate) finds the recipe's plan with the fewest offloaded layers that fit, 39 (the
    recipe offloads 40), Megatron-LM's arguments carry them, torchtitan and DeepSpeed are not
    offered; without offloading nothing fits."""
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "gb200-nvl72", "num_nodes": 1},
        "training": TRAINING.model_dump(),
        "search": {"dp": 64, "tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 2, "zero_stage": 3,
                   "recompute": "none", "allow_idle_gpus": True, "top_k": 1,
                   "memory_headroom": 0.0}})
    best = plan(req).plans[0]
    assert best.cpu_offload_layers == 39 and best.frameworks == ["megatron"]
    launched = with_launch(best, req.model, req.cluster, req.training)
    args = launched.launch.megatron_args
    assert args[args.index("--cpu-offloading-num-layers") + 1] == "39"
    assert megatron_plan(args, 64)["cpu_offload_layers"] == 39
    off = PlanRequest.model_validate({**req.model_dump(), "search": {
        **req.search.model_dump(exclude_none=True), "cpu_offload": False}})
    assert plan(off).search.status == "INFEASIBLE"


def test_no_host_link_no_offloading_in_the_search():
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"},
        "cluster": {"preset": "gb200-nvl72", "num_nodes": 1, "host_link_gb_per_s": None},
        "training": TRAINING.model_dump(),
        "search": {"dp": 64, "tp": 1, "pp": 1, "micro_batch_size": 2, "zero_stage": 3,
                   "recompute": "none", "allow_idle_gpus": True}})
    assert plan(req).search.status == "INFEASIBLE"


@pytest.mark.parametrize("fields, msg", [
    ({"pp": 2, "dp": 32}, "cpu_offload_layers needs pp=1"),
    ({"recompute": "full"}, "cpu_offload_layers needs recompute='none'"),
])
def test_megatron_cores_rules_refuse_the_plan(fields, msg):
    with pytest.raises(ValidationError, match=msg):
        ParallelPlan(**{**FSDP, "cpu_offload_layers": 8, **fields})


@pytest.mark.parametrize("n, cluster, msg", [
    (80, RACK, "cpu_offload_layers\\(80\\) must be below num_layers\\(80\\)"),
    (8, RACK.model_copy(update={"host_link_gb_per_s": None}), "host_link_gb_per_s"),
])
def test_layers_and_host_link_are_checked(n, cluster, msg):
    with pytest.raises(PlannerInputError, match=msg):
        estimate(MODEL, cluster, TRAINING, ParallelPlan(**FSDP, cpu_offload_layers=n))


def test_two_racks_search_returns_the_recipes_shape():
    """README: on two GB200 NVL72 racks, with idle GPUs allowed, the search's best is FSDP
    over 128 GPUs with micro-batches of 2 and 39 layers offloaded, 2,167 TFLOP/s."""
    req = PlanRequest.model_validate({
        "model": {"preset": "llama3-70b"}, "cluster": {"preset": "gb200-nvl72", "num_nodes": 2},
        "training": TRAINING.model_dump(), "search": {"allow_idle_gpus": True, "top_k": 1}})
    best = plan(req).plans[0]
    assert (best.gpus_used, best.dp, best.tp, best.pp, best.cp, best.zero_stage,
            best.micro_batch_size, best.recompute, best.cpu_offload_layers) == (
        128, 128, 1, 1, 1, 3, 2, "none", 39)
    assert round(best.tflops_per_gpu) == 2167
