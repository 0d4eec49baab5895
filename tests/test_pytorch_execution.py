"""How PyTorch executes what the plan describes, where frameworks differ: torchtitan's eager
elementwise kernels (``training.eager_elementwise``), FSDP2's per-parameter copies
(``training.zero3_per_parameter``) and the non-reentrant checkpoint's early stop
(``training.recompute_early_stop``). Each is checked against bytes and FLOPs worked by hand
for Llama 3 8B (h 4096, 32 query and 8 key/value heads of 128, SwiGLU width 14336)."""

from __future__ import annotations

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, kernel_model, layer_work
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

M8 = ModelSpec.from_preset("llama3-8b")
H100 = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
EFF = EfficiencyModel()
KERNEL_S = EFF.kernel_overhead_us * 1e-6
T = 4096                                   # tokens of one micro-batch on one GPU


def _hbm() -> float:
    gpu = H100.gpu
    return gpu.memory_bandwidth_gb_per_s * 1e9 * gpu.hbm_efficiency


def _layer(shape: LayerShape, **training):
    tr = TrainingSpec(global_batch_size=64, seq_length=T, **training)
    return layer_work(M8, tr, shape, H100.gpu, EFF)


def test_eager_elementwise_kernels_move_the_bytes_worked_by_hand():
    # Rotary embeddings on Q and K: 4096 tokens x 128 x (32 + 8) heads, each element cast to
    # fp32 (2 + 4 bytes), multiplied (4 + 4) and cast back (4 + 2): 20 bytes, both passes.
    rope = 4096 * 128 * 40 * 20
    assert rope == 419_430_400
    # SwiGLU's two eager kernels on 4096 x 14336 elements: 4 bytes more forward (10 against the
    # fused 6), 6 more backward (18 against 12).
    swiglu_f, swiglu_b = 4096 * 14336 * 4, 4096 * 14336 * 6
    # repeat_kv (where the code expands grouped-query K and V, ``training.repeat_kv``, as
    # torchtitan did through v0.2.1) copies K and V out to the 32 query heads (read 8 heads,
    # write 32) and sums the gradients back.
    repeat = 2 * 4096 * 128 * (32 + 8) * 2
    fwd_bytes, bwd_bytes = rope + swiglu_f + repeat, rope + swiglu_b + repeat
    assert (fwd_bytes, bwd_bytes) == (738_197_504, 855_638_016)
    shape = LayerShape()
    fused, eager = _layer(shape), _layer(shape, eager_elementwise=True, repeat_kv=True)
    kernels = 6 + 1 + 2                     # three per rotated tensor, SiLU, K and V copies
    assert eager.fwd_s - fused.fwd_s == pytest.approx(fwd_bytes / _hbm() + kernels * KERNEL_S,
                                                      rel=1e-9)
    assert eager.bwd_s - fused.bwd_s == pytest.approx(
        bwd_bytes / _hbm() + 2 * kernels * KERNEL_S, rel=1e-9)
    # Code that passes K and V at their own heads (SDPA's enable_gqa, torchtitan v0.2.2)
    # makes no copy: exactly the repeat's bytes and two kernels less each pass.
    own = _layer(shape, eager_elementwise=True)
    assert eager.fwd_s - own.fwd_s == pytest.approx(repeat / _hbm() + 2 * KERNEL_S, rel=1e-9)
    assert eager.bwd_s - own.bwd_s == pytest.approx(repeat / _hbm() + 4 * KERNEL_S, rel=1e-9)
    # A GELU model without GQA pays only the rotation (here: none of SwiGLU's or repeat_kv's).
    mha = M8.model_copy(update={"num_kv_heads": 32, "ffn_type": "gelu"})
    tr = TrainingSpec(global_batch_size=64, seq_length=T)
    delta = (layer_work(mha, tr.model_copy(update={"eager_elementwise": True}), shape, H100.gpu,
                        EFF).fwd_s - layer_work(mha, tr, shape, H100.gpu, EFF).fwd_s)
    assert delta == pytest.approx(4096 * 128 * 64 * 20 / _hbm() + 6 * KERNEL_S, rel=1e-9)


def test_early_stop_skips_the_down_projection_and_the_last_residual_add():
    full = LayerShape(recompute="full")
    rerun, early = _layer(full), _layer(full, recompute_early_stop=True)
    assert rerun.recompute_s == rerun.fwd_s and rerun.recompute_flops == rerun.fwd_flops
    # The down projection: 2 x 4096 tokens x 4096 x 14336 FLOPs.
    assert rerun.recompute_flops - early.recompute_flops == 2 * 4096 * 4096 * 14336
    km = kernel_model(H100.gpu, TrainingSpec(global_batch_size=64, seq_length=T), EFF)
    down = km.gemm(4096, 4096, 14336)
    add = (3 * 4096 * 4096 * 2) / _hbm() + KERNEL_S      # read 2 tensors, write 1, 2 bytes
    assert rerun.recompute_s - early.recompute_s == pytest.approx(down + add, rel=1e-9)
    # With dropout the backward reads the mask drawn after the down projection: it reruns.
    drop = _layer(full, dropout=True)
    drop_early = _layer(full, dropout=True, recompute_early_stop=True)
    assert drop.recompute_flops == drop_early.recompute_flops
    assert drop.recompute_s - drop_early.recompute_s == pytest.approx(add, rel=1e-9)
    # Nothing changes without full recompute.
    assert _layer(LayerShape(), recompute_early_stop=True) == _layer(LayerShape())


def test_fsdp2_copies_cost_their_bytes_per_layer_and_micro_batch():
    # One layer's parameters: attention 4096 x (4096 + 2 x 1024) + 4096 x 4096, SwiGLU
    # 3 x 4096 x 14336, two norms of 4096.
    params = 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    assert params == M8.nonexpert_params_per_layer == 218_112_000
    tr = TrainingSpec(global_batch_size=64, seq_length=T)
    fsdp2 = tr.model_copy(update={"zero3_per_parameter": True})
    one_node = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    hbm = _hbm()
    for zero, copies in ((3, [4, 4, 2 + 4]), (2, [4, 2 + 4])):
        # ZeRO-3 copies each gather out in forward and again in backward (4 bytes a bf16
        # parameter: read and write), and each reduce-scatter's input in (read bf16, write
        # the fp32 reduce dtype); ZeRO-2 gathers once. m micro-batches of 32 layers.
        p = ParallelPlan(dp=8, zero_stage=zero, micro_batch_size=1 if zero == 3 else 8)
        flat, copied = estimate(M8, one_node, tr, p), estimate(M8, one_node, fsdp2, p)
        m = flat.grad_accum_steps
        per_layer = params * sum(copies) / hbm + len(copies) * KERNEL_S
        assert copied.step_time_s - flat.step_time_s == pytest.approx(m * 32 * per_layer,
                                                                      rel=1e-6)
        assert (copied.breakdown["zero_comm"] - flat.breakdown["zero_comm"]
                == pytest.approx(m * 32 * per_layer, rel=1e-6))
    # Plain data parallelism has nothing to copy.
    p = ParallelPlan(dp=8, zero_stage=0, micro_batch_size=1)
    assert estimate(M8, one_node, fsdp2, p).step_time_s == estimate(M8, one_node, tr,
                                                                     p).step_time_s


def test_the_shares_the_readme_quotes_for_fsdp2_copies_and_the_early_stop():
    """README, 'How PyTorch runs it': FSDP2's copies are 3% of torchtitan's Llama 2 13B layer
    (forward + backward, micro-batch 2 of 4,096 tokens) on A100; the early stop saves a
    quarter of the recompute (24-25%) on the corpus's full-recompute runs that ran it."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import published_accuracy
    runs = {r["id"]: r for r in published_accuracy.load_runs()}

    def specs(run_id):
        r = runs[run_id]
        return (ModelSpec.model_validate(r["model"]), ClusterSpec.model_validate(r["cluster"]),
                TrainingSpec.model_validate(r["training"]), r["plan"]["micro_batch_size"])
    m, c, tr, mbs = specs("torchtitan-a100-llama2-13b-none")
    layer = layer_work(m, tr, LayerShape(micro_batch_size=mbs), c.gpu, EFF)
    hbm = c.gpu.memory_bandwidth_gb_per_s * 1e9 * c.gpu.hbm_efficiency
    copies = m.nonexpert_params_per_layer * (4 + 4 + 2 + 4) / hbm
    assert round(100 * copies / (layer.fwd_s + layer.bwd_s)) == 3
    saved = []
    for run_id in ("torchtitan-a100-70b-full", "torchtitan-a100-llama2-70b-full",
                   "llmfoundry-mpt-7b-a100-80gb-8-seq8192-mbs8"):
        m, c, tr, mbs = specs(run_id)
        assert tr.recompute_early_stop
        shape = LayerShape(micro_batch_size=mbs, recompute="full")
        early = layer_work(m, tr, shape, c.gpu, EFF).recompute_s
        rerun = layer_work(m, tr.model_copy(update={"recompute_early_stop": False}), shape,
                           c.gpu, EFF).recompute_s
        saved.append(1 - early / rerun)
    assert (round(100 * min(saved)), round(100 * max(saved))) == (24, 25)
