"""Full recompute that distributes each checkpointed layer's input over the tensor-parallel
ranks (``training.distribute_saved_activations``: Megatron-LM's --distribute-saved-activations,
DeepSpeed's partition_activations, metaseq's --distribute-checkpointed-activations): what it
keeps, what it moves, where it applies, what the frameworks and launches make of it."""

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import distributes_saved_input, kernel_model
from planner.cost.tables import CostTables, cost_tables
from planner.frameworks import reasons_by_framework
from planner.launch.context import LaunchContext
from planner.launch.deepspeed import deepspeed_config
from planner.launch.megatron import megatron_args
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.validation.pattern import step_pattern

GPT = ModelSpec.model_validate({"name": "gpt-4096", "num_layers": 8, "hidden_size": 4096,
                                "num_attention_heads": 32, "vocab_size": 51200})
NODE = ClusterSpec.from_preset("dgx-a100")
EFF = EfficiencyModel()
# A micro-batch of 2 sequences of 2,048 tokens: the layer input is 4,096 x 4,096 bf16 values.
INPUT_BYTES = 4096 * 4096 * 2


def _training(on: bool) -> TrainingSpec:
    return TrainingSpec(global_batch_size=16, seq_length=2048, distribute_saved_activations=on)


def _layer(on: bool, tp: int = 8, rec: int = 2, sp: int = 0):
    tables = cost_tables(GPT, NODE, _training(on), EFF)
    return tables, tables.layer(tp, 1, 2, rec, sp, 8)


def test_it_applies_only_with_tp_without_sp_under_full_recompute():
    on = _training(True)
    assert distributes_saved_input(on, ParallelPlan(tp=8, recompute="full"))
    assert not distributes_saved_input(_training(False), ParallelPlan(tp=8, recompute="full"))
    assert not distributes_saved_input(on, ParallelPlan(tp=1, recompute="full"))
    assert not distributes_saved_input(on, ParallelPlan(tp=8, recompute="selective"))
    assert not distributes_saved_input(on, ParallelPlan(tp=8, recompute="full",
                                                        sequence_parallel=True))


def test_each_rank_keeps_one_tp_share_of_the_layer_input():
    # 33,554,432 bytes whole; 4,194,304 on each of 8 ranks.
    _, off = _layer(False)
    _, on = _layer(True)
    assert off.work.stored_bytes == INPUT_BYTES == 33_554_432
    assert on.work.stored_bytes == INPUT_BYTES / 8 == 4_194_304
    # Sequence parallelism splits it already: the flag changes nothing there.
    assert _layer(True, sp=1)[1].work.stored_bytes == _layer(False, sp=1)[1].work.stored_bytes
    # Nor does it without recompute, or with one tensor-parallel rank.
    assert _layer(True, rec=0)[1].work == _layer(False, rec=0)[1].work
    assert _layer(True, tp=1)[1].work == _layer(False, tp=1)[1].work


def test_the_forward_copies_its_share_and_the_backward_gathers_the_input_back():
    tables, on = _layer(True)
    _, off = _layer(False)
    km = kernel_model(NODE.gpu, _training(True), EFF)
    # The forward reads and writes the rank's 4,194,304-byte share (one kernel); the recompute
    # does not split again.
    assert on.work.fwd_s - off.work.fwd_s == pytest.approx(km.memory(2 * INPUT_BYTES / 8))
    assert on.work.recompute_s == off.work.recompute_s
    # One all-gather of the whole input over the 8 TP ranks per recomputed layer and
    # micro-batch, on the critical path of the backward.
    (gather,) = tables.saved_input_gathers(8, 1, 2, 2, 0, 8)
    assert (gather.strategy, gather.cost.op, gather.cost.message_bytes, gather.calls,
            gather.cost.group_size) == ("TP", "all_gather", INPUT_BYTES, 1, 8)
    assert on.tp_bwd - off.tp_bwd == pytest.approx(gather.cost.time_s)
    assert on.tp_fwd == off.tp_fwd
    assert tables.saved_input_gathers(8, 1, 2, 2, 1, 8) == []


def test_an_estimate_holds_less_and_takes_the_gathers():
    plan = ParallelPlan(tp=8, micro_batch_size=2, recompute="full")
    off = estimate(GPT, NODE, _training(False), plan)
    on = estimate(GPT, NODE, _training(True), plan)
    # 8 layers' inputs of one micro-batch: 7/8 of 8 x 33.5 MB fewer bytes (the 10%
    # fragmentation allowance on activations is left out of the activation figure).
    assert (off.memory.activations_gib - on.memory.activations_gib) * 2**30 == pytest.approx(
        8 * INPUT_BYTES * 7 / 8)
    # 8 micro-batches x 8 layers of gathers, nothing hidden.
    tables = CostTables(GPT, NODE, _training(True), EFF)
    (gather,) = tables.saved_input_gathers(8, 1, 2, 2, 0, 8)
    assert on.breakdown["tp_comm"] - off.breakdown["tp_comm"] == pytest.approx(
        64 * gather.cost.time_s)
    # The probe replays the gather before each recompute.
    pattern = step_pattern(on, tables)
    assert pattern["tp_bwd"][0] == ["all_gather", INPUT_BYTES, 1]
    assert ["all_gather", INPUT_BYTES, 1] not in step_pattern(
        off, CostTables(GPT, NODE, _training(False), EFF))["tp_bwd"]


def test_megatron_and_deepspeed_get_the_flag_where_it_applies_torchtitan_refuses_it():
    for sp, applies in ((False, True), (True, False)):
        plan = ParallelPlan(tp=8, micro_batch_size=2, recompute="full", sequence_parallel=sp)
        est = estimate(GPT, NODE, _training(True), plan)
        ctx = LaunchContext(est, GPT, NODE, _training(True))
        args, _ = megatron_args(ctx)
        assert ("--distribute-saved-activations" in args) is applies
        cfg, notes = deepspeed_config(ctx)
        assert cfg["activation_checkpointing"]["partition_activations"] is applies
        assert any(n.startswith("partition_activations: pass an mpu") for n in notes) is applies
        # Every recompute plan is told to hand this config to configure, which applies the
        # activation_checkpointing section only so.
        assert any("configure(mpu, deepspeed_config=" in n for n in notes)
    # torchtitan has no such option (and splits the sequence whenever it splits tensors).
    est = estimate(GPT, NODE, _training(True), ParallelPlan(tp=8, micro_batch_size=2,
                                                             recompute="full"))
    assert "torchtitan" not in est.frameworks and "megatron" in est.frameworks
    reasons = reasons_by_framework(est, est.grad_accum_steps, True, _training(True))
    assert any("training.distribute_saved_activations" in r for r in reasons["torchtitan"])
    assert reasons["megatron"] == []


def test_a_search_without_sequence_parallelism_fits_larger_micro_batches_with_it():
    """GPT-3 175B on 64 A100 as dp8 tp8 with full recompute and no sequence parallelism
    (OPT-175B's shape of plan): the checkpointed inputs, kept whole, cap the micro-batch at
    4; distributed over the 8 TP ranks they let micro-batches of 16 fit, which the search then
    picks as faster, and the plan's launch carries the flag."""
    from planner.search import PlanRequest, plan

    def best(on: bool):
        req = PlanRequest.model_validate({
            "model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 8},
            "training": {"global_batch_size": 512, "seq_length": 2048,
                         "distribute_saved_activations": on},
            "search": {"sequence_parallel": False, "recompute": "full", "tp": 8, "pp": 1}})
        est = plan(req).plans[0]
        return est, megatron_args(LaunchContext(est, req.model, req.cluster, req.training))[0]

    (off, off_args), (on, on_args) = best(False), best(True)
    assert (off.micro_batch_size, on.micro_batch_size) == (4, 16)
    assert on.step_time_s < off.step_time_s and on.fits_in_memory
    assert "--distribute-saved-activations" in on_args
    assert "--distribute-saved-activations" not in off_args
