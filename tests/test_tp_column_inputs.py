"""``training.tp_column_parallel_inputs``: without sequence parallelism every column-parallel
linear that brings its input into the TP region on its own all-reduces that input's gradient
in the backward. Megatron-LM has two a layer (one QKV and one fc1 GEMM); Aleph Alpha's
trainer three (its SwiGLU's two input linears); DeepSpeed's AutoTP five on a Llama-family
layer (q, k, v, gate and up)."""

import pytest

from planner.cost.step import estimate
from planner.frameworks import capability_matrix, reasons_by_framework
from planner.search import PlanRequest
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

MODEL = ModelSpec.from_preset("llama3-8b")            # 32 layers, hidden 4096
CLUSTER = ClusterSpec.from_preset("dgx-a100", num_nodes=1)
PLAN = ParallelPlan(dp=2, tp=4, pp=1, micro_batch_size=1, recompute="none", zero_stage=1)


def training(inputs: int = 2, blocking: bool = True, **kw) -> TrainingSpec:
    return TrainingSpec(global_batch_size=32, seq_length=4096, precision="bf16",
                        async_tensor_model_parallel_allreduce=not blocking,
                        tp_column_parallel_inputs=inputs, **kw)


def tp_all_reduce(est):
    (ar,) = [c for c in est.communication if c.strategy == "TP"]
    assert ar.op == "all_reduce"
    return ar


def test_each_separate_input_adds_one_blocking_all_reduce_a_layer_and_micro_batch():
    """dp 2 tp 4, 16 micro-batches of one 4,096-token sequence: each all-reduce moves the
    layer's hidden state, 4096 x 4096 x 2 bytes = 33,554,432. Megatron's 2 forward + 2
    backward make 32 x 16 x 4 = 2,048 calls a step; a third column-parallel input makes
    32 x 16 x 5 = 2,560, and the blocking backward grows the step by exactly 512 calls'
    time; nothing else moves."""
    two, three = (estimate(MODEL, CLUSTER, training(n), PLAN) for n in (2, 3))
    ar2, ar3 = tp_all_reduce(two), tp_all_reduce(three)
    assert two.grad_accum_steps == 16
    assert ar2.message_bytes == ar3.message_bytes == 4096 * 4096 * 2
    assert (ar2.count_per_step, ar3.count_per_step) == (2048, 2560)
    assert ar3.time_s == ar2.time_s
    assert three.breakdown["tp_comm"] - two.breakdown["tp_comm"] == pytest.approx(
        512 * ar2.time_s, rel=1e-9)
    assert three.step_time_s - two.step_time_s == pytest.approx(512 * ar2.time_s, rel=1e-9)
    for key in ("compute", "dp_comm", "zero_comm", "optimizer"):
        assert three.breakdown[key] == two.breakdown[key]


def test_full_recompute_repeats_only_the_forward_ones():
    """Full recompute reruns the layer's 2 forward all-reduces, not the backward ones: with
    five inputs, 2 + 5 + 2 = 9 calls a layer and micro-batch (Megatron's 6 + 3)."""
    plan = PLAN.model_copy(update={"recompute": "full"})
    two, five = (tp_all_reduce(estimate(MODEL, CLUSTER, training(n), plan)) for n in (2, 5))
    assert (two.count_per_step, five.count_per_step) == (32 * 16 * 6, 32 * 16 * 9)


def test_overlapped_with_the_weight_gradients_where_the_framework_does():
    """With the input gradients' all-reduces beside the weight-gradient GEMMs (Megatron-Core's
    way), the extra one costs less than it does blocking, and still something."""
    blocking = [estimate(MODEL, CLUSTER, training(n), PLAN).step_time_s for n in (2, 3)]
    beside = [estimate(MODEL, CLUSTER, training(n, blocking=False), PLAN).step_time_s
              for n in (2, 3)]
    assert 0 < beside[1] - beside[0] < blocking[1] - blocking[0]


@pytest.mark.parametrize("plan", [
    PLAN.model_copy(update={"sequence_parallel": True}),
    ParallelPlan(dp=8, tp=1, pp=1, micro_batch_size=1, recompute="none", zero_stage=1)],
    ids=["sequence-parallel", "no-tp"])
def test_nothing_moves_with_sequence_parallelism_or_without_tp(plan):
    """Sequence parallelism gathers a block's input once and reduce-scatters its gradient
    once, however many linears read it; without TP there is nothing to reduce."""
    two, five = (estimate(MODEL, CLUSTER, training(n), plan) for n in (2, 5))
    assert five.step_time_s == two.step_time_s
    assert five.breakdown == two.breakdown


def test_megatron_runs_only_its_two():
    """Megatron-LM's layer has one QKV and one fc1 GEMM: it is refused for plans costed with
    another count, unless sequence parallelism makes the count moot."""
    def about(plan, n):
        reasons = reasons_by_framework(plan, 16, True, training(n, blocking=False))
        return [r for r in reasons["megatron"] if "tp_column_parallel_inputs" in r]

    assert estimate(MODEL, CLUSTER, training(2, blocking=False), PLAN).frameworks == ["megatron"]
    assert "megatron" not in estimate(MODEL, CLUSTER, training(3, blocking=False),
                                      PLAN).frameworks
    assert about(PLAN, 3) and about(PLAN, 5) and not about(PLAN, 2)
    assert not about(PLAN.model_copy(update={"sequence_parallel": True}), 3)
    assert not about(PLAN.model_copy(update={"tp": 1, "dp": 8}), 3)
    matrix = capability_matrix()["separate_column_parallel_inputs"]
    assert [matrix[f]["status"] for f in ("megatron", "torchtitan", "deepspeed")] == [
        "no", "no", "yes"]


@pytest.mark.parametrize("model,implied", [("llama3-8b", 5), ("llama3-70b", 5),
                                           ("gpt3-175b", 2), ("mixtral-8x7b", 2)])
def test_a_deepspeed_search_costs_autotps_linears(model, implied):
    """DeepSpeed's AutoTP wraps a Hugging Face Llama-family layer's q, k, v, gate and up
    projections one by one: a DeepSpeed search of a dense SwiGLU model costs five; a GeLU
    model (whose Hugging Face layouts differ) and a MoE model keep the default; so do the
    other frameworks, and a request that names its own count keeps it."""
    def body(framework, **training_fields):
        return {"model": {"preset": model},
                "cluster": {"preset": "dgx-h100", "num_nodes": 2},
                "training": {"seq_length": 4096, "global_batch_size": 64, "precision": "bf16",
                             **training_fields},
                "search": {"framework": framework}}

    counts = {fw: PlanRequest.model_validate(body(fw)).training.tp_column_parallel_inputs
              for fw in ("deepspeed", "megatron", "torchtitan", "any")}
    assert counts == {"deepspeed": implied, "megatron": 2, "torchtitan": 2, "any": 2}
    own = PlanRequest.model_validate(body("deepspeed", tp_column_parallel_inputs=3))
    assert own.training.tp_column_parallel_inputs == 3
    as_object = PlanRequest.model_validate({**body("deepspeed"), "training": TrainingSpec(
        seq_length=4096, global_batch_size=64, precision="bf16")})
    assert as_object.training.tp_column_parallel_inputs == implied


def test_a_model_that_does_not_validate_is_reported_by_the_request_not_the_implication():
    """The implication reads the model only when it validates; a bad model is the request's
    own validation error, naming the model."""
    with pytest.raises(ValueError, match="model"):
        PlanRequest.model_validate({
            "model": {"preset": "no-such-model"},
            "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"seq_length": 4096, "global_batch_size": 64, "precision": "bf16"},
            "search": {"framework": "deepspeed"}})


@pytest.mark.parametrize("bad", [0, 17, 2.5, "two"])
def test_out_of_range_counts_are_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="tp_column_parallel_inputs"):
        TrainingSpec(global_batch_size=32, seq_length=4096, tp_column_parallel_inputs=bad)


def test_deepspeed_runs_a_llama_layer_only_with_autotps_five():
    """A DeepSpeed plan with TP and without sequence parallelism runs as predicted only when
    costed with the linears AutoTP wraps: five for a dense SwiGLU layer (Llama 3 8B); a GeLU
    model, whose Hugging Face layouts differ, is not held to a count."""
    from planner.frameworks import autotp_column_inputs

    assert autotp_column_inputs(MODEL) == 5
    assert autotp_column_inputs(ModelSpec.from_preset("gpt3-175b")) == 0
    assert autotp_column_inputs(ModelSpec.from_preset("mixtral-8x7b")) == 0

    def about(model, n):
        reasons = reasons_by_framework(PLAN, 16, True, training(n, zero_grad_allreduce=True,
                                                                vocab_parallel_loss=False),
                                       autotp=autotp_column_inputs(model))
        return [r for r in reasons["deepspeed"] if "tp_column_parallel_inputs" in r]

    assert about(MODEL, 2) and about(MODEL, 3) and not about(MODEL, 5)
    gpt = ModelSpec.from_preset("gpt3-175b")
    assert not about(gpt, 2) and not about(gpt, 5)
    # As DeepSpeed's ZeRO-1 runs: bf16 gradients all-reduced, the weights gathered after
    # the step; then the count decides.
    deepspeed = {"zero_grad_allreduce": True, "vocab_parallel_loss": False, "grad_dtype": "bf16",
                 "overlap_param_gather": False}
    assert "deepspeed" in estimate(MODEL, CLUSTER, training(5, **deepspeed), PLAN).frameworks
    assert "deepspeed" not in estimate(MODEL, CLUSTER, training(2, **deepspeed),
                                       PLAN).frameworks


def test_the_probe_replays_every_input_gradients_all_reduce():
    """The validation probe replays the costed TP pattern: 2 all-reduces a layer forward and
    one per column-parallel input backward (3 for Aleph Alpha's trainer, Megatron's 2)."""
    from planner.cost import EfficiencyModel
    from planner.cost.tables import CostTables
    from planner.validation.pattern import step_pattern

    for inputs in (2, 3, 5):
        tr = training(inputs)
        est = estimate(MODEL, CLUSTER, tr, PLAN)
        pat = step_pattern(est, CostTables(MODEL, CLUSTER, tr, EfficiencyModel()))
        nbytes = 4096 * 4096 * 2
        assert pat["tp_fwd"] == [["all_reduce", nbytes, 2]]
        assert pat["tp_bwd"] == [["all_reduce", nbytes, inputs]]
