"""All-to-all context parallelism (``training.ring_attention`` 'a2a', planner/cost/ulysses.py):
DeepSpeed-Ulysses' scheme as Transformer Engine runs it for Megatron-Core
(``--cp-comm-type a2a``): its exchanges, copies and attention call worked by hand, its head
rule in the plan checks and the search, and what the launch and the probe do with it."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import kernel_model
from planner.cost.tables import CostTables, cost_tables
from planner.cost.ulysses import a2a_copy_bytes, a2a_tensor_elems
from planner.launch.context import LaunchContext
from planner.launch.megatron import megatron_args
from planner.search.space import build_space
from planner.search.spec import SearchSpec
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations
from planner.specs.plan import a2a_cp_violation
from planner.validation.pattern import step_pattern

LLAMA8B = ModelSpec.from_preset("llama3-8b")       # 32 query heads, 8 K,V heads of 128
LLAMA70B = ModelSpec.from_preset("llama3-70b")     # 64 query heads, 8 K,V heads
NODE = ClusterSpec.from_preset("dgx-h100")
EFF = EfficiencyModel()


def _training(ring: str = "a2a", **kw) -> TrainingSpec:
    return TrainingSpec(global_batch_size=8, seq_length=32768, ring_attention=ring, **kw)


def test_the_exchanged_tensors_and_their_copies_are_worked_by_hand():
    # cp 4 at 32,768 tokens: 8,192 local tokens. Q and O: 8,192 x 4,096; K and V each
    # 8,192 x 1,024 (8 heads of 128).
    q, kv, o = a2a_tensor_elems(LLAMA8B, 8192, 1)
    assert (q, kv, o) == (33_554_432, 8_388_608, 33_554_432)
    # Two copies around each of the four tensors, read and written in bf16:
    # 2 x 2 x 2 bytes x (33.5M + 2 x 8.4M + 33.5M) = 671,088,640 bytes a pass.
    assert a2a_copy_bytes(LLAMA8B, 8192, 1, 2) == 671_088_640
    # Tensor parallelism splits the heads, so the tensors too.
    assert a2a_tensor_elems(LLAMA8B, 8192, 4) == (q / 4, kv / 4, o / 4)


def test_four_exposed_all_to_alls_a_pass_and_the_recompute_repeats_them():
    tables = cost_tables(LLAMA8B, NODE, _training(), EFF)
    uses = tables.cp_uses(1, 4, 1, 2, 0, 8)          # full recompute: 2 forward passes
    assert [(u.cost.op, u.cost.message_bytes, u.calls) for u in uses] == [
        ("all_to_all", 67_108_864, 3), ("all_to_all", 16_777_216, 6),
        ("all_to_all", 67_108_864, 3)]
    per_pass = sum(u.cost.time_s * u.calls for u in uses) / 3
    cost = tables.layer(1, 4, 1, 2, 0, 8)
    # Nothing hides them: the forward pays one pass, the backward its own and the recompute's.
    assert (cost.cp_fwd, cost.cp_bwd) == pytest.approx((per_pass, 2 * per_pass))
    # Inside one node no network is used.
    assert cost.cp_network_fwd == cost.cp_network_bwd == 0.0
    # The copies are memory-bound work of every pass, on top of the ring-free layer.
    te = cost_tables(LLAMA8B, NODE, _training("te"), EFF).layer(1, 4, 1, 2, 0, 8)
    km = kernel_model(NODE.gpu, _training(), EFF)
    copies = km.memory(671_088_640, kernels=8)
    attn = cost.work.attn_core_fwd_s - te.work.attn_core_fwd_s
    assert cost.work.fwd_s - te.work.fwd_s == pytest.approx(copies + attn)


def test_the_attention_runs_once_over_the_whole_sequence_on_a_share_of_the_heads():
    km = kernel_model(NODE.gpu, _training(), EFF)
    # Executed causal FLOPs of a rank: 2 x 32 heads x 8,192 queries x 16,384 keys (the
    # causal half of 32,768) x (128 + 128) = 2.199e12, the ring's too.
    flops = 2 * 32 * 8192 * 16384 * 256
    a2a = cost_tables(LLAMA8B, NODE, _training(), EFF).layer(1, 4, 1, 0, 0, 8).work
    assert a2a.attn_core_fwd_s == pytest.approx(
        km.attention(flops, 32768, kernels=1, batch_heads=32 / 4))
    # Transformer Engine's ring: four calls over 8,192-key chunks, slower per FLOP.
    te = cost_tables(LLAMA8B, NODE, _training("te"), EFF).layer(1, 4, 1, 0, 0, 8).work
    assert te.attn_core_fwd_s == pytest.approx(
        km.attention(flops, 8192, kernels=4, batch_heads=32))
    assert km.attention(flops, 32768, kernels=1, batch_heads=8) < te.attn_core_fwd_s


def test_the_heads_of_a_tensor_parallel_rank_must_split_over_the_cp_ranks():
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    plan = ParallelPlan(dp=1, tp=8, cp=2, micro_batch_size=1, zero_stage=1)
    # 8 K,V heads over tp 8 leave one a rank: no all-to-all over 2 CP ranks.
    problems = plan_violations(plan, LLAMA70B, cluster, _training())
    assert ("plan.cp", "all-to-all context parallelism (ring_attention 'a2a') splits each "
            "tensor-parallel rank's heads over the cp ranks: K,V heads(8) / tp(8) = 1 is not "
            "divisible by cp(2)") in problems
    # tp 4 leaves 2 K,V heads and 16 query heads a rank: it splits.
    assert a2a_cp_violation(LLAMA70B, _training(), 4, 2) is None
    assert a2a_cp_violation(LLAMA70B, _training(), 4, 4) is not None
    # The query heads are checked too: 32 / 8 / 8 would leave half a head.
    assert "num_attention_heads(32) / tp(2)" in a2a_cp_violation(LLAMA8B, _training(), 2, 32)
    # Transformer Engine's ring has no such rule; the all-to-all needs fused attention.
    assert not plan_violations(plan, LLAMA70B, cluster, _training("te"))
    assert "fused attention" in a2a_cp_violation(LLAMA8B, _training(flash_attention=False), 1,
                                                 2)


def test_the_search_holds_no_plan_the_heads_forbid():
    cluster = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
    search = SearchSpec(cp={"max": 8}, pp=1, vpp=1, micro_batch_size=1, recompute="full",
                        zero_stage=1)
    training = TrainingSpec(global_batch_size=16, seq_length=32768, ring_attention="a2a")
    pairs = {(int(t), int(c)) for t, c in zip(build_space(LLAMA70B, cluster, training,
                                                          search).plans.tp,
                                              build_space(LLAMA70B, cluster, training,
                                                          search).plans.cp, strict=True)}
    ring = build_space(LLAMA70B, cluster, training.model_copy(update={"ring_attention": "te"}),
                       search).plans
    ring_pairs = {(int(t), int(c)) for t, c in zip(ring.tp, ring.cp, strict=True)}
    # Every (tp, cp) the ring allows and the heads split over stays; the rest are gone.
    assert pairs == {(t, c) for t, c in ring_pairs
                     if a2a_cp_violation(LLAMA70B, training, t, c) is None}
    assert (8, 2) in ring_pairs and (8, 2) not in pairs and (4, 2) in pairs


def test_megatron_runs_it_with_cp_comm_type_a2a_and_nothing_else_does():
    plan = ParallelPlan(dp=2, cp=4, micro_batch_size=1, zero_stage=1, recompute="full")
    est = estimate(LLAMA8B, NODE, _training(), plan)
    assert "megatron" in est.frameworks
    assert "torchtitan" not in est.frameworks and "deepspeed" not in est.frameworks
    args, _ = megatron_args(LaunchContext(est, LLAMA8B, NODE, _training()))
    i = args.index("--cp-comm-type")
    assert args[i + 1] == "a2a" and args[args.index("--context-parallel-size") + 1] == "4"
    # Transformer Engine's ring keeps p2p.
    ring = estimate(LLAMA8B, NODE, _training("te"), plan)
    args, _ = megatron_args(LaunchContext(ring, LLAMA8B, NODE, _training("te")))
    assert args[args.index("--cp-comm-type") + 1] == "p2p"


def test_the_probe_replays_the_all_to_alls_and_the_whole_sequence_attention():
    training = _training()
    est = estimate(LLAMA8B, NODE, training, ParallelPlan(dp=2, cp=4, micro_batch_size=1,
                                                          zero_stage=1, recompute="full"))
    pat = step_pattern(est, CostTables(LLAMA8B, NODE, training, EFF))
    per_pass = [["all_to_all", 67_108_864, 1], ["all_to_all", 16_777_216, 2],
                ["all_to_all", 67_108_864, 1]]
    # Forward one pass; backward its own and the recomputed forward's.
    assert pat["cp_fwd"] == per_pass and pat["cp_bwd"] == per_pass * 2
    # The attention core: 8 of the 32 heads over all 32,768 queries and keys.
    assert pat["attn_bmm"][0] == [8, 32768, 32768, 128]


@pytest.mark.parametrize("seed", range(12))
def test_the_solver_equals_exhaustive_enumeration_under_the_all_to_all(seed):
    """Random small spaces (as ``tests/test_search.py`` draws them) under ring_attention 'a2a':
    the search's answer is exhaustive enumeration's, whose plans pass ``plan_violations`` and
    so the head rule."""
    import random

    from planner.search import PlanRequest, plan
    from tests.search_oracle import assert_equals_oracle, enumerate_top_k
    from tests.test_search import random_request

    req = random_request(random.Random(seed))
    body = req.model_dump(mode="json")
    body["training"].update(ring_attention="a2a", flash_attention=True)
    a2a = PlanRequest.model_validate(body)
    got = plan(a2a)
    assert_equals_oracle(got, enumerate_top_k(a2a))
    for p in got.plans:
        assert a2a_cp_violation(a2a.model, a2a.training, p.tp, p.cp) is None


def test_a_space_the_head_rule_empties_says_so_not_that_no_degrees_land():
    """Llama 3 70B with tp and cp held at 8: the one (tp, cp) pair lands on 64 GPUs, but the
    all-to-all cannot split 8 K,V heads / tp 8 over 8 CP ranks. The answer names the head rule
    and the ring; under the ring the same request has plans."""
    from planner.search import PlanRequest, answer

    def request(ring):
        return PlanRequest.model_validate({
            "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
            "training": {"global_batch_size": 8, "seq_length": 65536, "ring_attention": ring},
            "search": {"framework": "megatron", "cp": 8, "tp": 8}})
    none = answer(request("a2a"))
    assert not none.plans
    (reason,) = none.infeasible_reasons
    assert "K,V heads(8) / tp(8) = 1 is not divisible by cp(8)" in reason
    assert "ring_attention 'te'" in reason and "lands on" not in reason
    assert "the hierarchy ('a2a+p2p')" in reason
    assert answer(request("te")).plans
