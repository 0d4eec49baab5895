"""The plan cost model against hand-worked numbers from the papers, and its properties."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost import EfficiencyModel, estimate, evaluate
from planner.cost.batch import BREAKDOWN_KEYS
from planner.cost.layers import layer_work
from planner.cost.memory import in_flight_microbatches, model_state_bytes
from planner.cost.pipeline import makespan
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, ParallelPlan, TrainingSpec

EFF = EfficiencyModel()
A100 = GPUSpec.from_preset("a100-80gb")
GPT3 = ModelSpec.from_preset("gpt3-175b")


def korthikanti_training():
    # Korthikanti et al. count 16-bit activations with dropout and a materialised softmax.
    return TrainingSpec(global_batch_size=1, seq_length=2048, precision="fp16", dropout=True,
                        flash_attention=False)


SBH = 2048 * 1 * 12288


@pytest.mark.parametrize("plan,expected", [
    # sbh (10 + 24/t + 5as/(ht)), t = 8: 25,165,824 * (13 + 10)
    (ParallelPlan(tp=8), SBH * (10 + 24 / 8 + 5 * 96 * 2048 / (12288 * 8))),
    # sequence parallel: sbh/t (34 + 5as/h)
    (ParallelPlan(tp=8, sequence_parallel=True), SBH / 8 * (34 + 5 * 96 * 2048 / 12288)),
    # selective recompute + SP: 34 sbh / t
    (ParallelPlan(tp=8, sequence_parallel=True, recompute="selective"), SBH / 8 * 34),
    # full recompute: the layer input, 2 sbh
    (ParallelPlan(tp=8, recompute="full"), 2 * SBH),
    # no parallelism: 34 sbh + 5 a s^2 b
    (ParallelPlan(), SBH * 34 + 5 * 96 * 2048 * 2048),
])
def test_activation_memory_of_a_gpt3_layer_matches_korthikanti(plan, expected):
    lw = layer_work(GPT3, korthikanti_training(), plan, A100, EFF)
    assert lw.stored_bytes == pytest.approx(expected, rel=1e-12)


def test_zero_memory_per_stage_matches_the_zero_paper():
    # Rajbhandari et al. Figure 1: 7.5B parameters, Nd = 64, K = 12, fp16 gradients:
    # 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    tr = TrainingSpec(global_batch_size=64, seq_length=8, precision="fp16", grad_dtype="fp16")
    totals = [sum(model_state_bytes(7.5e9, tr, z, 64)) / 1e9 for z in range(4)]
    assert totals == pytest.approx([120.0, 31.40625, 16.640625, 1.875])


def test_pipeline_bubble_fraction():
    # Equal stages: (p-1) t / v bubble, a fraction (p-1)/(v m) of m t.
    # 4 stages of 1 s each: t_max = 1, t_sum = 4.
    total, bubble = makespan(1.0, 4.0, m=8, v=1, p=4, p2p_s=0.0)
    assert (float(total), float(bubble)) == (11.0, 3.0)
    total, bubble = makespan(1.0, 4.0, m=8, v=2, p=4, p2p_s=0.0)
    assert (float(total), float(bubble)) == (9.5, 1.5)
    assert bubble / (8 * 1.0) == pytest.approx((4 - 1) / (2 * 8))
    # An uneven pipeline (1, 2, 1 s) runs at its slowest stage.
    assert tuple(map(float, makespan(2.0, 4.0, m=4, v=1, p=3, p2p_s=0.0))) == (10.0, 2.0)
    # Fewer micro-batches than stages: the pipeline never fills, (p - 1) t of bubble.
    assert tuple(map(float, makespan(1.0, 8.0, m=2, v=1, p=8, p2p_s=0.0))) == (9.0, 7.0)


def test_micro_batches_in_flight():
    assert in_flight_microbatches(pp=4, vpp=1, stage=0, m=16) == 4
    assert in_flight_microbatches(pp=4, vpp=1, stage=3, m=16) == 1
    assert in_flight_microbatches(pp=4, vpp=1, stage=0, m=2) == 2
    # Interleaved: p + (p-1)/v on the first stage (Narayanan et al.).
    assert in_flight_microbatches(pp=4, vpp=2, stage=0, m=16) == 4 + 3 / 2


def gpt_row_setup(mbs=4, recompute="full"):
    model = ModelSpec(name="gpt-1.7b", num_layers=24, hidden_size=2304, num_attention_heads=24,
                      vocab_size=51200, tied_embeddings=True)
    cluster = ClusterSpec.from_preset("dgx-a100", num_nodes=4)
    training = TrainingSpec(global_batch_size=512, seq_length=2048, precision="fp16",
                            flash_attention=False, dropout=True)
    plan = ParallelPlan(dp=32, micro_batch_size=mbs, recompute=recompute)
    return model, cluster, training, plan


def test_flops_match_megatron_formula():
    # Narayanan et al. eq. (3): 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recompute;
    # without recompute the model FLOPs are 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
    model, cluster, training, plan = gpt_row_setup()
    ev = evaluate(model, cluster, training, plan, EFF)
    B, s, l, h, V = 512, 2048, 24, 2304, 51200
    assert ev.hardware_flops == pytest.approx(
        96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), rel=1e-12)
    assert ev.model_flops == pytest.approx(
        72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)


def test_estimate_contract_and_breakdown_sums_to_step_time():
    model, cluster, training, plan = gpt_row_setup()
    est = estimate(model, cluster, training, plan)
    assert set(est.breakdown) == set(BREAKDOWN_KEYS)
    assert sum(est.breakdown.values()) == pytest.approx(est.step_time_s)
    assert est.grad_accum_steps == 4 and est.gpus_used == 32
    assert est.tokens_per_s == pytest.approx(512 * 2048 / est.step_time_s)
    assert 0 < est.mfu < 1
    assert est.hardware_tflops_per_gpu > est.tflops_per_gpu   # recompute executes more
    dp = [c for c in est.communication if c.strategy == "DP"]
    assert dp and dp[0].op == "all_reduce" and dp[0].group_size == 32
    assert dp[0].tier == "inter_node"
    body = est.model_dump(mode="json")
    for key in ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "grad_accum_steps",
                "recompute", "zero_stage", "sequence_parallel", "step_time_s", "tokens_per_s",
                "tflops_per_gpu", "mfu", "memory_per_gpu_gib", "breakdown", "communication"):
        assert key in body


def test_tp_inside_a_node_and_pp_across_nodes_are_placed_accordingly():
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    est = estimate(m, c, tr, ParallelPlan(dp=1, tp=8, pp=4))
    tiers = {(x.strategy, x.op): x.tier for x in est.communication}
    assert tiers[("TP", "all_reduce")] == "intra_node"
    assert tiers[("PP", "send_recv")] == "inter_node"
    # TP message: one micro-batch's hidden states, 4096 tokens x 8192 x 2 bytes.
    tp = next(x for x in est.communication if x.strategy == "TP")
    assert tp.message_bytes == 4096 * 8192 * 2
    # 2 forward + 2 backward all-reduces per layer per micro-batch: 20 layers x 64 x 4.
    assert tp.count_per_step == 20 * 64 * 4


def test_recompute_trades_time_for_memory():
    model, cluster, training, _ = gpt_row_setup()
    none = estimate(model, cluster, training, ParallelPlan(dp=32, micro_batch_size=1))
    full = estimate(model, cluster, training,
                    ParallelPlan(dp=32, micro_batch_size=1, recompute="full"))
    assert full.memory.activations_gib < none.memory.activations_gib / 5
    assert full.step_time_s > none.step_time_s
    assert full.breakdown["recompute"] > 0 == none.breakdown["recompute"]


def test_zero_stages_shrink_memory_and_cost_traffic():
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    ests = [estimate(m, c, tr, ParallelPlan(dp=16, micro_batch_size=1, zero_stage=z))
            for z in range(4)]
    mems = [e.memory_per_gpu_gib for e in ests]
    assert mems[0] > mems[1] > mems[2] > mems[3]
    ops = [{(x.strategy, x.op) for x in e.communication} for e in ests]
    assert ("DP", "all_reduce") in ops[0]
    assert {("DP", "reduce_scatter"), ("ZeRO", "all_gather")} <= ops[1]
    assert {("DP", "reduce_scatter"), ("ZeRO", "all_gather")} <= ops[3]


def test_overlap_hides_gradient_reduction():
    model, cluster, training, plan = gpt_row_setup(mbs=1)
    sync = estimate(model, cluster, training.model_copy(update={"overlap_grad_reduce": False}),
                    plan)
    overlapped = estimate(model, cluster, training, plan)
    dp = next(c for c in sync.communication if c.strategy == "DP")
    assert dp.count_per_step == 1          # one bucket without overlap (Megatron-LM)
    assert sync.breakdown["dp_comm"] == pytest.approx(dp.total_time_s)
    # Overlapped: buckets of max(4e7, 1e6 * dp) parameters, bucket k ready at k/n of the last
    # backward B; the step ends max(tau, n tau - (n - 1) B / n) after it, plus the slowdown of
    # the compute the other buckets overlap (15% of the overlapped time).
    b = next(c for c in overlapped.communication if c.strategy == "DP")
    n, tau = b.count_per_step, b.time_s
    assert n == math.ceil((model.num_params - model.hidden_size) / 40_000_000)
    # The backward is long enough to hide all but the last bucket.
    assert overlapped.breakdown["dp_comm"] == pytest.approx(tau + 0.15 * (n - 1) * tau)
    assert overlapped.breakdown["dp_comm"] < sync.breakdown["dp_comm"] / 4


def test_bucket_tail_closed_form_equals_the_recurrence():
    from planner.cost.batch import bucket_tail

    # e_k = max(e_(k-1), k B / n) + tau; exposed = e_n - B (no slowdown).
    for n, tau, B in [(1, 0.3, 1.0), (4, 0.1, 1.0), (4, 0.5, 1.0), (10, 0.02, 0.1),
                      (7, 0.25, 3.0)]:
        e = 0.0
        for k in range(1, n + 1):
            e = max(e, k * B / n) + tau
        assert float(bucket_tail(tau, n, B, 0.0)) == pytest.approx(e - B)


def test_interleaved_reduction_and_gather_windows_equal_the_event_replay():
    """An interleaved stage releases chunk c's gradients after the last backward of c and
    needs its weights at the first forward of c: the step's reduction (gather) queued as v
    parts on one stream from those times ends exactly where the closed form says, on every
    pipeline shape, micro-batch count and group (``batch.chunk_windows``), against the
    event-level schedule of ``pipeline.simulate`` (uniform chunks, forward 1, backward 2)."""
    from planner.cost.batch import bucket_tail, chunk_windows
    from planner.cost.pipeline import simulate

    f, b = 1.0, 2.0
    checked = 0
    for p, v, m, g in [(2, 2, 2, None), (3, 2, 2, None), (4, 2, 12, 8), (4, 3, 10, 4),
                       (2, 3, 5, 2), (4, 4, 8, None), (8, 12, 8, None), (8, 5, 24, None),
                       (3, 2, 5, 4), (4, 3, 14, 6)]:
        tl = simulate([[f] * v] * p, [[b] * v] * p, m, 0.0, g)
        parts, wb, wf = chunk_windows(10, m, p, v, g or p)
        assert int(parts) == v
        for total in (5.0, 20.0, 60.0):
            ends, late = [], 0.0
            for ops in tl.ops:
                released = {c: max(e for k, c2, _, _, e in ops if k == "B" and c2 == c)
                            for c in range(v)}
                needed = {c: min(s for k, c2, _, s, _ in ops if k == "F" and c2 == c)
                          for c in range(v)}
                e = 0.0
                for r in sorted(released.values()):
                    e = max(e, r) + total / v
                ends.append(e)
                late = max(late, max((j + 1) * total / v - needed[c]
                                     for j, c in enumerate(sorted(needed))))
            tail = max(ends) - tl.makespan
            assert float(bucket_tail(total / v, v, int(wb) * v * b, 0.0)) == pytest.approx(tail)
            assert float(bucket_tail(total / v, v, int(wf) * v * f, 0.0)) == pytest.approx(late)
            checked += 1
    assert checked == 30
    # Without interleaving: one micro-batch's backward and forward.
    assert [int(x) for x in chunk_windows(10, 16, 4, 1, 4)] == [10, 1, 1]


def test_context_parallel_splits_activations():
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    tr = TrainingSpec(global_batch_size=8, seq_length=32768)
    one = estimate(m, c, tr, ParallelPlan(dp=1, tp=4, micro_batch_size=1))
    two = estimate(m, c, tr, ParallelPlan(dp=1, tp=4, cp=2, micro_batch_size=1))
    assert two.memory.activations_gib < one.memory.activations_gib * 0.6
    assert any(x.strategy == "CP" and x.op == "send_recv" for x in two.communication)


@settings(max_examples=40, deadline=None)
@given(recompute=st.sampled_from(["none", "selective", "full"]),
       sp=st.booleans(), mbs=st.sampled_from([1, 2, 4]), zero=st.integers(0, 3),
       flash=st.booleans())
def test_more_tensor_parallelism_lowers_per_gpu_memory(recompute, sp, mbs, zero, flash):
    m = ModelSpec.from_preset("llama2-13b")
    c = ClusterSpec.from_preset("dgx-a100", num_nodes=1)
    tr = TrainingSpec(global_batch_size=8 * mbs, seq_length=4096, flash_attention=flash)
    mems = []
    for tp in (1, 2, 4, 8):
        plan = ParallelPlan(dp=1, tp=tp, micro_batch_size=mbs, recompute=recompute,
                            sequence_parallel=sp and tp > 1, zero_stage=zero)
        mems.append(estimate(m, c, tr, plan).memory_per_gpu_gib)
    assert all(a > b for a, b in zip(mems, mems[1:], strict=False)), mems


def test_invalid_plan_is_rejected_with_the_field():
    from planner.errors import PlannerInputError

    model, cluster, training, _ = gpt_row_setup()
    with pytest.raises(PlannerInputError) as info:
        estimate(model, cluster, training, ParallelPlan(dp=64))
    assert info.value.field == "plan"
    assert "= 64 > GPUs(32)" in info.value.reason
