"""PyTorch's ring attention (``training.ring_attention`` 'torch' / 'torch_allgather',
planner/cost/ring.py): its eager merges and accumulations, its exchanges, what torchtitan runs
and what the corpus's torchtitan context-parallel sweeps then measure against it."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import kernel_model
from planner.cost.ring import torch_ring_exchange_bytes, torch_ring_extras
from planner.cost.tables import cost_tables, overlapped
from planner.launch.context import LaunchContext
from planner.launch.torchtitan import torchtitan_toml
from planner.search.plan_request import PlanRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

LLAMA8B = ModelSpec.from_preset("llama3-8b")
NODE = ClusterSpec.from_preset("dgx-h100")
EFF = EfficiencyModel()


def test_the_merges_and_accumulations_are_worked_by_hand():
    # E = E_kv = 1,000 elements, cp 4. Forward: 12 E (step 0's fp32 copy, the final cast) +
    # 3 later steps x (32.5 E merge + 8 E_kv K,V concatenation) = 12,000 + 3 x 40,500.
    # Backward: E (10 + 11.5 x 4) = 56,000; E_kv (40 + 31 x 3 + 16 x 4) = 197,000.
    ring = torch_ring_extras(1000, 1000, 4)
    assert (ring.fwd_bytes, ring.bwd_bytes) == (133_500, 253_000)
    assert (ring.fwd_kernels, ring.bwd_kernels) == (28, 32)
    # Without context parallelism nothing; K,V counted apart from the queries (E_kv 500).
    assert torch_ring_extras(1000, 1000, 1).fwd_bytes == 0.0
    assert torch_ring_extras(1000, 500, 2).fwd_bytes == 12_000 + 32_500 + 4_000
    # One rank's K and V in bf16, and their gradients in fp32.
    assert torch_ring_exchange_bytes(1000, 2) == (4000, 8000)


def _layer(ring: str, cp: int = 4, rec: int = 0):
    # K and V expanded to the 32 query heads (``repeat_kv``, torchtitan through v0.2.1).
    training = TrainingSpec(global_batch_size=8, seq_length=32768, ring_attention=ring,
                            repeat_kv=True)
    tables = cost_tables(LLAMA8B, NODE, training, EFF)
    return tables, tables.layer(1, cp, 1, rec, 0, 8)


def test_the_layer_pays_the_eager_work_on_top_of_transformer_engines_ring():
    _, te = _layer("te")
    _, torch = _layer("torch")
    # One rank's query block at cp 4: 8,192 tokens x 4,096 (32 heads of 128); K and V repeated
    # to all 32 heads, so E_kv = E.
    e = 32768 // 4 * 4096
    ring = torch_ring_extras(e, e, 4)
    km = kernel_model(NODE.gpu, TrainingSpec(global_batch_size=8, seq_length=32768), EFF)
    assert torch.work.fwd_s - te.work.fwd_s == pytest.approx(
        km.memory(ring.fwd_bytes, kernels=ring.fwd_kernels))
    assert torch.work.bwd_s - te.work.bwd_s == pytest.approx(
        km.memory(ring.bwd_bytes, kernels=ring.bwd_kernels))
    # 133.5 E forward: 4.5 GB at 3,015 GB/s.
    assert ring.fwd_bytes == pytest.approx(133.5 * e)


def test_the_exchanges_follow_the_rotate_method():
    k = EFF.overlap_slowdown
    for ring, op, passes in (("torch", "send_recv", 3 * 3), ("torch_allgather", "all_gather", 3)):
        tables, cost = _layer(ring, rec=2)
        kv, grads = tables.cp_uses(1, 4, 1, 2, 0, 8)
        # Full recompute: K,V in the forward, the recompute and the backward; cp gradient
        # exchanges (fp32 K and V at all 32 heads: 8,192 x 4,096 x 2 x 4 bytes).
        assert (kv.cost.op, kv.calls, grads.cost.op, grads.calls) == (op, passes, "send_recv",
                                                                      4)
        assert grads.cost.message_bytes == 8192 * 4096 * 2 * 4
        step_f, step_b = cost.work.attn_core_fwd_s / 4, cost.work.attn_core_bwd_s / 4
        t, d = kv.cost.time_s, grads.cost.time_s
        if op == "all_gather":
            # The all-gather hides behind the first step of each pass only.
            assert kv.cost.message_bytes == 4 * 8192 * 4096 * 2 * 2
            fwd = overlapped(t, step_f, k)
            bwd = overlapped(t, step_b, k) + 3 * overlapped(d, step_b, k) + d
        else:
            fwd = 3 * overlapped(t, step_f, k)
            bwd = 3 * overlapped(t + d, step_b, k) + d
        assert (cost.cp_fwd, cost.cp_bwd) == pytest.approx((fwd, bwd + fwd))
    # Transformer Engine's ring passes K and V at their 8 heads, in 16 bits, one pass at a time.
    tables, _ = _layer("te")
    fwd, bwd = tables.cp_uses(1, 4, 1, 0, 0, 8)
    assert fwd.cost.message_bytes == 8192 * 1024 * 2 * 2 and bwd.calls == 3


def test_torchtitan_runs_pytorchs_ring_and_a_search_for_it_costs_that():
    """torchtitan v0.2.2 trains with PyTorch's context_parallel at its default rotation, the
    K,V all-gather: its training path never applies context_parallel_rotate_method (only
    validate.py's create_context_parallel_ctx calls set_rotate_method)."""
    request = PlanRequest.model_validate({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "training": {"global_batch_size": 8, "seq_length": 32768},
        "search": {"framework": "torchtitan"}})
    assert request.training.ring_attention == "torch_allgather"
    # A request that says otherwise keeps what it says.
    said = PlanRequest.model_validate({**request.model_dump(mode="json"),
                                       "training": {"global_batch_size": 8,
                                                    "seq_length": 32768,
                                                    "ring_attention": "torch"}})
    assert said.training.ring_attention == "torch"


@pytest.mark.parametrize("ring,runs", [("torch", False), ("torch_allgather", True),
                                       ("te", False)])
def test_the_torchtitan_config_rotates_as_costed(ring, runs):
    training = TrainingSpec(global_batch_size=8, seq_length=32768, ring_attention=ring,
                            zero3_per_parameter=True)
    plan = ParallelPlan(dp=2, cp=4, micro_batch_size=1, zero_stage=3)
    est = estimate(LLAMA8B, NODE, training, plan)
    assert ("torchtitan" in est.frameworks) is runs
    if runs:
        toml, _ = torchtitan_toml(LaunchContext(est, LLAMA8B, NODE, training))
        assert 'context_parallel_rotate_method = "allgather"' in toml


def test_the_probe_replays_pytorchs_ring_as_costed():
    # The step pattern's CP exchanges: per forward cp - 1 of one rank's K,V (the all-gather
    # replayed as those), per backward the same again and cp exchanges of the fp32 K,V
    # gradients; with full recompute the forward's once more.
    from planner.cost.tables import CostTables
    from planner.validation.pattern import step_pattern

    own, grads = torch_ring_exchange_bytes(8192 * 4096, 2)
    for ring in ("torch", "torch_allgather"):
        training = TrainingSpec(global_batch_size=8, seq_length=32768, ring_attention=ring,
                                zero3_per_parameter=True, repeat_kv=True)
        est = estimate(LLAMA8B, NODE, training, ParallelPlan(dp=2, cp=4, micro_batch_size=1,
                                                               zero_stage=3, recompute="full"))
        pat = step_pattern(est, CostTables(LLAMA8B, NODE, training, EFF))
        assert pat["cp_fwd"] == [[own, 3]]
        assert pat["cp_bwd"] == [[own, 3], [own, 3], [grads, 4]]


def test_the_merges_are_costed_with_the_exchanges_whatever_the_attention_kernel():
    # Without flash attention the ring still exchanges and merges: both are charged or
    # neither, never the exchanges alone.
    for flash in (True, False):
        base = TrainingSpec(global_batch_size=8, seq_length=32768, flash_attention=flash,
                            repeat_kv=True)
        te = cost_tables(LLAMA8B, NODE, base, EFF).layer(1, 4, 1, 0, 0, 8)
        torch = cost_tables(LLAMA8B, NODE, base.model_copy(update={"ring_attention": "torch"}),
                            EFF).layer(1, 4, 1, 0, 0, 8)
        assert torch.work.fwd_s > te.work.fwd_s and torch.cp_fwd != te.cp_fwd


def _te_ring_bytes(e: float, e_kv: float, n: int) -> tuple[float, float]:
    """Transformer Engine's ring's own memory-bound bytes a layer and micro-batch, the mean
    over its n ranks (ring.py's docstring, which the model does not cost yet)."""
    return (4 * e + 4.5 * e * (n - 1) + 8 * e_kv,
            4 * e + 4.5 * e * (n - 1) + (9 * n + 7) * e_kv)


def test_transformer_engines_uncosted_ring_work_is_sized_as_the_docstring_says():
    # By hand at cp 2, E = E_kv = 1,000. Forward, rank 0: K,V concatenated (8 E_kv), step 0's
    # output taken (4 E), step 1's second query half merged (3 E); rank 1 the same with step
    # 1 whole (6 E): mean 8 E_kv + 8.5 E. Backward, rank 0: K,V copied (8 E_kv), dQ half
    # copied (2 E) then half copied and half added (5 E), dK,dV copied (8 E_kv) then half
    # added and half copied (10 E_kv); rank 1: 8 E_kv, dQ copied (4 E) then added (6 E),
    # dK,dV half copied (4 E_kv) then added (12 E_kv): mean 8.5 E + 25 E_kv.
    assert _te_ring_bytes(1000, 1000, 2) == (16_500, 33_500)
    # The closed form beyond cp 2, branch by branch at cp 4 (step i, rank r, j = 3 - r).
    # Forward outputs: rank r merges r steps whole (6 E) and 3 - r halves (3 E) after step
    # 0's 4 E: 13, 16, 19, 22 E, mean 17.5 E. Backward dQ: rank 0 half-copies, half-adds
    # twice, then half-copies and half-adds (2 + 3 + 3 + 5); rank 1 2 + 3 + 5 + 6; rank 2
    # 2 + 5 + 6 + 6; rank 3 copies, then adds three times (4 + 6 + 6 + 6): 13, 16, 19, 22 E,
    # mean 17.5 E. dK,dV: rank 0 copies, adds twice, then half-adds and half-copies
    # (8 + 12 + 12 + 10); rank 1 8 + 12 + 6 + 12; rank 2 8 + 6 + 6 + 12; rank 3 half-copies,
    # half-adds twice, then adds (4 + 6 + 6 + 12): 42, 38, 32, 28 E_kv, mean 35, plus the
    # 8 E_kv copy of K,V (and the forward's concatenation, 8 E_kv).
    assert _te_ring_bytes(1000, 0, 4) == (17_500, 17_500)
    assert _te_ring_bytes(0, 1000, 4) == (8_000, 43_000)
    # Llama 3 8B at 8,192 tokens over cp 2 on one DGX H100: 4,096 local tokens, Q of 4,096
    # and K of 1,024 a token; about 1% of the layer's forward and backward.
    training = TrainingSpec(global_batch_size=8, seq_length=8192)
    layer = cost_tables(LLAMA8B, NODE, training, EFF).layer(1, 2, 1, 0, 0, 8)
    km = kernel_model(NODE.gpu, training, EFF)
    share = km.memory(sum(_te_ring_bytes(4096 * 4096, 4096 * 1024, 2)), kernels=0) / (
        layer.fwd + layer.bwd)
    assert round(share, 3) == 0.011
    # Llama 3 8B at 128K tokens over cp 32 on 4 nodes, full recompute (the forward twice), 32
    # layers, 8 micro-batches: about 4% of the step.
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    long = TrainingSpec(global_batch_size=8, seq_length=131072)
    plan = ParallelPlan(dp=1, cp=32, micro_batch_size=1, zero_stage=1, recompute="full")
    fwd, bwd = _te_ring_bytes(4096 * 4096, 4096 * 1024, 32)
    extra = kernel_model(cluster.gpu, long, EFF).memory(2 * fwd + bwd, kernels=0) * 32 * 8
    assert round(extra / estimate(LLAMA8B, cluster, long, plan).step_time_s, 2) == 0.04
