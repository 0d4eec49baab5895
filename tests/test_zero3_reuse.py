"""DeepSpeed's ZeRO-3 reuse distance (``training.zero3_max_reuse_params``,
planner/cost/reuse.py): which weight matrices are gathered again in the backward, what that
costs in the step, and the DeepSpeed config that runs the plan as costed."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import kernel_model
from planner.cost.reuse import backward_gathers, layer_matrices
from planner.cost.tables import CollectiveUse, cost_tables
from planner.launch.context import LaunchContext
from planner.launch.deepspeed import deepspeed_config
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from tests.cost_history import without_rank_views

GPT3 = ModelSpec.from_preset("gpt3-175b")
H = 12288


def test_gpt3_layer_matrices_are_megatrons_fused_modules():
    # QKV 3h^2, projection h^2, FC1 4h^2, FC2 4h^2 (no biases: vectors stay gathered); over
    # tp 4 a quarter of each.
    assert layer_matrices(GPT3, 1) == (3 * H * H, H * H, 4 * H * H, 4 * H * H)
    assert layer_matrices(GPT3, 4) == tuple(w / 4 for w in layer_matrices(GPT3, 1))
    llama = ModelSpec.from_preset("llama3-70b")      # h 8192, 8 KV heads of 128, SwiGLU 28672
    h, f = 8192, 28672
    assert layer_matrices(llama, 1) == (h * (h + 2 * 1024), h * h, 2 * h * f, h * f)


def test_gpt3_175b_under_full_recompute_gathers_three_of_four_matrices_twice_in_the_backward():
    # DeepSpeed's default distance, 1e9 parameters. W = 12 h^2 = 1,811,939,328.
    # Recompute: matrix j's next use after its forward is W - w_j + 3 r W away, at least
    # W - 4 h^2 = 1.208e9 >= 1e9 on the last layer (r = 0), so every matrix is gathered for
    # the recompute. Then its backward follows 2 S_j later: QKV 2 x 9h^2 = 2.718e9, the
    # projection 2 x 8h^2 = 2.416e9, FC1 2 x 4h^2 = 1.208e9 (all >= 1e9: gathered again), FC2 0
    # (kept).
    assert backward_gathers(layer_matrices(GPT3, 1), 96, 1e9, True) == (2, 2, 2, 1)
    # Without recompute a matrix's backward comes 2 r W + 2 S_j after its forward: every layer
    # but the last regathers all four; the last keeps FC2 (0 apart) gathered.
    assert backward_gathers(layer_matrices(GPT3, 1), 96, 1e9, False) == (1, 1, 1, 95 / 96)
    # Over tp 8 the matrices are 8 times smaller: W / 8 = 226.5M. The recompute regathers a
    # matrix on the layers with W/8 - w_j/8 + 3 r W/8 >= 1e9, r >= 1.31 to 1.36: 94 of 96
    # layers; no 2 S_j / 8 (at most 0.34e9) reaches 1e9, so the backward keeps them all.
    counts = backward_gathers(layer_matrices(GPT3, 8), 96, 1e9, True)
    assert counts == pytest.approx((94 / 96,) * 4)


def test_a_small_model_stays_gathered_from_its_forward_through_its_backward_on_the_last_layers():
    # h 2048, 24 layers: W = 12 h^2 = 50,331,648. Without recompute matrix j is kept when
    # 2 r W + 2 S_j < 1e9: QKV (2 S = 75.5M) while r <= 9.18, FC2 (S = 0) while r <= 9.93, so
    # the last 10 layers keep all four and 14 of 24 are gathered for the backward.
    small = ModelSpec(name="gpt-2k", num_layers=24, hidden_size=2048, num_attention_heads=16,
                      ffn_type="gelu", vocab_size=51200)
    assert backward_gathers(layer_matrices(small, 1), 24, 1e9, False) == (14 / 24,) * 4
    # Full recompute: the recompute regathers where W - w_j + 3 r W >= 1e9, r >= 7 (QKV: r >=
    # 6.37, FC2: r >= 6.40): 17 of 24 layers; the backward right after keeps them.
    assert backward_gathers(layer_matrices(small, 1), 24, 1e9, True) == (17 / 24,) * 4
    # FSDP's rule (null distance) is not this function's: one gather per backward, below.
    assert backward_gathers(layer_matrices(small, 1), 24, 1e15, True) == (0, 0, 0, 0)


def _setup(**training):
    cluster = ClusterSpec.from_preset("dgx-a100", num_nodes=48)
    tr = TrainingSpec(global_batch_size=1536, seq_length=2048, precision="fp16",
                      flash_attention=False, zero3_gathers_per_layer=12, **training)
    return cluster, tr


def test_the_backward_gathers_of_a_dense_layer_are_costed_matrix_by_matrix():
    # GPT-3 175B over dp 384 with per-rank copies (DeepSpeed of 2021): the forward keeps its 12
    # calls of W / 12; the backward under full recompute gathers QKV, projection and FC1 twice
    # and FC2 once, each call its collective and 384 host-issued copies of 6 us (as costed
    # before the views DeepSpeed's Python loop makes to build the per-rank lists and a
    # gather buffer's zero-fill were; they follow).
    with without_rank_views():
        back_full, p_full = _matrix_by_matrix()
    # With the loop's views (one narrow a rank, 2 us) and each gather's buffer zero-filled
    # first (a write of the whole matrix): the five calls saved save their views, the 8 h^2
    # regathered add their fills, and the backward's gathers take 2.7% longer.
    cluster, tr = _setup(zero3_per_rank_copies=True, zero3_max_reuse_params=1e9)
    _, plain = _setup(zero3_per_rank_copies=True)
    km = kernel_model(cluster.gpu, tr, EfficiencyModel())
    fills = [km.memory(w * 2) for w in layer_matrices(GPT3, 1)]
    full = cost_tables(GPT3, cluster, tr, EfficiencyModel()).zero3_times(1, 1, 384, 8,
                                                                         layers=96)
    flat = cost_tables(GPT3, cluster, plain, EfficiencyModel()).zero3_times(1, 1, 384, 8,
                                                                            layers=96)
    assert full[2] - back_full == pytest.approx(
        7 * 384 * 2e-6 + 2 * fills[0] + 2 * fills[1] + 2 * fills[2] + fills[3])
    plain_t = cost_tables(GPT3, cluster, plain, EfficiencyModel())
    call = [u for u in plain_t.zero3_uses(1, 1, 384, 8) if u.cost.op == "all_gather"][0]
    assert flat[2] - p_full == pytest.approx(
        12 * (384 * 2e-6 + km.memory(call.cost.message_bytes)))
    assert full[2] / flat[2] == pytest.approx(1.027, abs=0.001)


def _matrix_by_matrix() -> tuple[float, float]:
    """The matrix-by-matrix costing of the backward's gathers: (their time under full
    recompute with the reuse distance, the same without it), after checking each part."""
    cluster, tr = _setup(zero3_per_rank_copies=True, zero3_max_reuse_params=1e9)
    _, plain = _setup(zero3_per_rank_copies=True)
    t = cost_tables(GPT3, cluster, tr, EfficiencyModel())
    fwd, back_none, back_full, rs, net = t.zero3_times(1, 1, 384, 8, layers=96)
    g = t.group(384, 1, 8)
    uses = [CollectiveUse("ZeRO", t.collective("all_gather", w * 2, g), 1, g)
            for w in layer_matrices(GPT3, 1)]
    one = [u.cost.time_s + t.per_rank_lists_s(u) for u in uses]
    # Each copy is the longer of the host's 6 us and the GPU's (a 3h^2 x 2 / 384 = 2.36 MB
    # chunk read and written): at least 384 x 6 us a call.
    assert all(t.per_rank_lists_s(u) >= 384 * 6e-6 for u in uses)
    assert back_full == pytest.approx(2 * one[0] + 2 * one[1] + 2 * one[2] + one[3])
    assert back_none == pytest.approx(one[0] + one[1] + one[2] + 95 / 96 * one[3])
    # The forward's gathers, the reduce-scatters and the tier are as without the distance,
    # where (FSDP's rule) the backward is the forward's gather again.
    p_fwd, p_none, p_full, p_rs, p_net = cost_tables(GPT3, cluster, plain, EfficiencyModel()
                                                     ).zero3_times(1, 1, 384, 8, layers=96)
    assert (fwd, rs, net) == (p_fwd, p_rs, p_net) and net == 1.0
    assert p_none == p_full == p_fwd
    # Seven calls instead of twelve: 20 h^2 of weights instead of 12 h^2 on the wire (the
    # collectives take 1.52 times as long, less than 20 / 12 for their fewer latencies) but
    # 5 x 384 copies fewer, so the backward's gathers take only 7.5% longer.
    coll_full = sum(c * u.cost.time_s for c, u in zip((2, 2, 2, 1), uses, strict=True))
    plain_use = [u for u in cost_tables(GPT3, cluster, plain, EfficiencyModel()).zero3_uses(
        1, 1, 384, 8) if u.cost.op == "all_gather"][0]
    assert coll_full / (12 * plain_use.cost.time_s) == pytest.approx(1.52, abs=0.005)
    assert back_full / p_full == pytest.approx(1.075, abs=0.001)
    return back_full, p_full


def test_the_step_pays_the_recompute_gathers_only_under_full_recompute():
    # Gathered on demand (no prefetch), so each layer's backward waits for all its gathers:
    # one micro-batch of 4 sequences per rank, 96 layers.
    plan = dict(dp=384, tp=1, pp=1, micro_batch_size=4, zero_stage=3)
    steps, tables = {}, {}
    for reuse in (None, 1e9):
        cluster, tr = _setup(zero3_max_reuse_params=reuse, zero3_prefetch_layers=0)
        tables[reuse] = cost_tables(GPT3, cluster, tr, EfficiencyModel()).zero3_times(
            1, 1, 384, 8, layers=96)
        for rec in ("full", "selective"):
            est = estimate(GPT3, cluster, tr, ParallelPlan(**plan, recompute=rec))
            steps[reuse, rec] = est
    # Full recompute: the regathers lengthen the exposed ZeRO-3 time, nothing else.
    more = steps[1e9, "full"].breakdown["zero_comm"] - steps[None, "full"].breakdown["zero_comm"]
    assert more == pytest.approx(96 * (tables[1e9][2] - tables[None][2]), rel=1e-9)
    assert more > 1.0
    assert steps[1e9, "full"].breakdown["compute"] == steps[None, "full"].breakdown["compute"]
    # The communication items name the per-matrix gathers: 96 layers x (2 + 2 + 2 + 1).
    gathers: dict[float, float] = {}
    for c in steps[1e9, "full"].communication:
        if c.op == "all_gather" and c.strategy == "ZeRO":
            gathers[c.message_bytes] = gathers.get(c.message_bytes, 0) + c.count_per_step
    assert gathers[2 * 3 * H * H] == pytest.approx(96 * 2)               # QKV
    assert gathers[2 * 4 * H * H] == pytest.approx(96 * (2 + 1))         # FC1 and FC2
    assert gathers[2 * GPT3.nonexpert_params_per_layer / 12] == pytest.approx(96 * 12)
    # Selective recompute reruns no weight: the backward gathers each matrix once (on all but
    # the last layer), 4 calls where FSDP's rule counts the forward's 12 of W / 12 again,
    # so it pays 8 calls' latency less a layer.
    assert steps[1e9, "selective"].step_time_s < steps[None, "selective"].step_time_s


def test_a_mixture_of_experts_model_is_refused_the_reuse_distance():
    from pydantic import ValidationError

    from planner.request import EstimateRequest
    body = {"model": {"preset": "mixtral-8x7b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "training": {"global_batch_size": 64, "seq_length": 4096,
                         "zero3_max_reuse_params": 1e9}, "plan": {"dp": 8, "zero_stage": 3}}
    with pytest.raises(ValidationError, match="costed for dense models"):
        EstimateRequest.model_validate(body)


def _deepspeed(model: ModelSpec, tp: int, **training):
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=8)
    tr = TrainingSpec(global_batch_size=512, seq_length=2048, **training)
    plan = ParallelPlan(dp=64 // tp, tp=tp, pp=1, micro_batch_size=1, recompute="full",
                        zero_stage=3)
    est = estimate(model, cluster, tr, plan)
    cfg, _ = deepspeed_config(LaunchContext(est, model, cluster, tr))
    return cfg["zero_optimization"]


def test_the_deepspeed_config_gathers_as_the_plan_is_costed():
    # GPT-3 175B at tp 1: a layer is 12 h^2 + 2 h (its norms) = 1,811,963,904 parameters.
    # Prefetched one layer ahead (training.zero3_prefetch_layers 1, DeepSpeed's default bucket
    # being 5e7), at most two layers live (the one in use and the one ahead, as the memory
    # model holds), and kept from its recompute to its backward: twice a layer, where
    # DeepSpeed's default 1e9 would regather QKV, the projection and FC1.
    layer = 12 * H * H + 2 * H
    assert layer == 1_811_963_904
    # Its gradients reduce-scatter in one bucket a layer, as costed.
    assert _deepspeed(GPT3, 1) == {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                                   "stage3_prefetch_bucket_size": layer,
                                   "stage3_max_live_parameters": 2 * layer,
                                   "stage3_max_reuse_distance": 2 * layer,
                                   "reduce_bucket_size": layer}
    # At tp 8 the layer is 8 times smaller and DeepSpeed's defaults already cover the rest.
    small = _deepspeed(GPT3, 8)
    assert small["stage3_prefetch_bucket_size"] == small["reduce_bucket_size"] == layer // 8
    assert small["stage3_max_live_parameters"] == small["stage3_max_reuse_distance"] == 10**9
    # Half a layer ahead, or on demand (no prefetch, as P = 0 is costed).
    assert _deepspeed(GPT3, 1, zero3_prefetch_layers=0.5)["stage3_prefetch_bucket_size"] == (
        layer // 2)
    assert _deepspeed(GPT3, 1, zero3_prefetch_layers=0)["stage3_prefetch_bucket_size"] == 0
    # A distance the training names is what the config sets (and what the plan is costed with).
    assert _deepspeed(GPT3, 1, zero3_max_reuse_params=5e8)["stage3_max_reuse_distance"] == 5 * 10**8
