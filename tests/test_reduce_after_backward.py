"""``training.grad_reduce_after_last_backward``: torch.distributed.pipelining runs FSDP's
post-backward (its reduce-scatters) after a stage's last backward, not beside it, so a
pipelined ZeRO-1 plan without interleaving exposes its whole once-a-step reduction; Megatron-LM
launches each bucket as its gradients are ready."""

import pytest

from planner.cost.batch import bucket_tail
from planner.cost.step import estimate
from planner.frameworks import reasons_by_framework
from planner.search import PlanRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

MODEL = ModelSpec.from_preset("llama3-8b")
CLUSTER = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
# torchtitan's way of running the golden ``fsdp-pipeline`` plan (tests/data/launch/plans.json)
TITAN = TrainingSpec(global_batch_size=64, seq_length=4096, precision="bf16",
                     zero3_per_parameter=True, recompute_early_stop=True,
                     async_tensor_model_parallel_allreduce=False, microbatch_grad_upcast=True)
AFTER = TITAN.model_copy(update={"grad_reduce_after_last_backward": True})


def piped(zero: int = 1, vpp: int = 1, pp: int = 2, dp: int = 4) -> ParallelPlan:
    return ParallelPlan(dp=dp, tp=2, pp=pp, vpp=vpp, micro_batch_size=1, recompute="full",
                        zero_stage=zero, sequence_parallel=True)


def reduce_scatter(est):
    (rs,) = [c for c in est.communication if c.strategy == "DP" and c.op == "reduce_scatter"]
    return rs


def test_the_whole_reduction_is_exposed_without_interleaving():
    """dp 4 tp 2 pp 2, ZeRO-1, 16 micro-batches: each stage reduce-scatters its gradients in
    max(4e7, 1e6 x 4) = 4e7-parameter buckets. Beside the last backward, only the tail of
    that queue is exposed (``bucket_tail``); after it, every call is: the step grows by
    exactly the difference, nothing else moves."""
    beside, after = (estimate(MODEL, CLUSTER, t, piped()) for t in (TITAN, AFTER))
    rs = reduce_scatter(after)
    same = ("message_bytes", "count_per_step", "group_size", "time_s", "total_time_s")
    assert [getattr(reduce_scatter(beside), k) for k in same] == [getattr(rs, k) for k in same]
    assert rs.count_per_step == 51 and rs.total_time_s == pytest.approx(51 * rs.time_s)
    assert after.breakdown["dp_comm"] == pytest.approx(rs.total_time_s, rel=1e-12)
    assert rs.exposed_time_s == pytest.approx(rs.total_time_s, rel=1e-12)
    # Beside the backward: at least the last bucket, well under the whole queue.
    assert rs.time_s <= beside.breakdown["dp_comm"] < 0.5 * rs.total_time_s
    assert after.step_time_s - beside.step_time_s == pytest.approx(
        after.breakdown["dp_comm"] - beside.breakdown["dp_comm"], rel=1e-9)
    for key in ("compute", "tp_comm", "pp_comm", "pipeline_bubble", "zero_comm"):
        assert after.breakdown[key] == beside.breakdown[key]


def test_one_part_after_the_backward_is_the_closed_form_with_one_bucket():
    """The rule is ``bucket_tail`` with the reduction as one part ready when the window
    ends: exposed whole, and no compute to slow."""
    assert bucket_tail(0.2, 1, 5.0, 0.15) == pytest.approx(0.2)
    assert bucket_tail(0.2 / 50, 50, 5.0, 0.15) < 0.2


@pytest.mark.parametrize("plan", [piped(vpp=2), piped(zero=0), piped(pp=1, dp=8)],
                         ids=["interleaved", "ddp", "no-pipeline"])
def test_it_changes_nothing_where_the_reduction_already_runs_so(plan):
    """Interleaved, each chunk's reduction is costed from its release after its last
    backward either way; DDP (ZeRO-0) under a pipeline reduces beside the last backward
    (stage.py prepares DDP's reducer for it); without a pipeline there is no stage."""
    beside, after = (estimate(MODEL, CLUSTER, t, plan) for t in (TITAN, AFTER))
    assert after.step_time_s == beside.step_time_s
    assert after.breakdown == beside.breakdown


def test_frameworks_run_it_as_they_reduce():
    """torchtitan runs the pipelined ZeRO-1 plan only costed after the backward, Megatron-LM
    only costed beside it; DeepSpeed's pipeline engine reduces at the end of its schedule
    (ReduceGrads), so the flag lifts its overlap refusal there. Interleaved plans cost the
    same either way and Megatron-LM runs them with the flag too."""
    def reasons(plan, training):
        return reasons_by_framework(plan, 16, True, training)

    def about(rs):
        return [r for r in rs if "reduction" in r]

    assert estimate(MODEL, CLUSTER, AFTER, piped()).frameworks == ["torchtitan"]
    assert estimate(MODEL, CLUSTER, TITAN, piped()).frameworks == []
    assert any("grad_reduce_after_last_backward false" in r
               for r in about(reasons(piped(), TITAN)["torchtitan"]))
    assert not about(reasons(piped(), AFTER)["torchtitan"])
    assert any("after each stage's last backward" in r
               for r in about(reasons(piped(), AFTER)["megatron"]))
    assert not about(reasons(piped(), TITAN)["megatron"])
    assert not about(reasons(piped(vpp=2), AFTER)["megatron"])
    deepspeed_beside = about(reasons(piped(), TITAN)["deepspeed"])
    assert any("DeepSpeed reduces after the backward" in r for r in deepspeed_beside)
    assert not about(reasons(piped(), AFTER)["deepspeed"])
    # Without ZeRO its pipeline still reduces after the backward, which the flag (ZeRO 1-3)
    # does not cost: refused either way.
    assert about(reasons(piped(zero=0), AFTER)["deepspeed"])


@pytest.mark.parametrize("framework,implied", [("torchtitan", True), ("deepspeed", True),
                                               ("megatron", False), ("any", False)])
def test_a_framework_search_costs_how_it_reduces(framework, implied):
    body = {"model": {"preset": "llama3-8b"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"seq_length": 4096, "global_batch_size": 64, "precision": "bf16"},
            "search": {"framework": framework}}
    req = PlanRequest.model_validate(body)
    assert req.training.grad_reduce_after_last_backward is implied
    # A request that says otherwise keeps its own.
    body["training"]["grad_reduce_after_last_backward"] = not implied
    assert (PlanRequest.model_validate(body).training.grad_reduce_after_last_backward
            is (not implied))


def test_expert_data_parallel_reductions_count_too():
    """Mixtral 8x7B as dp 1 tp 8 pp 2 ep 2: no dense replica, but the experts' gradients
    reduce-scatter over the expert data-parallel group of 8 / 2 = 4 ranks; after the last
    backward that whole reduction is exposed, and Megatron-LM, which overlaps it, is refused
    for plans costed so."""
    model = ModelSpec.from_preset("mixtral-8x7b")
    train = TrainingSpec(global_batch_size=64, seq_length=4096, precision="bf16")
    plan = ParallelPlan(dp=1, tp=8, pp=2, ep=2, micro_batch_size=1, recompute="full",
                        zero_stage=1, sequence_parallel=True)
    beside, after = (estimate(model, CLUSTER, t, plan) for t in (
        train, train.model_copy(update={"grad_reduce_after_last_backward": True})))
    (rs,) = [c for c in after.communication if c.strategy == "DP"]
    assert (rs.op, rs.group_size) == ("reduce_scatter", 4)
    assert after.breakdown["dp_comm"] == pytest.approx(rs.total_time_s, rel=1e-12)
    assert beside.breakdown["dp_comm"] < after.breakdown["dp_comm"]
    assert "megatron" in beside.frameworks and "megatron" not in after.frameworks


@pytest.mark.parametrize("m", [1, 16])
def test_torchtitans_pipelined_fsdp_is_zero1_at_any_micro_batch_count(m):
    """Under a pipeline torchtitan's FSDP reduce-scatters after the stage's last backward,
    whatever the micro-batch count: a ZeRO-2/3 plan (its reduce-scatter costed layer by layer
    beside the backward) is refused even with one micro-batch; the ZeRO-1 plan costed after
    the backward runs."""
    def titan(plan):
        return reasons_by_framework(plan, m, True, AFTER)["torchtitan"]

    for zero in (2, 3):
        assert any("ZeRO-2/3 with a pipeline" in r for r in titan(piped(zero=zero)))
    assert not titan(piped(zero=1))


def test_deepspeeds_pipeline_config_reduces_after_the_schedule():
    """A pipelined ZeRO-1 plan costed after the last backward runs on DeepSpeed (Llama 3 8B
    as dp 8 pp 2, bf16 gradients, the weights gathered after the step as DeepSpeed does), and
    the config it gets turns overlap_comm off, the path on which the pipeline engine's
    ReduceGrads reduces every gradient, in the buckets the plan is costed with; the same plan
    without a pipeline keeps it on."""
    from planner.launch.context import LaunchContext
    from planner.launch.deepspeed import deepspeed_config

    train = TrainingSpec(global_batch_size=64, seq_length=4096, precision="bf16",
                         grad_dtype="bf16", overlap_param_gather=False,
                         grad_reduce_after_last_backward=True, zero_grad_allreduce=True)
    for pp, overlap in ((2, False), (1, True)):
        plan = ParallelPlan(dp=16 // pp, pp=pp, micro_batch_size=1, recompute="full",
                            zero_stage=1)
        est = estimate(MODEL, CLUSTER, train, plan)
        assert "deepspeed" in est.frameworks
        cfg, _ = deepspeed_config(LaunchContext(est, MODEL, CLUSTER, train))
        assert cfg["zero_optimization"]["overlap_comm"] is overlap
        # Megatron's max(4e7, 1e6 x dp) parameters a bucket, each costed call one bucket's
        # bf16 gradients at most.
        (rs,) = [c for c in est.communication if c.strategy == "DP"]
        assert cfg["zero_optimization"]["reduce_bucket_size"] == 40_000_000
        assert 0.5 * 2 * 40_000_000 < rs.message_bytes <= 2 * 40_000_000
