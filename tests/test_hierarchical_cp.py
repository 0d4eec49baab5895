"""Hierarchical context parallelism (``training.ring_attention`` 'a2a+p2p' with
``cp_a2a_size``; Megatron-Core's ``--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes
a c`` through Transformer Engine's ``AttnFuncWithCPAndKVP2P``): the all-to-alls over a
consecutive CP ranks, then the ring over the c = cp / a strided ones, worked by hand; its rules
in the plan checks and the search; what the launch and the probe do with it."""

import pytest
from pydantic import ValidationError

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import kernel_model
from planner.cost.tables import CostTables, cost_tables
from planner.cost.ulysses import cp_split
from planner.launch.context import LaunchContext
from planner.launch.megatron import megatron_args
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations
from planner.specs.plan import a2a_cp_violation
from planner.validation.pattern import step_pattern
from tests.launch_readers import megatron_parser

LLAMA8B = ModelSpec.from_preset("llama3-8b")       # 32 query heads, 8 K,V heads of 128
LLAMA70B = ModelSpec.from_preset("llama3-70b")     # 64 query heads, 8 K,V heads
NODE = ClusterSpec.from_preset("dgx-h100")
EFF = EfficiencyModel()


def _training(a: int = 4, **kw) -> TrainingSpec:
    return TrainingSpec(global_batch_size=8, seq_length=32768, ring_attention="a2a+p2p",
                        cp_a2a_size=a, **kw)


def test_the_hierarchy_needs_its_size_and_the_size_needs_the_hierarchy():
    with pytest.raises(ValidationError, match="needs cp_a2a_size"):
        TrainingSpec(global_batch_size=8, seq_length=4096, ring_attention="a2a+p2p")
    with pytest.raises(ValidationError, match="applies to ring_attention 'a2a\\+p2p' only"):
        TrainingSpec(global_batch_size=8, seq_length=4096, cp_a2a_size=2)
    with pytest.raises(ValidationError, match="cp_a2a_size"):
        _training(1)


def test_the_split_of_the_cp_ranks():
    assert cp_split(_training(4), 8) == (4, 2)
    assert cp_split(_training(2), 16) == (2, 8)
    assert cp_split(TrainingSpec(global_batch_size=8, seq_length=4096, ring_attention="a2a"),
                    8) == (8, 1)
    assert cp_split(TrainingSpec(global_batch_size=8, seq_length=4096), 8) == (1, 8)
    assert cp_split(_training(4), 1) == (1, 1)


def test_the_all_to_alls_and_the_ring_are_worked_by_hand():
    # cp 8 = 4 all-to-all ranks x 2 ring groups at 32,768 tokens: 4,096 local tokens. The
    # all-to-alls move one rank's Q and O (4,096 x 4,096 in bf16, 33,554,432 bytes) and its
    # K and V (4,096 x 1,024: 8,388,608 each) over 4 consecutive CP ranks, one pass each with
    # no recompute; the ring then passes K,V of 16,384 tokens at 2 of the 8 K,V heads, the
    # same 2 x 4,096 x 1,024 x 2 = 16,777,216 bytes a step as a ring of 8, once forward and
    # K,V with their gradients (twice that) once backward.
    tables = cost_tables(LLAMA8B, NODE, _training(4), EFF)
    uses = tables.cp_uses(1, 8, 1, 0, 0, 8)
    assert [(u.cost.op, u.cost.message_bytes, u.calls, u.group.size) for u in uses] == [
        ("all_to_all", 33_554_432, 2, 4), ("all_to_all", 8_388_608, 4, 4),
        ("all_to_all", 33_554_432, 2, 4),
        ("send_recv", 16_777_216, 1, 2), ("send_recv", 33_554_432, 1, 2)]
    # One step of the ring against a ring of 8 ranks' 7: a quarter of the attention beside it.
    cost = tables.layer(1, 8, 1, 0, 0, 8)
    a2a = sum(u.cost.time_s * u.calls for u in uses[:3]) / 2
    k = EFF.overlap_slowdown
    fwd, bwd = uses[3:]

    def overlapped(comm: float, compute: float) -> float:
        return max(comm - compute, 0.0) + k * min(comm, compute)

    assert cost.cp_fwd == pytest.approx(
        a2a + overlapped(fwd.cost.time_s, cost.work.attn_core_fwd_s / 2))
    assert cost.cp_bwd == pytest.approx(
        a2a + overlapped(bwd.cost.time_s, cost.work.attn_core_bwd_s / 2))
    # Inside one node no network is used.
    assert cost.cp_network_fwd == cost.cp_network_bwd == 0.0
    # The attention: two calls over 16,384-key chunks on 32 / 4 = 8 heads; the causal FLOPs of
    # 4,096 queries of every head against the whole sequence, as every CP variant's.
    km = kernel_model(NODE.gpu, _training(), EFF)
    flops = 2 * 32 * 4096 * 16384 * 256
    assert cost.work.attn_core_fwd_s == pytest.approx(
        km.attention(flops, 16384, kernels=2, batch_heads=8))


def test_full_recompute_repeats_the_forwards_exchanges():
    tables = cost_tables(LLAMA8B, NODE, _training(4), EFF)
    plain, full = tables.layer(1, 8, 1, 0, 0, 8), tables.layer(1, 8, 1, 2, 0, 8)
    assert full.cp_fwd == pytest.approx(plain.cp_fwd)
    assert full.cp_bwd == pytest.approx(plain.cp_bwd + plain.cp_fwd)


def test_across_nodes_the_ring_crosses_and_the_all_to_alls_stay_inside():
    # tp 2, cp 8 = 4 x 2 on two nodes: each all-to-all spans 4 CP ranks x tp 2 = one node,
    # the ring's two groups sit on the two nodes.
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    tables = cost_tables(LLAMA8B, cluster, _training(4), EFF)
    uses = tables.cp_uses(2, 8, 1, 0, 0, 8)
    assert {u.group.tier for u in uses[:3]} == {"intra_node"}
    assert {u.group.tier for u in uses[3:]} == {"inter_node"}
    cost = tables.layer(2, 8, 1, 0, 0, 8)
    assert cost.cp_network_fwd == pytest.approx(uses[3].cost.time_s)
    assert cost.cp_network_bwd == pytest.approx(uses[4].cost.time_s)


def test_the_rules_the_plan_checks_and_the_search_enforce():
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    # cp a multiple of cp_a2a_size (Megatron-LM asserts cp is the sizes' product); at cp =
    # cp_a2a_size Transformer Engine runs the all-to-all alone, costed so.
    for cp in (2, 6):
        why = a2a_cp_violation(LLAMA8B, _training(4), 1, cp)
        assert why is not None and f"cp({cp}) must be a multiple of 4" in why
    assert a2a_cp_violation(LLAMA8B, _training(4), 1, 8) is None
    assert a2a_cp_violation(LLAMA8B, _training(4), 1, 4) is None
    assert cp_split(_training(4), 4) == (4, 1)
    alone = cost_tables(LLAMA8B, NODE, TrainingSpec(global_batch_size=8, seq_length=32768,
                                                    ring_attention="a2a"), EFF)
    assert cost_tables(LLAMA8B, NODE, _training(4), EFF).layer(1, 4, 1, 0, 0, 8) == alone.layer(
        1, 4, 1, 0, 0, 8)
    # The head rule holds for the all-to-all's ranks, not cp: Llama 3 70B at tp 4 keeps 2 K,V
    # heads a rank, so cp_a2a_size 2 splits them at any cp, 4 does not.
    assert a2a_cp_violation(LLAMA70B, _training(2), 4, 16) is None
    why = a2a_cp_violation(LLAMA70B, _training(4), 4, 16)
    assert "K,V heads(8) / tp(4) = 2 is not divisible by cp_a2a_size(4)" in why
    plan = ParallelPlan(dp=1, tp=4, cp=4, micro_batch_size=1, zero_stage=1)
    assert any(f == "plan.cp" and "cp_a2a_size(4)" in m
               for f, m in plan_violations(plan, LLAMA70B, cluster, _training(4)))
    assert "fused attention" in a2a_cp_violation(LLAMA8B, _training(flash_attention=False), 1, 8)


def test_megatron_runs_it_with_its_hierarchical_sizes_and_nothing_else_does():
    plan = ParallelPlan(dp=1, cp=8, micro_batch_size=1, zero_stage=1, recompute="full")
    est = estimate(LLAMA8B, NODE, _training(4), plan)
    assert est.frameworks == ["megatron"]
    args, notes = megatron_args(LaunchContext(est, LLAMA8B, NODE, _training(4)))
    assert any("Transformer Engine 1.12" in n for n in notes)
    parsed = megatron_parser().parse_args(args)
    assert parsed.cp_comm_type == ["a2a+p2p"]
    assert parsed.hierarchical_context_parallel_sizes == [4, 2]
    assert parsed.context_parallel_size == 8


def test_the_probe_replays_the_all_to_alls_in_their_groups_and_the_ring_in_its():
    training = _training(2)
    est = estimate(LLAMA8B, NODE, training, ParallelPlan(dp=1, cp=8, micro_batch_size=1,
                                                          zero_stage=1, recompute="full"))
    pat = step_pattern(est, CostTables(LLAMA8B, NODE, training, EFF))
    # 2 all-to-all ranks x 4 ring groups at 4,096 local tokens: Q and O 33,554,432 bytes,
    # K and V 8,388,608 each; three ring steps of 16,777,216 bytes forward (33,554,432 with
    # the gradients backward), the recomputed forward's before the backward's.
    a2a = [["all_to_all", 33_554_432, 1, "cpa"], ["all_to_all", 8_388_608, 2, "cpa"],
           ["all_to_all", 33_554_432, 1, "cpa"]]
    assert pat["cpa"] == 2
    assert pat["cp_fwd"] == [*a2a, ["ring", 16_777_216, 3, "cpr"]]
    assert pat["cp_bwd"] == [*a2a, ["ring", 16_777_216, 3, "cpr"],
                             *a2a, ["ring", 33_554_432, 3, "cpr"]]
    # The attention core: 16 of the 32 heads, 8,192 queries against the whole sequence.
    assert pat["attn_bmm"][0] == [16, 8192, 32768, 128]


def test_it_sits_between_the_ring_and_the_all_to_all():
    """Llama 3 8B at 128K tokens on 4 DGX H100 nodes, tp 1 and cp 32: the all-to-all alone
    cannot split 8 K,V heads over 32 ranks; Transformer Engine's ring over 32 ranks runs 31
    steps of 4,096-token chunks, 24 of them across the network; the hierarchy keeps each
    all-to-all inside a node (8 ranks) and runs a ring of 4 over the nodes, each step on
    32,768 keys."""
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=4)
    plan = ParallelPlan(dp=1, cp=32, micro_batch_size=1, zero_stage=1, recompute="full")
    base = dict(global_batch_size=8, seq_length=131072)
    ring = estimate(LLAMA8B, cluster, TrainingSpec(**base), plan)
    hier = estimate(LLAMA8B, cluster, TrainingSpec(**base, ring_attention="a2a+p2p",
                                                   cp_a2a_size=8), plan)
    assert plan_violations(plan, LLAMA8B, cluster, TrainingSpec(**base, ring_attention="a2a"))
    # The README's figures: 18.3 s with 2.79 s of exposed CP exchanges, 14.9 s with 0.38 s.
    assert (round(ring.step_time_s, 1), round(ring.breakdown["cp_comm"], 2)) == (18.3, 2.79)
    assert (round(hier.step_time_s, 1), round(hier.breakdown["cp_comm"], 2)) == (14.9, 0.38)


@pytest.mark.parametrize("seed", range(8))
def test_the_solver_equals_exhaustive_enumeration_under_the_hierarchy(seed):
    """Random small spaces (as ``tests/test_search.py`` draws them) under ring_attention
    'a2a+p2p' with cp_a2a_size 2: the search's answer is exhaustive enumeration's, and every
    plan it returns passes the hierarchy's rules."""
    import random

    from planner.search import PlanRequest, plan
    from tests.search_oracle import assert_equals_oracle, enumerate_top_k
    from tests.test_search import random_request

    req = random_request(random.Random(seed))
    body = req.model_dump(mode="json")
    body["training"].update(ring_attention="a2a+p2p", cp_a2a_size=2, flash_attention=True)
    hier = PlanRequest.model_validate(body)
    got = plan(hier)
    assert_equals_oracle(got, enumerate_top_k(hier))
    for p in got.plans:
        assert a2a_cp_violation(hier.model, hier.training, p.tp, p.cp) is None
        assert p.cp % 2 == 0 or p.cp == 1


@pytest.mark.slow
def test_a_hierarchical_plan_runs_its_all_to_alls_and_its_ring_on_four_ranks():
    """cp 4 = 2 all-to-all ranks x a ring of 2 on 4 gloo ranks: the probe runs the all-to-alls
    of Q, K, V and O over pairs of consecutive ranks and the ring's K,V exchanges between the
    pairs, and measures both as CP."""
    from planner.probe.validate import validate
    from planner.search import PlanRequest
    from tests.test_validation import TINY

    req = {**TINY, "training": {**TINY["training"], "ring_attention": "a2a+p2p",
                                "cp_a2a_size": 2},
           "search": {**TINY["search"], "cp": 4, "tp": 1, "pp": 1, "top_k": 1}}
    res = validate(PlanRequest.model_validate(req), nproc=4, top_k=1, steps=1, timeout_s=90)
    (p,) = res.plans
    assert p.plan["cp"] == 4 and p.mode == "full", p.note
    assert p.measured["breakdown"]["cp_comm"] > 0 and p.predicted["breakdown"]["cp_comm"] > 0
    # One micro-batch of 64 local tokens x 256 wide in fp32: Q, K, V and O alike over pairs
    # of ranks (not the 4 of the CP group); K,V (and with their gradients, twice that)
    # between the pairs.
    a2a = {(s.message_bytes, s.group_size) for s in res.samples if s.op == "all_to_all"}
    assert a2a == {(64 * 256 * 4, 2)}
    ring = {(s.message_bytes, s.group_size) for s in res.samples if s.op == "send_recv"}
    assert ring == {(2 * 64 * 256 * 4, 2), (4 * 64 * 256 * 4, 2)}
