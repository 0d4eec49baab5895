"""Where ranks run (checked against a brute-force placement of every rank), what it costs, and
how layers are laid out over pipeline stages and their chunks."""

import itertools

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.tables import CostTables
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations
from planner.specs.layout import default_layout, explicit_layout, megatron_layout_string
from planner.specs.placement import brute_force_spans, launch_layout, plan_spans


@pytest.mark.parametrize("gpn", [1, 2, 3, 4, 6, 8])
def test_group_spans_match_a_brute_force_placement_of_every_rank(gpn):
    for tp, cp, dp, pp in itertools.product([1, 2, 3, 4], [1, 2], [1, 2, 3], [1, 2, 3, 4]):
        assert plan_spans(tp, cp, dp, pp, gpn) == brute_force_spans(tp, cp, dp, pp, gpn), (
            tp, cp, dp, pp, gpn)


def test_launch_layout_keeps_equal_processes_per_node():
    assert launch_layout(32, 8) == launch_layout(32, 8)
    lay = launch_layout(12, 8)            # 12 ranks on 8-GPU nodes: 2 nodes of 6
    assert (lay.nnodes, lay.nproc_per_node) == (2, 6)
    assert (launch_layout(14, 8).nnodes, launch_layout(14, 8).nproc_per_node) == (2, 7)
    assert launch_layout(13, 8).nproc_per_node == 1     # a prime: one per node


def test_tp_that_does_not_divide_the_node_is_costed_across_nodes():
    # 2 nodes of 6 GPUs, tp=4: ranks 4-7 span both nodes, so TP is an inter-node group.
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2, gpus_per_node=6)
    tr = TrainingSpec(global_batch_size=24, seq_length=4096)
    plan = ParallelPlan(dp=3, tp=4, micro_batch_size=1)
    spans = plan_spans(4, 1, 3, 1, 6)
    assert spans["TP"].nodes == 2 and spans["TP"].min_per_node == 2
    est = estimate(m, c, tr, plan)
    assert {x.tier for x in est.communication if x.strategy == "TP"} == {"inter_node"}
    # ... and refused when the request does not allow TP across nodes.
    reasons = plan_violations(plan, m, c, tr, allow_cross_node_tp=False)
    assert any(f == "plan.tp" and "cross nodes" in r for f, r in reasons)
    # tp=2 divides the 6 GPUs of a node: inside a node, allowed.
    assert not plan_violations(ParallelPlan(dp=6, tp=2), m, c, tr, allow_cross_node_tp=False)


def test_data_parallel_groups_that_megatron_places_across_nodes_are_costed_so():
    # 96 GPUs, dp3 tp2 pp16: DP group of stage 1 is ranks 6, 8, 10: nodes 0, 1, 1.
    spans = plan_spans(2, 1, 3, 16, 8)
    assert spans["DP"].nodes == 2
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=12)
    tr = TrainingSpec(global_batch_size=96, seq_length=4096)
    est = estimate(m, c, tr, ParallelPlan(dp=3, tp=2, pp=16, micro_batch_size=1,
                                          zero_stage=1, sequence_parallel=True))
    assert {x.tier for x in est.communication if x.strategy == "DP"} == {"inter_node"}


def test_group_topology_uses_the_worst_group_and_its_fewest_members_per_node():
    m = ModelSpec.from_preset("llama3-8b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2, gpus_per_node=6)
    tables = CostTables(m, c, TrainingSpec(global_batch_size=12, seq_length=1024),
                        EfficiencyModel())
    g = tables.group(4, 1, 6)        # tp=4 on nodes of 6: the group {4, 5, 6, 7}
    assert (g.size, g.nodes, g.ranks_per_node, g.tier) == (4, 2, 2, "inter_node")


def test_layouts_of_real_runs():
    # Llama 3 405B (126 layers) on 16 stages: the embedding and the loss take a layer's place.
    lay = default_layout(126, 16, 1)
    assert lay.kind == "embedding_loss" and lay.stages == (7,) + (8,) * 14 + (7,)
    lay = default_layout(126, 16, 8)
    assert lay.kind == "embedding_loss" and lay.chunks[0] == (0,) + (1,) * 7
    assert lay.chunks[-1] == (1,) * 7 + (0,)
    lay = default_layout(126, 8, 8)    # 405B on tp8/pp8/cp2/vpp8 (NeMo's 512/1024-GPU runs)
    assert lay.kind == "embedding_loss" and sum(lay.stages) == 126
    assert default_layout(80, 4, 20).kind == "even"
    assert default_layout(80, 3, 1).stages == (27, 27, 26)
    # Layers that pp * vpp does not divide: a custom layout, Megatron's layout string.
    lay = default_layout(80, 3, 2)
    assert lay.kind == "custom" and sum(lay.stages) == 80
    text = megatron_layout_string(lay)
    assert text.startswith("E") and text.endswith("L") and text.count("|") == 5
    assert text.count("t") == 80
    assert default_layout(10, 4, 4) is None       # 16 chunks from 10 layers (+2): too few
    assert explicit_layout((8, 4)).kind == "first_last"


def test_production_405b_setups_are_accepted_and_costed_as_interleaved():
    m = ModelSpec.from_preset("llama3-405b")
    tr = TrainingSpec(global_batch_size=2048, seq_length=8192)
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=2048)
    one = estimate(m, c, tr, ParallelPlan(dp=128, tp=8, pp=16, vpp=1, zero_stage=1,
                                          sequence_parallel=True))
    eight = estimate(m, c, tr, ParallelPlan(dp=128, tp=8, pp=16, vpp=8, zero_stage=1,
                                            sequence_parallel=True))
    # m = 16 micro-batches on 16 stages: interleaving by 8 cuts the bubble eight-fold.
    assert eight.breakdown["pipeline_bubble"] == pytest.approx(
        one.breakdown["pipeline_bubble"] / 8, rel=0.05)
    assert eight.step_time_s < 0.8 * one.step_time_s
    c512 = ClusterSpec.from_preset("dgx-h100", num_nodes=64)
    est = estimate(m, c512, TrainingSpec(global_batch_size=64, seq_length=8192),
                   ParallelPlan(dp=4, tp=8, pp=8, cp=2, vpp=8, zero_stage=1,
                                sequence_parallel=True, recompute="full"))
    assert est.pipeline_layout == "embedding_loss" and est.frameworks == ["megatron"]


def test_fewer_micro_batches_than_stages_are_costed_with_their_bubble():
    # SC'21 Fig. 14 and BLOOM's sweeps ran m < pp: the pipeline never fills, so the bubble
    # is (p - 1) stage-times, more than the m stage-times of work.
    m = ModelSpec.from_preset("llama3-70b")
    c = ClusterSpec.from_preset("dgx-h100", num_nodes=8)
    few = estimate(m, c, TrainingSpec(global_batch_size=4, seq_length=4096),
                   ParallelPlan(dp=1, tp=8, pp=8, micro_batch_size=1))
    assert few.grad_accum_steps == 4 and few.pp == 8
    assert few.breakdown["pipeline_bubble"] > few.breakdown["compute"]
    many = estimate(m, c, TrainingSpec(global_batch_size=64, seq_length=4096),
                    ParallelPlan(dp=1, tp=8, pp=8, micro_batch_size=1))
    # 16 times the work in 64 micro-batches: the bubble stays (p - 1) stage-times.
    assert many.breakdown["pipeline_bubble"] == pytest.approx(
        few.breakdown["pipeline_bubble"], rel=0.02)
