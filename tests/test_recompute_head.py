"""A full recompute that reruns the embedding, the final norm and the LM head as well as the
transformer layers (``TrainingSpec.recompute_head``: Aleph Alpha's trainer, whose
'every_layer' checkpointing wraps every layer of its pipeline module): what the head's rerun
costs, worked by hand, and where the step pays it (which frameworks run it:
tests/test_frameworks.py)."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, gathered_loss, head_work, kernel_model, norm_work
from planner.cost.tables import cost_tables
from planner.specs import ClusterSpec, ParallelPlan, TrainingSpec
from tests.test_eager_norm import A100, LLAMA_13B

AA = TrainingSpec(global_batch_size=64, seq_length=2048, vocab_parallel_loss=False,
                  recompute_head=True)
CLUSTER = ClusterSpec.from_preset("dgx-a100", num_nodes=1)


def test_the_heads_rerun_is_its_gemm_its_norm_and_its_gather_worked_by_hand():
    """At tp 4, micro-batches of one 2,048-token sequence: the head's forward without the loss
    is the final norm (read and write a 2-byte hidden state, fused), the GEMM T x V/4 x h, and
    before a gathered loss the gather's per-rank copies and concatenation, 2 x 2 + 2 x 2 bytes
    a logit of the whole vocabulary in 4 + 1 kernels; the tables add the all-gather of the
    logits over the TP group to it as they do to the forward. Without the gathered loss
    there is no gather to rerun."""
    eff = EfficiencyModel()
    km = kernel_model(A100, AA, eff)
    T, V, h = 2048, 128000, 5120
    norm = norm_work(AA, T * h)
    assert gathered_loss(2, 4)[5:] == (8, 5)
    hw = head_work(LLAMA_13B, AA, LayerShape(tp=4), A100, eff)
    gemm = km.gemm(T, V / 4, h)
    assert hw.rerun_s == pytest.approx(
        gemm + km.memory(2 * T * h * 2 + norm.fwd_bytes + 8 * T * V,
                         kernels=norm.fwd_kernels + 5))
    parallel = AA.model_copy(update={"vocab_parallel_loss": True})
    assert head_work(LLAMA_13B, parallel, LayerShape(tp=4), A100, eff).rerun_s == \
        pytest.approx(gemm + km.memory(2 * T * h * 2 + norm.fwd_bytes, kernels=norm.fwd_kernels))
    tables = cost_tables(LLAMA_13B, CLUSTER, AA, eff, None)
    gather = tables.collective("all_gather", 2 * T * V, tables.group(4, 1, 8)).time_s
    got = tables.head(4, 1, 1, 8)
    assert (got.head_fwd_s - hw.head_fwd_s, got.rerun_s - hw.rerun_s) == pytest.approx(
        (gather, gather))


@pytest.mark.parametrize("tp", [1, 4])
def test_full_recompute_pays_the_embedding_and_the_head_again(tp):
    """One stage (pp 1): with full recompute the flag adds, per micro-batch, the embedding's
    lookup and the head's rerun to the recompute and to the step (nothing overlaps them);
    without full recompute it changes nothing."""
    plan = ParallelPlan(dp=8 // tp, tp=tp, micro_batch_size=1, zero_stage=1, recompute="full")
    off = AA.model_copy(update={"recompute_head": False})
    a, b = (estimate(LLAMA_13B, CLUSTER, t, plan) for t in (off, AA))
    tables = cost_tables(LLAMA_13B, CLUSTER, AA, EfficiencyModel(), None)
    head = tables.head(tp, 1, 1, 8)
    m = AA.global_batch_size // (8 // tp)
    extra = m * (head.embed_s + head.rerun_s)
    assert b.breakdown["recompute"] - a.breakdown["recompute"] == pytest.approx(extra)
    assert b.step_time_s - a.step_time_s == pytest.approx(extra)
    assert b.step_time_s > a.step_time_s
    # The hardware FLOPs count the head's GEMM once more per micro-batch (2 T V h / tp on each
    # GPU); the model FLOPs do not change.
    flops = [e.hardware_tflops_per_gpu * 1e12 * e.step_time_s for e in (a, b)]
    assert flops[1] - flops[0] == pytest.approx(m * 2 * 2048 * 128000 * 5120 / tp)
    assert a.tflops_per_gpu * a.step_time_s == pytest.approx(b.tflops_per_gpu * b.step_time_s)
    none = plan.model_copy(update={"recompute": "none"})
    assert estimate(LLAMA_13B, CLUSTER, off, none).step_time_s == estimate(
        LLAMA_13B, CLUSTER, AA, none).step_time_s


def test_a_pipeline_pays_the_head_on_its_last_stage_and_the_embedding_on_its_first():
    """pp 2: the last stage, which holds the head, is the slower; the flag adds the head's
    rerun to it (and the embedding's lookup to the first), so the step grows by the
    micro-batches times the head's rerun, and by less than one micro-batch more of both."""
    plan = ParallelPlan(dp=4, pp=2, micro_batch_size=1, zero_stage=1, recompute="full")
    off = AA.model_copy(update={"recompute_head": False})
    a, b = (estimate(LLAMA_13B, CLUSTER, t, plan) for t in (off, AA))
    head = cost_tables(LLAMA_13B, CLUSTER, AA, EfficiencyModel(), None).head(1, 1, 1, 8)
    m = AA.global_batch_size // 4
    grown = b.step_time_s - a.step_time_s
    assert m * head.rerun_s <= grown <= (m + 1) * (head.rerun_s + head.embed_s)
