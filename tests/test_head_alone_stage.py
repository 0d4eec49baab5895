"""A last pipeline stage that holds the LM head and the loss alone (no transformer layer):
Megatron-LM's ``--pipeline-model-parallel-layout`` '...|L' (its
``--decoder-last-pipeline-num-layers`` must be positive), torchtitan's module split, nanotron's
cost-balanced split. Explicit plans may give it, the search's uneven-stage pass costs it, and
the launch files state it."""

import sys
from pathlib import Path

import pytest

from planner.cost import estimate
from planner.launch import with_launch
from planner.launch.context import LaunchContext
from planner.launch.torchtitan import module_fqns
from planner.search import plan
from planner.search.plan_request import PlanRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec, plan_violations
from planner.specs.layout import explicit_layout, head_alone_splits, search_splits

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import playbook_table  # noqa: E402
from launch_readers import megatron_plan  # noqa: E402
from test_search import uneven_request  # noqa: E402

# nanotron's 1B benchmark model (scripts/scaling_benchmarks.py): its LM head, 131072 x 2048,
# costs four of its layers (4 x 2048^2 + 3 x 8192 x 2048 each), its embeddings tied.
NANOTRON_1B = ModelSpec.model_validate(playbook_table.model_fields("1B"))
NODE = ClusterSpec.from_preset("dgx-h100", num_nodes=1)
BATCH = TrainingSpec(global_batch_size=256, seq_length=4096)


def test_the_head_alone_splits_worked_by_hand():
    """The first rank takes what the equal middle ranks leave, the last none."""
    assert head_alone_splits(16, 2) == ((16, 0),)
    assert head_alone_splits(16, 4) == tuple((16 - 2 * mid, mid, mid, 0) for mid in range(1, 8))
    assert head_alone_splits(7, 4) == ((5, 1, 1, 0), (3, 2, 2, 0), (1, 3, 3, 0))
    assert head_alone_splits(16, 1) == ()
    # The search costs them beside the first/last splits, never with virtual stages.
    assert set(head_alone_splits(16, 4)) <= set(search_splits(16, 4, 1))
    assert all(s[-1] > 0 for s in search_splits(16, 4, 2))


@pytest.mark.parametrize("stages,vpp,ok", [
    ((6, 5, 5, 0), 1, True),            # the head and the loss alone on the last stage
    ((6, 5, 0, 5), 1, False),           # a middle stage without a layer
    ((0, 6, 5, 5), 1, False),           # nor the first
    ((8, 4, 4, 0), 2, False),           # nor with virtual stages
    ((6, 5, 5, 1), 1, False),           # 17 layers
    ((6, 5, 6, -1), 1, False),          # a negative count that sums to 16
])
def test_only_the_last_stage_may_hold_no_layer(stages, vpp, ok):
    p = ParallelPlan(dp=2, tp=1, pp=4, vpp=vpp, layers_per_stage=stages)
    reasons = [r for f, r in plan_violations(p, NANOTRON_1B, NODE, BATCH)
               if f == "plan.layers_per_stage"]
    assert (reasons == []) == ok, reasons
    if not ok and sum(stages) == 16 and min(stages) == 0:
        assert "only the last stage" in reasons[0]
    if min(stages) < 0:
        assert "negative number of layers" in reasons[0]


def test_the_head_alone_stage_is_costed_and_launched():
    """nanotron's split of the 1B model on 4 stages, 6, 5, 5 and the head alone: the slowest
    stage holds 6 layers where the even split's last holds 4 and the head (8 layers' worth),
    so it runs faster than the even split and than any first/last split with a layer on the
    last stage but [5, 5, 5, 1]'s near tie; Megatron-LM runs it by its layout string,
    torchtitan by its module split."""
    def run(stages):
        return estimate(NANOTRON_1B, NODE, BATCH, ParallelPlan(
            dp=2, tp=1, pp=4, micro_batch_size=1, layers_per_stage=stages))

    alone, even, near = run((6, 5, 5, 0)), run((4, 4, 4, 4)), run((5, 5, 5, 1))
    assert alone.pipeline_layout == "custom" and alone.fits_in_memory
    assert alone.step_time_s < 0.7 * even.step_time_s
    assert alone.step_time_s == pytest.approx(near.step_time_s, rel=0.01)
    est = with_launch(alone, NANOTRON_1B, NODE, BATCH)
    assert "megatron" in est.frameworks
    args = est.launch.megatron_args
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert layout == "E" + "t" * 6 + "|" + "t" * 5 + "|" + "t" * 5 + "|L"
    assert "--decoder-last-pipeline-num-layers" not in args
    assert megatron_plan(args, 8)["layers_per_chunk"] == [[6], [5], [5], [0]]
    ctx = LaunchContext(plan=alone, model=NANOTRON_1B, cluster=NODE, training=BATCH,
                        job_name="t")
    assert module_fqns(ctx)[-1] == ["norm", "output"]
    assert explicit_layout((6, 5, 5, 0)).kind == "custom"
    assert explicit_layout((6, 5, 5, 1)).kind == "first_last"


def test_the_search_finds_the_head_alone_split():
    """Searching the 1B model's 4-stage plans, the split that leaves the head alone wins: the
    best first/last split keeps a layer beside the head (README, 'A new stack')."""
    req = PlanRequest.model_validate({
        "model": NANOTRON_1B.model_dump(mode="json"),
        "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "training": {"global_batch_size": 256, "seq_length": 4096},
        "search": {"pp": 4, "tp": 1, "micro_batch_size": 1, "top_k": 3}})
    plans = plan(req).plans
    best = plans[0]
    assert best.layers_per_stage[-1] == 0 and best.pipeline_layout == "custom"
    off = plan(req.model_copy(update={"search": req.search.model_copy(
        update={"rebalance_stages": False})})).plans[0]
    assert best.step_time_s < off.step_time_s
    # The README's figures: 4, 6, 6 and the head alone; the best split with a layer on the
    # last stage; the even split the search takes without uneven stages.
    kept = next(p for p in plans if p.layers_per_stage[-1] > 0)
    assert (best.layers_per_stage, round(best.step_time_s, 2)) == ([4, 6, 6, 0], 3.47)
    assert (kept.layers_per_stage, round(kept.step_time_s, 2)) == ([5, 5, 5, 1], 3.52)
    assert (off.layers_per_stage, round(off.step_time_s, 2)) == ([4, 4, 4, 4], 5.14)


def test_the_exact_comparison_covers_head_alone_winners():
    """``test_search``'s uneven-stage requests, which the search matches against brute force
    over every plan and every split the search costs (``search_oracle``), the head-alone ones
    included: in several of them a head-alone split ranks among the best."""
    hits = sum(any(p.layers_per_stage and p.layers_per_stage[-1] == 0
                   for p in plan(uneven_request(seed)).plans) for seed in range(60))
    assert hits >= 5
