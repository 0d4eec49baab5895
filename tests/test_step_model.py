"""The step model's parts against numbers worked by hand: kernels from shapes, NCCL's protocol
costs, ZeRO-3's per-layer max-plus, overlap slowdown, fixed costs."""

import dataclasses
import math

import pytest

from planner.collectives import AlphaBeta, GroupTopology, nccl_time
from planner.cost import EfficiencyModel, estimate
from planner.cost.batch import zero3_period
from planner.cost.kernels import WAVE_TAIL, KernelModel, attention_head_factor
from planner.cost.layers import LayerShape, head_work, kernel_model, layer_work
from planner.cost.tables import CollectiveUse, cost_tables
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, ParallelPlan, TrainingSpec

A100 = GPUSpec.from_preset("a100-80gb")
KM = KernelModel(peak_flops=312e12, attention_peak_flops=312e12, matmul_efficiency=0.8,
                 attention_efficiency=0.6, attention_half_seq=500, hbm_bytes_per_s=1.8e12,
                 sm_count=108, k_overhead=64, kernel_overhead_s=2e-6)


def test_gemm_that_fills_whole_waves_runs_at_the_sustained_rate():
    # 256 x 128 tiles: M = 256 * 27, N = 128 * 8 -> 216 tiles = exactly 2 waves of 108 SMs.
    m, n, k = 256 * 27, 128 * 8, 4096
    t = KM.gemm(m, n, k)
    ideal = 2 * m * n * (k + 64) / (312e12 * 0.8)
    assert t == pytest.approx(ideal + 2e-6, rel=1e-9)


def test_a_nearly_empty_last_wave_costs_more_per_flop():
    # 217 tiles of 256 x 128: 2 waves and 1 tile. cuBLAS's best tile choice and split-K soften
    # the penalty, but the GEMM is slower per FLOP than the 216-tile one.
    k = 4096
    full = KM.gemm(256 * 27, 128 * 8, k) / (256 * 27 * 128 * 8)
    ragged = KM.gemm(256 * 27 + 1, 128 * 8, k) / ((256 * 27 + 1) * 128 * 8)
    assert ragged > 1.02 * full
    assert 0 < WAVE_TAIL < 1


def test_gemm_time_is_not_monotonic_in_the_micro_batch():
    # Llama 3 70B's QKV projection under tp8 (N = 1280, K = 8192) on micro-batches of 4096
    # tokens: two micro-batches fill whole waves, three leave the last one partly empty, so
    # the per-token time is not monotonic in the micro-batch size.
    per_token = [KM.gemm(4096 * b, 1280, 8192) / (4096 * b) for b in (1, 2, 3)]
    assert per_token[1] < per_token[0] and per_token[2] > per_token[1]


def test_misaligned_gemm_dimensions_run_slower():
    # A reduction dimension of 1800 (BLOOM's 14400 / tp8) is not a multiple of 64.
    aligned = KM.gemm(8192, 5376, 1792) / 1792
    misaligned = KM.gemm(8192, 5376, 1800) / 1800
    assert misaligned > 1.3 * aligned


def test_gemm_times_are_memoised_per_kernel_model_and_bounded(monkeypatch):
    """A kernel model answers a shape asked before from its memo, with the same time; equal
    kernel models built for the layers share one instance (and so one memo); the memo is
    emptied when it reaches its bound."""
    import planner.cost.kernels as kernels

    km = dataclasses.replace(KM)                    # a copy of its own, with an empty memo
    assert km._gemms is not KM._gemms
    shapes = [(4096 * b, 1280, 8192) for b in (1, 2, 3)] + [(8192, 5376, 1800)]
    first = [km.gemm(*s) for s in shapes]
    assert [km.gemm(*s) for s in shapes] == first == [km._gemm(*s, 1) for s in shapes]
    assert len(km._gemms) == 4 and km == KM        # the memo is not part of the model
    train = TrainingSpec(global_batch_size=8, seq_length=2048)
    a = kernel_model(A100, train, EfficiencyModel())
    assert kernel_model(A100, train, EfficiencyModel()) is a
    assert kernel_model(A100, train, EfficiencyModel(compute_scale=0.9)) is not a
    monkeypatch.setattr(kernels, "GEMM_MEMO", 3)
    km.gemm(64, 64, 64)
    assert len(km._gemms) == 1


def test_flash_attention_does_the_causal_half_of_the_work():
    # Doubling the sequence quadruples the full score matrix; causal attention does half of
    # it, and the reported model FLOPs keep the published (non-causal) convention.
    m = ModelSpec(name="m", num_layers=1, hidden_size=4096, num_attention_heads=32,
                  ffn_type="swiglu", ffn_hidden_size=11008, vocab_size=32000)
    tr = TrainingSpec(global_batch_size=1, seq_length=8192)
    lw = layer_work(m, tr, LayerShape(), A100, EfficiencyModel())
    km = kernel_model(A100, tr, EfficiencyModel())
    causal = 2 * 32 * 128 * 8192 * 8192              # 2 b a d s^2: half of 4 b a d s^2
    eff = km.attention_efficiency * 8192 / (8192 + km.attention_half_seq)
    assert lw.attn_core_fwd_s == pytest.approx(causal / (312e12 * eff) + km.kernel_overhead_s)
    linear = 2 * 8192 * 4096 * (3 * 4096 + 4096 + 3 * 11008)
    assert lw.fwd_flops == pytest.approx(linear + 2 * causal)     # non-causal convention


def test_nccl_protocols_small_messages_on_ll_large_on_simple():
    intra = AlphaBeta(3.4e-6, 360e9)
    inter = AlphaBeta(14e-6, 46e9)
    g = GroupTopology(8, 8, intra, inter)
    small = nccl_time("all_reduce", 1024, g)
    large = nccl_time("all_reduce", 1 << 30, g)
    assert small.algorithm.endswith("/LL") and large.algorithm.endswith("/Simple")
    # Ring all-reduce, Simple: 8.4 us base + 2 (p - 1) steps of 3.4 us + 2 (p-1)/p n / bw.
    ring = 8.4e-6 + 14 * 3.4e-6 + 2 * 7 / 8 * (1 << 30) / 360e9
    assert large.algorithm == "ring/Simple" and large.time_s == pytest.approx(ring)
    # Across 4 nodes of 8, Simple. Ring: 2N = 8 network steps of 14 us, the other 54 at
    # NVLink's 3.4 us. Tree: a chain of 2 (g - 1) NVLink steps and 2 lg N network levels,
    # moving 2 n. NCCL takes the faster.
    g4 = GroupTopology(32, 8, intra, inter)
    n = 1 << 30
    bw = min(360e9, 8 * 46e9)
    ring = 8.4e-6 + (62 - 8) * 3.4e-6 + 8 * 14e-6 + 2 * 31 / 32 * n / bw
    tree = 8.4e-6 + 14 * 3.4e-6 + 4 * 14e-6 + 2 * n / bw
    got = nccl_time("all_reduce", n, g4)
    assert got.time_s == pytest.approx(min(ring, tree))
    assert got.algorithm == ("ring/Simple" if ring < tree else "tree/Simple")


def test_zero3_layer_period_is_max_plus_with_prefetch_and_serial_without():
    # Compute 10 ms, gather 4 ms, 15% slowdown while they overlap: hidden but slower.
    assert float(zero3_period(0.010, 0.004, 1.0, 0.15)) == pytest.approx(0.010 + 0.15 * 0.004)
    # A gather longer than the compute sets the pace.
    assert float(zero3_period(0.010, 0.025, 1.0, 0.15)) == pytest.approx(0.025)
    # Gathered on demand: in series.
    assert float(zero3_period(0.010, 0.004, 0.0, 0.15)) == pytest.approx(0.014)
    # Half a layer ahead: 5 ms of compute hide 4 ms.
    assert float(zero3_period(0.010, 0.004, 0.5, 0.15)) == pytest.approx(0.010 + 0.15 * 0.004)


def test_zero3_waits_when_the_gather_outlasts_the_layer():
    # A thin per-GPU layer (small micro-batch) across many nodes: the step waits for gathers.
    m = ModelSpec.from_preset("gpt3-175b")
    c = ClusterSpec.from_preset("dgx-a100", num_nodes=192)
    tr = TrainingSpec(global_batch_size=1536, seq_length=2048)
    z3 = estimate(m, c, tr, ParallelPlan(dp=1536, zero_stage=3, recompute="full"))
    assert z3.breakdown["zero_comm"] > 0.1 * z3.step_time_s
    # More sequences per GPU hide the same gathers.
    c48 = ClusterSpec.from_preset("dgx-a100", num_nodes=48)
    z3_384 = estimate(m, c48, tr, ParallelPlan(dp=384, micro_batch_size=4, zero_stage=3,
                                               recompute="full"))
    assert z3_384.breakdown["zero_comm"] / z3_384.step_time_s < \
        z3.breakdown["zero_comm"] / z3.step_time_s


def test_fixed_costs_per_micro_batch_and_kernel():
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    tr = TrainingSpec(global_batch_size=64, seq_length=2048)
    plan = ParallelPlan(dp=8, micro_batch_size=1)
    base = estimate(m, c, tr, plan, EfficiencyModel(microbatch_overhead_us=0))
    slow = estimate(m, c, tr, plan, EfficiencyModel(microbatch_overhead_us=1000))
    assert slow.breakdown["overhead"] == pytest.approx(8 * 1e-3)
    assert slow.step_time_s == pytest.approx(base.step_time_s + 8e-3, rel=1e-6)
    no_launch = estimate(m, c, tr, plan, EfficiencyModel(kernel_overhead_us=0))
    assert no_launch.breakdown["compute"] < base.breakdown["compute"]


def test_interleaved_stages_pay_the_host_overhead_per_model_chunk():
    # Megatron runs forward_step / backward_step once per micro-batch and model chunk: a stage
    # of 4 chunks pays the per-micro-batch host time 4 times (32 micro-batches here).
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    tr = TrainingSpec(global_batch_size=64, seq_length=2048)
    plan = ParallelPlan(dp=2, pp=4, vpp=4, micro_batch_size=1)
    base = estimate(m, c, tr, plan, EfficiencyModel(microbatch_overhead_us=0))
    slow = estimate(m, c, tr, plan, EfficiencyModel(microbatch_overhead_us=1000))
    assert slow.breakdown["overhead"] == pytest.approx(32 * 4 * 1e-3)
    plain = ParallelPlan(dp=2, pp=4, micro_batch_size=1)
    assert estimate(m, c, tr, plain, EfficiencyModel(microbatch_overhead_us=1000)
                    ).breakdown["overhead"] == pytest.approx(32 * 1e-3)
    assert slow.step_time_s > base.step_time_s + 32 * 4 * 1e-3


def test_ring_attention_on_small_chunks_runs_less_efficiently():
    # The same tokens per GPU, in 16 chunks of 512 instead of 2 of 4096: attention per chunk
    # runs at 512 / (512 + 500) of its long-sequence rate, and its grid of 32 heads x 4 query
    # tiles does not fill the A100's 108 SMs: each chunk waits for its longest tile,
    # 2 x 108 / (32 x 5) = 1.35 times its share (``attention_fill``; 1 for 32 tiles).
    m = ModelSpec.from_preset("llama3-8b")
    tr = TrainingSpec(global_batch_size=1, seq_length=8192)
    km = kernel_model(A100, tr, EfficiencyModel())
    two = layer_work(m, tr, LayerShape(cp=2), A100, EfficiencyModel())
    sixteen = layer_work(m, tr, LayerShape(cp=16), A100, EfficiencyModel())

    def attention(cp):        # 1/cp of the causal work, in cp chunk kernels of 8192/cp keys
        eff = km.attention_efficiency * (8192 / cp) / (8192 / cp + km.attention_half_seq)
        flops = 2 * 32 * 128 * 8192 * 8192 / cp
        fill = max(1.0, 2 * 108 / (32 * (8192 / cp / 128 + 1)))
        return flops * fill / (km.attention_peak_flops * eff) + cp * km.kernel_overhead_s

    assert two.attn_core_fwd_s == pytest.approx(attention(2))
    assert sixteen.attn_core_fwd_s == pytest.approx(attention(16))
    assert sixteen.attn_core_fwd_s * 16 > 1.3 * two.attn_core_fwd_s * 2
    assert math.isfinite(sixteen.fwd_s)


def test_small_attention_heads_run_slower_per_flop():
    # g(d) = (d / (d + 43)) / (128 / (128 + 43)): 64 -> (64/107)/(128/171) = 0.7991; wider
    # heads than 128 gain nothing.
    assert attention_head_factor(64) == pytest.approx((64 / 107) / (128 / 171))
    assert attention_head_factor(64) == pytest.approx(0.799, abs=5e-4)
    assert attention_head_factor(128) == 1.0 and attention_head_factor(256) == 1.0
    # Two layers with the same attention FLOPs (32 x 128 = 64 x 64 wide): the 64-wide heads'
    # core takes 1 / 0.799 as long, less the kernel's fixed cost.
    tr = TrainingSpec(global_batch_size=1, seq_length=4096)
    km = kernel_model(A100, tr, EfficiencyModel())
    works = [layer_work(ModelSpec(name="m", num_layers=1, hidden_size=4096,
                                  num_attention_heads=heads, vocab_size=32000),
                        tr, LayerShape(), A100, EfficiencyModel()) for heads in (32, 64)]
    wide, narrow = (w.attn_core_fwd_s - km.kernel_overhead_s for w in works)
    assert narrow == pytest.approx(wide / attention_head_factor(64))


def test_cross_entropy_moves_the_bytes_of_megatrons_vocab_parallel_loss():
    # tp2, 4096 tokens, a 32,001 vocabulary (padded to 32,256 = 126 x 256): forward 38 bytes
    # per logit in six kernels plus the final norm (read + write, 2 bytes) in one, backward 14
    # bytes in two plus the norm's gradient.
    m = ModelSpec(name="m", num_layers=1, hidden_size=4096, num_attention_heads=32,
                  vocab_size=32001)
    tr = TrainingSpec(global_batch_size=1, seq_length=4096)
    plan = LayerShape(tp=2)
    km = kernel_model(A100, tr, EfficiencyModel())
    hw = head_work(m, tr, plan, A100, EfficiencyModel())
    logits, norm = 4096 * 32256 / 2, 2 * 4096 * 4096 * 2
    fwd_loss = (38 * logits + norm) / km.hbm_bytes_per_s + 7 * km.kernel_overhead_s
    bwd_loss = (14 * logits + norm) / km.hbm_bytes_per_s + 3 * km.kernel_overhead_s
    assert hw.head_fwd_s == pytest.approx(km.gemm(4096, 32256 / 2, 4096) + fwd_loss)
    assert hw.head_bwd_s == pytest.approx(km.gemm(4096, 4096, 32256 / 2)
                                          + km.gemm(4096, 32256 / 2, 4096) + bwd_loss)


def _block(n, recompute="full", pp=1, vpp=1, layers=12):
    model = ModelSpec(name="m", num_layers=layers, hidden_size=2048, num_attention_heads=16,
                      vocab_size=32000)
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    training = TrainingSpec(global_batch_size=64, seq_length=2048)
    plan = ParallelPlan(dp=8 // pp, pp=pp, vpp=vpp, micro_batch_size=1, recompute=recompute,
                        recompute_num_layers=n, zero_stage=1)
    return estimate(model, cluster, training, plan)


def test_block_recompute_of_n_layers_costs_n_layers_of_full_recompute():
    # Megatron-LM's --recompute-method block: the first n layers of the chunk recompute their
    # forward and keep only their input; the others keep everything.
    none, full = _block(None, "none"), _block(None)
    for n in (1, 4, 7):
        est = _block(n)
        assert est.breakdown["recompute"] == pytest.approx(
            n / 12 * full.breakdown["recompute"], rel=1e-9)
        # One stage: every layer's stored activations, then the larger of the loss's peak and
        # (with any layer recomputed) the recomputed layer's working set.
        top = max(_working(), _loss_peak())
        per_layer = ((none.memory.activations_gib - _loss_peak())
                     - (full.memory.activations_gib - top)) / 12
        want = none.memory.activations_gib - _loss_peak() - n * per_layer + top
        assert est.memory.activations_gib == pytest.approx(want, rel=1e-6)
        assert none.step_time_s < est.step_time_s < full.step_time_s
    # n at or above the layers of the chunk is full recompute.
    assert _block(12).step_time_s == pytest.approx(full.step_time_s, rel=1e-12)
    assert _block(30).memory_per_gpu_gib == pytest.approx(full.memory_per_gpu_gib, rel=1e-12)


def _loss_peak():
    """GiB the loss holds at its peak on that stage (``layers.loss_peak_bytes``)."""
    model = ModelSpec(name="m", num_layers=12, hidden_size=2048, num_attention_heads=16,
                      vocab_size=32000)
    hw = head_work(model, TrainingSpec(global_batch_size=64, seq_length=2048), LayerShape(),
                   GPUSpec.from_preset("h100-sxm"), EfficiencyModel())
    return hw.loss_peak_bytes / 2**30


def _working():
    """GiB of one layer's activations rebuilt for its backward under full recompute."""
    model = ModelSpec(name="m", num_layers=12, hidden_size=2048, num_attention_heads=16,
                      vocab_size=32000)
    w = layer_work(model, TrainingSpec(global_batch_size=64, seq_length=2048),
                   ParallelPlan(dp=8, recompute="full", zero_stage=1),
                   GPUSpec.from_preset("h100-sxm"), EfficiencyModel())
    return w.working_bytes / 2**30


def test_block_recompute_counts_layers_per_model_chunk():
    # Interleaved: each of the vpp chunks recomputes its first n layers (Megatron's block
    # method runs per TransformerBlock, one per chunk): 2 stages x 2 chunks of 3 layers.
    full = _block(None, pp=2, vpp=2)
    est = _block(1, pp=2, vpp=2)
    assert est.breakdown["recompute"] == pytest.approx(full.breakdown["recompute"] / 3,
                                                       rel=1e-9)


def test_block_recompute_needs_full_granularity():
    with pytest.raises(ValueError, match="recompute_num_layers"):
        ParallelPlan(recompute="selective", recompute_num_layers=2)


def test_requests_that_differ_in_the_batch_share_the_components():
    """The cost tables do not depend on the global batch: a second batch size gets a view of
    the same components with its own training, and the same answer as fresh tables."""
    from planner.cost.tables import CostTables, cost_tables

    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    plan = ParallelPlan(dp=4, tp=2, pp=2, micro_batch_size=1, sequence_parallel=True)
    eff = EfficiencyModel()
    a = TrainingSpec(global_batch_size=64, seq_length=4096)
    b = a.model_copy(update={"global_batch_size": 256})
    ta, tb = cost_tables(m, c, a, eff), cost_tables(m, c, b, eff)
    assert ta.training == a and tb.training == b
    assert ta._layer is tb._layer                      # the same component dictionaries
    for tr, tables in ((a, ta), (b, tb)):
        shared = estimate(m, c, tr, plan, eff, tables=tables)
        fresh = estimate(m, c, tr, plan, eff, tables=CostTables(m, c, tr, eff))
        assert shared.step_time_s == pytest.approx(fresh.step_time_s, rel=1e-12)
        assert shared.grad_accum_steps == tr.global_batch_size // 4


def test_fp8_keeps_the_linear_layers_inputs_in_one_byte():
    """Transformer Engine saves a linear layer's fp8 input for its weight gradient: in fp8
    training the two norms' outputs, the attention output and the MLP activation's output are
    stored at 1 byte instead of 2, and nothing else changes (worked by hand for a GELU layer:
    T (2 h + o + f) bytes fewer)."""
    H100 = GPUSpec.from_preset("h100-sxm")
    m = ModelSpec.model_validate({"name": "g", "num_layers": 4, "hidden_size": 4096,
                                  "num_attention_heads": 32, "ffn_hidden_size": 16384,
                                  "ffn_type": "gelu", "vocab_size": 32000})
    bf16 = TrainingSpec(global_batch_size=8, seq_length=2048, precision="bf16")
    fp8 = bf16.model_copy(update={"precision": "fp8"})
    assert fp8.activation_bytes == bf16.activation_bytes == 2
    shape = LayerShape(micro_batch_size=2)
    a = layer_work(m, bf16, shape, H100, EfficiencyModel())
    b = layer_work(m, fp8, shape, H100, EfficiencyModel())
    T = 2 * 2048
    assert a.stored_bytes - b.stored_bytes == T * (2 * 4096 + 4096 + 16384)
    # Full recompute keeps only the layer input, in 16 bits either way.
    full = LayerShape(micro_batch_size=2, recompute="full")
    assert (layer_work(m, bf16, full, H100, EfficiencyModel()).stored_bytes
            == layer_work(m, fp8, full, H100, EfficiencyModel()).stored_bytes)


def _tables(training: TrainingSpec, nodes: int, eff: EfficiencyModel | None = None):
    from planner.cost.tables import cost_tables
    return cost_tables(ModelSpec.from_preset("gpt3-175b"),
                       ClusterSpec.from_preset("dgx-a100", num_nodes=nodes), training,
                       eff or EfficiencyModel())


def test_per_rank_copies_add_group_size_copy_calls_to_every_zero3_gather():
    # GPT-3 175B over dp 384 (48 DGX A100), 12 gathers per layer (one per parameter tensor,
    # DeepSpeed of 2021): each call's copy-out is 384 copies of a 302 MB / 384 = 786 KB chunk.
    # The GPU moves a chunk in 2.5 us + 2 x 786 KB / HBM (about 3.4 us), less than the 6 us the
    # host takes to issue it, so each call adds 384 x 6 us = 2.304 ms; a layer's 12 calls add
    # 27.648 ms to its gather and as much to its gradients' reduce-scatter (fp32: 1.57 MB
    # chunks, 4.3 us on the GPU, still host-bound).
    # (As costed before the views a Python loop makes to build the per-rank lists and the
    # gather buffer's zero-fill were: the next test adds them.)
    from tests.cost_history import without_rank_views
    base = dict(global_batch_size=1536, seq_length=2048, zero3_gathers_per_layer=12)
    with without_rank_views():
        plain = _tables(TrainingSpec(**base), 48).zero3_times(1, 1, 384, 8)
        copies = _tables(TrainingSpec(**base, zero3_per_rank_copies=True), 48).zero3_times(
            1, 1, 384, 8)
    # (forward gather, backward gather without and with recompute, reduce-scatter, network)
    assert copies[0] - plain[0] == pytest.approx(12 * 384 * 6e-6)
    assert copies[1] == copies[2] == copies[0]     # no reuse distance: the same gather again
    assert copies[3] - plain[3] == pytest.approx(12 * 384 * 6e-6)
    assert copies[4] == plain[4] == 1.0


def test_per_rank_lists_built_in_python_add_their_views_to_every_zero3_call():
    # DeepSpeed 0.3.13 builds each per-rank list in a Python loop: a gather narrows its flat
    # buffer once a rank (_allgather_param), a reduce-scatter takes
    # param.grad.view(-1).narrow(...), two views a rank (_reduce_scatter_gradient); each view
    # is an eager op of about 2 us of host time (pytorch/pytorch issue 41383). GPT-3 175B over
    # dp 384, 12 calls a layer: a gather 384 x (2 + 6) us = 3.072 ms, a reduce-scatter
    # 384 x (4 + 6) us = 3.84 ms, against 2.304 ms of copies alone. A gather also zero-fills
    # its flat buffer first (torch.zeros): 302 MB written at 0.87 x 2,039 GB/s plus a kernel's
    # 2.5 us, 0.173 ms.
    base = dict(global_batch_size=1536, seq_length=2048, zero3_gathers_per_layer=12)
    plain = _tables(TrainingSpec(**base), 48).zero3_times(1, 1, 384, 8)
    lists_tables = _tables(TrainingSpec(**base, zero3_per_rank_copies=True), 48)
    lists = lists_tables.zero3_times(1, 1, 384, 8)
    gather = [u for u in lists_tables.zero3_uses(1, 1, 384, 8) if u.cost.op == "all_gather"][0]
    assert gather.cost.message_bytes == pytest.approx(302e6, rel=0.005)
    fill = kernel_model(A100, lists_tables.training, EfficiencyModel()).memory(
        gather.cost.message_bytes)
    assert fill == pytest.approx(0.173e-3, rel=0.01)
    assert lists[0] - plain[0] == pytest.approx(12 * (3.072e-3 + fill))
    assert lists[3] - plain[3] == pytest.approx(12 * 3.84e-3)
    # The views scale with the request's view_call_us; without per-rank lists there are none.
    slow = _tables(TrainingSpec(**base, zero3_per_rank_copies=True), 48,
                   EfficiencyModel(view_call_us=5)).zero3_times(1, 1, 384, 8)
    assert slow[0] - lists[0] == pytest.approx(12 * 384 * 3e-6)
    assert slow[3] - lists[3] == pytest.approx(12 * 384 * 2 * 3e-6)
    flat = _tables(TrainingSpec(**base), 48, EfficiencyModel(view_call_us=5)).zero3_times(
        1, 1, 384, 8)
    assert flat == plain


def test_the_readmes_per_rank_list_figures_at_2240_ranks():
    # README: at 2,240 ranks (530B over dp 2,240, 280 DGX A100) the views add 2,240 x 2 us
    # = 4.48 ms to a gather and 2,240 x 4 us = 8.96 ms to a reduce-scatter; the zero-fill of
    # a 530B layer's QKV matrix (3 x 20480^2 x 2 bytes = 2.517 GB) takes 1.42 ms at
    # 0.87 x 2,039 GB/s.
    mt = ModelSpec(num_layers=105, hidden_size=20480, num_attention_heads=128,
                   vocab_size=51200)
    tr = TrainingSpec(global_batch_size=2240, seq_length=2048, zero3_per_rank_copies=True)
    t = cost_tables(mt, ClusterSpec.from_preset("dgx-a100", num_nodes=280), tr,
                    EfficiencyModel())
    g = t.group(2240, 1, 8)
    qkv = 3 * 20480 ** 2 * 2
    assert qkv == pytest.approx(2.517e9, rel=0.001)
    gather = t.collective("all_gather", qkv, g)
    km = kernel_model(A100, tr, EfficiencyModel())
    assert km.memory(qkv) == pytest.approx(1.42e-3, rel=0.005)
    use = CollectiveUse("ZeRO", gather, 1, g)
    free = cost_tables(mt, ClusterSpec.from_preset("dgx-a100", num_nodes=280), tr,
                       EfficiencyModel(view_call_us=0))
    assert t.per_rank_lists_s(use) - free.per_rank_lists_s(use) == pytest.approx(4.48e-3)
    rs = CollectiveUse("ZeRO", t.collective("reduce_scatter", qkv, g), 1, g)
    assert t.per_rank_lists_s(rs) - free.per_rank_lists_s(rs) == pytest.approx(8.96e-3)


def test_per_rank_copies_are_gpu_bound_when_the_host_issues_them_faster():
    # With a free host call, each copy costs what the GPU takes: a kernel's fixed cost and the
    # chunk read and written at the achieved HBM bandwidth.
    tr = TrainingSpec(global_batch_size=64, seq_length=2048, zero3_per_rank_copies=True)
    eff = EfficiencyModel(copy_call_us=0, view_call_us=0)
    tables = _tables(tr, 2, eff)
    use = [u for u in tables.zero3_uses(1, 1, 16, 8) if u.cost.op == "all_gather"][0]
    km = kernel_model(A100, tr, eff)
    chunk = use.cost.message_bytes / 16
    # (and the gather's buffer zero-filled first: a kernel writing the whole message)
    assert tables.per_rank_lists_s(use) == pytest.approx(
        16 * (km.kernel_overhead_s + 2 * chunk / km.hbm_bytes_per_s)
        + km.kernel_overhead_s + use.cost.message_bytes / km.hbm_bytes_per_s)
    # Off (the default: one flat output buffer), nothing is added.
    flat = _tables(TrainingSpec(global_batch_size=64, seq_length=2048), 2, eff)
    assert flat.per_rank_lists_s(use) == 0.0



def test_selective_recompute_modules_trade_stored_bytes_for_recomputed_work():
    # Llama 3 8B (h 4096, SwiGLU f 14336), 4,096 tokens, tp 2, bf16, no sequence parallelism.
    # Adding layernorm and mlp to Megatron-LM's --recompute-modules (core_attn by default)
    # drops both norms' outputs (2 x T x h x 2 bytes) and the MLP's gate/up outputs and
    # activation (T x f / tp x (2 x 2 + 2) bytes), and recomputes the two norms, the MLP's two
    # GEMMs and its activation in the backward.
    m = ModelSpec.from_preset("llama3-8b")
    tr = TrainingSpec(global_batch_size=8, seq_length=4096)
    more = TrainingSpec(global_batch_size=8, seq_length=4096,
                        recompute_modules=("mlp", "core_attn", "layernorm"))
    shape = LayerShape(tp=2, recompute="selective")
    eff = EfficiencyModel()
    base, lean = (layer_work(m, t, shape, A100, eff) for t in (tr, more))
    T, h, f, e = 4096, 4096, 14336, 2
    assert base.stored_bytes - lean.stored_bytes == pytest.approx(
        2 * e * T * h + T * f * (2 * e + e) / 2)
    km = kernel_model(A100, tr, eff)
    extra = (km.memory(2 * 2 * T * h * e, kernels=2) + km.gemm(T, 2 * f / 2, h)
             + km.gemm(T, h, f / 2) + km.memory(T * f / 2 * e * 3, kernels=1))
    assert lean.recompute_s - base.recompute_s == pytest.approx(extra)
    assert lean.recompute_flops - base.recompute_flops == pytest.approx(
        2 * T * f * h + 2 * T * h * f / 2)
    # Without core_attn nothing of the attention core is recomputed (its softmax statistics
    # are stored instead).
    no_attn = layer_work(m, TrainingSpec(global_batch_size=8, seq_length=4096,
                                         recompute_modules=("layernorm",)), shape, A100, eff)
    assert no_attn.recompute_s == pytest.approx(km.memory(2 * 2 * T * h * e, kernels=2))
    assert no_attn.stored_bytes == pytest.approx(
        base.stored_bytes - 2 * e * T * h + 32 / 2 * T * 4)


def test_moe_recompute_modules_drop_expert_activations_and_repeat_the_all_to_alls():
    from planner.cost.tables import cost_tables
    m = ModelSpec.from_preset("mixtral-8x7b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
    eff = EfficiencyModel()

    def tr(*mods):
        return TrainingSpec(global_batch_size=8, seq_length=4096,
                            recompute_modules=mods or ("core_attn",))

    shape = LayerShape(tp=1, recompute="selective", ep=8)
    base = layer_work(m, tr(), shape, c.gpu, eff)
    act = layer_work(m, tr("core_attn", "moe_act"), shape, c.gpu, eff)
    whole = layer_work(m, tr("core_attn", "moe"), shape, c.gpu, eff)
    # moe_act drops the experts' activation output: 4,096 tokens x top-2 x 8 experts / 8 EP
    # ranks = 8,192 token copies on the busiest rank (load 1.1: 9,011.2) x 14,336 x 2 bytes.
    assert base.stored_bytes - act.stored_bytes == pytest.approx(
        4096 * 2 * 1.1 * 14336 * 2)
    assert whole.stored_bytes < act.stored_bytes
    assert whole.recompute_s > act.recompute_s > base.recompute_s
    # Recomputing the whole MoE layer runs its dispatch and combine again: 3 passes, not 2.
    calls = {mods: cost_tables(m, c, tr(*mods), eff).ep_uses(1, 1, 1, 1, 0, 8, 8, 1)[0].calls
             for mods in (("core_attn",), ("core_attn", "moe"))}
    assert calls == {("core_attn",): 4, ("core_attn", "moe"): 6}


def test_torchtitan_per_op_recompute_repeats_every_second_matmul_and_the_memory_bound_ops():
    # Llama 3 8B, 4,096 tokens, no TP: torchtitan's per-op policy counts the block's matmuls
    # (wq, wk, wv, wo, w1, w3, w2) and recomputes the even ones, wk (N = 1,024), wo and w3
    # (N = 14,336), with every op that is not a matmul or the attention kernel. It keeps the
    # block's input and the outputs of wq, wv, attention (and its log-sum-exp), w1 and w2.
    m = ModelSpec.from_preset("llama3-8b")
    tr = TrainingSpec(global_batch_size=8, seq_length=4096, selective_recompute="per_op")
    eff = EfficiencyModel()
    lw = layer_work(m, tr, LayerShape(recompute="selective"), A100, eff)
    km = kernel_model(A100, tr, eff)
    T, h, f, kv = 4096, 4096, 14336, 1024
    fwd_lin = (km.gemm(T, h + 2 * kv, h) + km.gemm(T, h, h) + km.gemm(T, 2 * f, h)
               + km.gemm(T, h, f))
    memory_bound = lw.fwd_s - fwd_lin - lw.attn_core_fwd_s
    assert lw.recompute_s == pytest.approx(km.gemm(T, kv, h) + km.gemm(T, h, h)
                                           + km.gemm(T, f, h) + memory_bound)
    assert lw.recompute_flops == pytest.approx(2 * T * h * (kv + h + f))
    assert lw.stored_bytes == pytest.approx(2 * T * (2 * h + h + kv + h + f) + 32 * T * 4)


def test_pipeline_sends_the_whole_activation_unless_sequence_parallelism_splits_it():
    # Megatron-Core sends [s / cp, b, h] from every TP rank (get_tensor_shapes), split over
    # the TP ranks only with sequence parallelism; Megatron-LM of 2021 (and DeepSpeed's
    # pipeline engine) split it anyway. GPT-3 175B, 2,048 tokens, bf16: 2,048 x 12,288 x 2 B.
    from planner.cost.tables import cost_tables
    m = ModelSpec.from_preset("gpt3-175b")
    c = ClusterSpec.from_preset("dgx-a100", num_nodes=4)

    def sent(sp, **kw):
        tr = TrainingSpec(global_batch_size=8, seq_length=2048, **kw)
        return cost_tables(m, c, tr, EfficiencyModel()).p2p_use(8, 1, 1, 4, 1, sp).cost \
            .message_bytes

    whole = 2048 * 12288 * 2
    assert sent(False) == whole
    assert sent(True) == whole / 8
    assert sent(False, p2p_scatter_gather=True) == whole / 8
    # The step pays it: without sequence parallelism the pipeline's exchanges take longer.
    tr = TrainingSpec(global_batch_size=64, seq_length=2048)
    plan = ParallelPlan(tp=8, pp=4, micro_batch_size=1, recompute="full")
    slow = estimate(m, c, tr, plan)
    split = estimate(m, c, TrainingSpec(global_batch_size=64, seq_length=2048,
                                        p2p_scatter_gather=True), plan)
    assert slow.breakdown["pp_comm"] > split.breakdown["pp_comm"]


def test_per_op_recompute_without_swiglu_recomputes_the_down_projection():
    # A GELU MLP has two matmuls (w1, w2): the block's sixth matmul is w2, recomputed, and
    # its output is not kept. GPT-3 2.7B-like block: h 2560, f 10240, 2,048 tokens.
    m = ModelSpec(name="g", num_layers=4, hidden_size=2560, num_attention_heads=32,
                  ffn_type="gelu", vocab_size=50304)
    tr = TrainingSpec(global_batch_size=8, seq_length=2048, selective_recompute="per_op")
    eff = EfficiencyModel()
    lw = layer_work(m, tr, LayerShape(recompute="selective"), A100, eff)
    km = kernel_model(A100, tr, eff)
    T, h, f = 2048, 2560, 10240
    fwd_lin = km.gemm(T, 3 * h, h) + km.gemm(T, h, h) + km.gemm(T, f, h) + km.gemm(T, h, f)
    memory_bound = lw.fwd_s - fwd_lin - lw.attn_core_fwd_s
    assert lw.recompute_s == pytest.approx(km.gemm(T, h, h) + km.gemm(T, h, h)
                                           + km.gemm(T, h, f) + memory_bound)
    assert lw.stored_bytes == pytest.approx(2 * T * (h + h + h + h + f) + 32 * T * 4)


def test_a_module_the_model_lacks_changes_nothing_in_the_core():
    # Requests naming mla_up_proj for a model without multi-latent attention are refused
    # (422); called directly, the cost model ignores the module instead of removing Q, K, V.
    m = ModelSpec.from_preset("llama3-8b")
    shape = LayerShape(tp=2, recompute="selective")
    base = layer_work(m, TrainingSpec(global_batch_size=8, seq_length=4096), shape, A100,
                      EfficiencyModel())
    odd = layer_work(m, TrainingSpec(global_batch_size=8, seq_length=4096,
                                     recompute_modules=("core_attn", "mla_up_proj", "moe_act")),
                     shape, A100, EfficiencyModel())
    assert (odd.stored_bytes, odd.recompute_s, odd.recompute_flops) == (
        base.stored_bytes, base.recompute_s, base.recompute_flops)
