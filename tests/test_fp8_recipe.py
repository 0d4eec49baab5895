"""The fp8 scaling recipe (``training.fp8_recipe``): per-tensor current scaling reads every
tensor it quantises twice, delayed scaling once (Transformer Engine, 'FP8 Delayed Scaling'),
checked against bytes worked by hand; Megatron-LM's arguments carry the recipe and its
TransformerConfig's refusal of layernorm / moe_act recompute under delayed scaling is a
framework rule."""

from __future__ import annotations

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, layer_work
from planner.launch import with_launch
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

M8 = ModelSpec.from_preset("llama3-8b")
H100 = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
EFF = EfficiencyModel()


def _layer(recipe: str):
    tr = TrainingSpec(global_batch_size=64, seq_length=4096, precision="fp8", fp8_recipe=recipe)
    return layer_work(M8, tr, LayerShape(), H100.gpu, EFF)


def test_current_scaling_reads_each_quantised_input_once_more():
    # The forward GEMMs' inputs on one GPU (tp 1, 4,096 tokens): QKV, the output projection and
    # the fused gate/up projection read 4,096 x 4,096 each, the down projection 4,096 x 14,336.
    elements = 4096 * (3 * 4096 + 14336)
    assert elements == 109_051_904
    hbm = H100.gpu.memory_bandwidth_gb_per_s * 1e9 * H100.gpu.hbm_efficiency
    kernel = EFF.kernel_overhead_us * 1e-6
    delayed, tensorwise, blockwise = (_layer(r) for r in ("delayed", "tensorwise", "blockwise"))
    # One more read of 2 bytes an element and one amax kernel a cast, forward; the backward
    # moves twice the forward's memory-bound bytes.
    assert tensorwise.fwd_s - delayed.fwd_s == pytest.approx(
        2 * elements / hbm + 4 * kernel, rel=1e-9)
    assert tensorwise.bwd_s - delayed.bwd_s == pytest.approx(
        4 * elements / hbm + 8 * kernel, rel=1e-9)
    assert blockwise == delayed
    # bf16 training has no casts whatever the recipe field says.
    bf16 = TrainingSpec(global_batch_size=64, seq_length=4096)
    assert layer_work(M8, bf16.model_copy(update={"fp8_recipe": "tensorwise"}), LayerShape(),
                      H100.gpu, EFF) == layer_work(M8, bf16, LayerShape(), H100.gpu, EFF)


def test_megatron_runs_the_recipe_it_was_costed_with():
    plan = ParallelPlan(dp=8, micro_batch_size=1)
    for recipe in ("tensorwise", "blockwise"):
        tr = TrainingSpec(global_batch_size=64, seq_length=4096, precision="fp8",
                          fp8_recipe=recipe)
        args = with_launch(estimate(M8, H100, tr, plan), M8, H100, tr).launch.megatron_args
        assert args[args.index("--fp8-recipe") + 1] == recipe
    tr = TrainingSpec(global_batch_size=64, seq_length=4096, precision="fp8")
    est = estimate(M8, H100, tr, plan)
    assert "--fp8-recipe" not in with_launch(est, M8, H100, tr).launch.megatron_args
    # torchao's float8 training scales by the current amax: torchtitan runs tensorwise only.
    assert "torchtitan" not in est.frameworks
    # (one micro-batch a step, which its DDP needs: it all-reduces every micro-batch's)
    titan = estimate(M8, H100, tr.model_copy(update={"fp8_recipe": "tensorwise",
                                                     "global_batch_size": 8}), plan)
    assert "torchtitan" in titan.frameworks
