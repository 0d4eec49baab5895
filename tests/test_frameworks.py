"""Which frameworks run a plan, the search restricted to one framework, and MoE refused."""

import json

import pytest
from typer.testing import CliRunner

from planner.cli.main import app
from planner.cost import EfficiencyModel, estimate
from planner.errors import PlannerInputError
from planner.frameworks import reasons_by_framework
from planner.launch import with_launch
from planner.request import EstimateRequest, parse_request
from planner.search import PlanRequest, plan
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

M8 = ModelSpec.from_preset("llama3-8b")
C16 = ClusterSpec.from_preset("dgx-h100", num_nodes=2)
TR = TrainingSpec(global_batch_size=64, seq_length=4096)


FSDP2 = {"zero3_per_parameter": True}
# DeepSpeed's BF16_Optimizer, what it runs ZeRO-1 with under bf16 weights and fp32 gradients:
# every micro-batch's gradients added into fp32, all-reduced after the backward.
# ... and, as every ZeRO-1/2 step of DeepSpeed, the updated weights gathered at the end of
# the optimizer step, not beside the next forward.
BF16_OPTIMIZER = {"microbatch_grad_copy": True, "zero_grad_allreduce": True,
                  "overlap_grad_reduce": False, "overlap_param_gather": False}
# torchtitan's tensor parallelism (DTensor, always sequence parallel) keeps the gathered input
# and reduce-scatters its gradient before going on; under a pipeline its FSDP accumulates every
# micro-batch's gradients in fp32 (training.microbatch_grad_upcast, nothing without one).
DTENSOR_TP = {**FSDP2, "async_tensor_model_parallel_allreduce": False,
              "microbatch_grad_upcast": True}
# torchtitan's training.dtype "bfloat16": bf16 weights updated in place, bf16 gradients reduced
# in fp32, bf16 optimizer states.
PURE_BF16 = {**FSDP2, "master_weights": False, "grad_dtype": "bf16", "grad_reduce_dtype": "fp32",
             "optimizer_state_dtype": "bf16"}
# One micro-batch a step (16 sequences over dp 16).
ONE_MB = {"global_batch_size": 16}


@pytest.mark.parametrize("plan_fields,training,frameworks", [
    # Plain data parallelism: every framework, but DeepSpeed, whose bf16 optimizer copies
    # every micro-batch's gradients into fp32 (see the next test); torchtitan with one
    # micro-batch a step only: its replicate() all-reduces every micro-batch's gradients.
    (dict(dp=16, zero_stage=0), ONE_MB, ["megatron", "torchtitan"]),
    (dict(dp=16, zero_stage=0), {}, ["megatron"]),
    # torchtitan shards the weights over the CP ranks whenever cp > 1: no ZeRO-0 with CP.
    (dict(dp=8, cp=2, zero_stage=0), {**ONE_MB, "ring_attention": "torch_allgather"}, []),
    # Without anything FSDP-sharded, torchtitan runs TP or PP plans in fp32 (its autocast is
    # for DDP and one GPU only); with FSDP over two replicas' worth of ranks it runs them.
    (dict(dp=1, tp=8, pp=2, zero_stage=0, sequence_parallel=True), DTENSOR_TP, []),
    (dict(dp=2, tp=8, zero_stage=3, sequence_parallel=True), {**ONE_MB, **DTENSOR_TP},
     ["torchtitan"]),
    # ZeRO-1 is Megatron's distributed optimizer and DeepSpeed stage 1; FSDP has no ZeRO-1.
    (dict(dp=16, zero_stage=1), {}, ["megatron"]),
    # ZeRO-3 without model parallelism: Megatron-FSDP and DeepSpeed with flat buffers;
    # torchtitan's FSDP2 when costed with its per-parameter copies, and then only torchtitan
    # (its full recompute stops early or not, activation_checkpoint.early_stop).
    (dict(dp=16, zero_stage=3, recompute="full"), {}, ["megatron", "deepspeed"]),
    (dict(dp=16, zero_stage=3, recompute="full"), FSDP2, ["torchtitan"]),
    (dict(dp=16, zero_stage=3, recompute="full"), {**FSDP2, "recompute_early_stop": True},
     ["torchtitan"]),
    (dict(dp=16, zero_stage=3, recompute="full"), {"recompute_early_stop": True}, []),
    # TP with sequence parallelism and pipelines: Megatron; torchtitan's TP always shards the
    # sequence, and under a pipeline its FSDP is ZeRO-1 (not resharded after forward, the
    # gradients reduce-scattered at the last micro-batch by torch.distributed.pipelining,
    # after each stage's last backward), which it runs only costed with DTensor's blocking
    # reduce-scatters and that reduction; ZeRO-3 with a pipeline and 32 micro-batches it
    # does not run as costed; DeepSpeed has neither.
    (dict(dp=2, tp=4, pp=2, zero_stage=1, sequence_parallel=True), {}, ["megatron"]),
    (dict(dp=2, tp=4, pp=2, zero_stage=1, sequence_parallel=True),
     {**DTENSOR_TP, "grad_reduce_after_last_backward": True}, ["torchtitan"]),
    (dict(dp=2, tp=4, pp=2, zero_stage=1, sequence_parallel=True), DTENSOR_TP, []),
    (dict(dp=2, tp=4, pp=2, zero_stage=3, sequence_parallel=True), DTENSOR_TP, []),
    (dict(dp=2, tp=4, pp=2, zero_stage=3, sequence_parallel=True), FSDP2, []),
    (dict(dp=2, tp=4, pp=2, zero_stage=3, sequence_parallel=True), {}, []),
    # TP without sequence parallelism, no pipeline: Megatron (and DeepSpeed's AutoTP, below).
    (dict(dp=4, tp=4, zero_stage=1), {}, ["megatron"]),
    # Context parallelism: ring attention in Megatron (Transformer Engine's) and torchtitan
    # (PyTorch's, training.ring_attention 'torch'), not DeepSpeed.
    (dict(dp=8, cp=2, zero_stage=3), {}, ["megatron"]),
    (dict(dp=8, cp=2, zero_stage=3), FSDP2, []),
    # v0.2.2's training never sets the rotate method: PyTorch's default all-gather only.
    (dict(dp=8, cp=2, zero_stage=3), {**FSDP2, "ring_attention": "torch"}, []),
    (dict(dp=8, cp=2, zero_stage=3), {**FSDP2, "ring_attention": "torch_allgather"},
     ["torchtitan"]),
    (dict(dp=8, cp=2, zero_stage=3), {"ring_attention": "torch"}, []),
    (dict(dp=8, zero_stage=3), {**FSDP2, "ring_attention": "te"}, ["torchtitan"]),
    # Selective recompute of the attention core: Megatron only.
    (dict(dp=16, zero_stage=0, recompute="selective"), {}, ["megatron"]),
    # Interleaved FSDP + TP + PP: torchtitan (its FSDP as ZeRO-1 under the pipeline), whose
    # Interleaved1F1B runs rounds of pp micro-batches; a micro-batch group of 2 pp is a
    # schedule it does not run.
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True), DTENSOR_TP,
     ["torchtitan"]),
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True,
          microbatch_group_size=8), DTENSOR_TP, []),
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=3, sequence_parallel=True), DTENSOR_TP, []),
    # ... in max(1, m // pp) rounds of m / rounds micro-batches (torch's
    # ScheduleInterleaved1F1B, number_of_rounds and microbatches_per_round): 10 micro-batches
    # on 4 stages run as 2 rounds of 5, Megatron's group of 5, the smallest valid; 6 as one
    # round of 6; 9 raise there (2 rounds do not divide them), where Megatron runs groups of
    # 5 and 4.
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True),
     {**DTENSOR_TP, "global_batch_size": 20}, ["torchtitan"]),
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True),
     {**DTENSOR_TP, "global_batch_size": 12}, ["torchtitan"]),
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True),
     {**DTENSOR_TP, "global_batch_size": 18}, []),
    (dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True,
          microbatch_group_size=10), {**DTENSOR_TP, "global_batch_size": 20}, []),
    # Block recompute of the first layers of each chunk: Megatron only.
    (dict(dp=16, zero_stage=0, recompute="full", recompute_num_layers=4), {}, ["megatron"]),
    # torchtitan's eager model code (compile off): torchtitan, and DeepSpeed, which runs the
    # model code's kernels; Megatron fuses RoPE and SwiGLU.
    (dict(dp=16, zero_stage=0), {**ONE_MB, "eager_elementwise": True}, ["torchtitan"]),
    # Plain PyTorch attention (no FlashAttention, scale, mask and softmax apart): Megatron
    # with --no-masked-softmax-fusion, not torchtitan's SDPA; with FlashAttention the field
    # changes nothing.
    (dict(dp=16, zero_stage=1), {"flash_attention": False, "softmax_fusion": False},
     ["megatron"]),
    (dict(dp=16, zero_stage=3), {**FSDP2, "flash_attention": False, "softmax_fusion": False},
     []),
    (dict(dp=16, zero_stage=3), {**FSDP2, "softmax_fusion": False}, ["torchtitan"]),
    # ... and not in fp8 or with CP: Megatron's local implementation has neither.
    (dict(dp=16, zero_stage=1), {"flash_attention": False, "softmax_fusion": False,
                                 "precision": "fp8"}, []),
    (dict(dp=8, cp=2, zero_stage=1), {"flash_attention": False, "softmax_fusion": False}, []),
    (dict(dp=8, cp=2, zero_stage=1), {"flash_attention": False}, ["megatron"]),
    # The reference eager RMSNorm: neither Megatron (fused kernels or torch.nn.RMSNorm) nor
    # torchtitan (torch.nn.RMSNorm) runs it; the model code DeepSpeed trains may.
    (dict(dp=16, zero_stage=1), {"norm_fusion": False}, []),
    (dict(dp=16, zero_stage=1), {"norm_fusion": False, **BF16_OPTIMIZER}, ["deepspeed"]),
    (dict(dp=16, zero_stage=3), {**FSDP2, "norm_fusion": False}, []),
    (dict(dp=16, zero_stage=3), {**FSDP2}, ["torchtitan"]),
    # ZeRO-1 all-reducing its gradients: DeepSpeed's reduce_scatter false, not Megatron's
    # distributed optimizer; plain data parallelism all-reduces anyway.
    (dict(dp=16, zero_stage=1), {"zero_grad_allreduce": True}, []),
    (dict(dp=16, zero_stage=1), BF16_OPTIMIZER, ["deepspeed"]),
    (dict(dp=16, zero_stage=1), {"grad_dtype": "bf16", "zero_grad_allreduce": True,
                                 "overlap_param_gather": False}, ["deepspeed"]),
    (dict(dp=16, zero_stage=1), {"grad_dtype": "bf16", "zero_grad_allreduce": True}, []),
    (dict(dp=16, zero_stage=0), {**ONE_MB, "zero_grad_allreduce": True},
     ["megatron", "torchtitan"]),
    # A full recompute that reruns the embedding and the LM head (Aleph Alpha's every_layer
    # checkpointing): Megatron and torchtitan recompute the transformer layers only; a
    # DeepSpeed PipelineModule may checkpoint its head. Without full recompute it is moot.
    (dict(dp=16, zero_stage=0, recompute="full"), {"recompute_head": True}, []),
    (dict(dp=16, zero_stage=1, recompute="full"),
     {"recompute_head": True, **BF16_OPTIMIZER}, ["deepspeed"]),
    (dict(dp=16, zero_stage=0), {**ONE_MB, "recompute_head": True}, ["megatron", "torchtitan"]),
    # No fp32 master weights: torchtitan's training.dtype "bfloat16", which keeps gradients
    # and Adam's moments in bf16 too and reduces the gradients in fp32 (FSDP2 casting back);
    # Megatron keeps an fp32 (or fp16) copy, DeepSpeed a bf16 one. Any other pure-bf16 mix
    # runs nowhere, and bf16 moments beside a master copy stay Megatron's.
    (dict(dp=16, zero_stage=3), {**PURE_BF16}, ["torchtitan"]),
    # ... under FSDP only: without sharding its DDP would reduce the bf16 gradients in bf16.
    (dict(dp=16, zero_stage=0), {**PURE_BF16}, []),
    (dict(dp=16, zero_stage=3), {**PURE_BF16, "grad_reduce_dtype": None}, []),
    (dict(dp=16, zero_stage=3), {**PURE_BF16, "optimizer_state_dtype": "fp32"}, []),
    (dict(dp=16, zero_stage=3), {**PURE_BF16, "master_weights": True}, []),
    (dict(dp=16, zero_stage=1), {"master_weights": False}, []),
])
def test_frameworks_of_a_plan(plan_fields, training, frameworks):
    est = estimate(M8, C16, TR.model_copy(update=training),
                   ParallelPlan(micro_batch_size=1, **plan_fields))
    assert est.frameworks == frameworks


@pytest.mark.parametrize("plan_fields", [dict(dp=16, zero_stage=1), dict(dp=4, tp=4, zero_stage=1)])
def test_deepspeed_runs_bf16_zero_1_plans_with_their_gradient_copy(plan_fields):
    """DeepSpeed's BF16_Optimizer (bf16 weights, fp32 gradient accumulation, ZeRO-1: the
    engine's ``_do_optimizer_sanity_check``) adds every micro-batch's bf16 gradients into
    fp32 and all-reduces them after the backward: with ``training.microbatch_grad_copy`` (and
    the all-reduce not overlapped) the plan is costed that way and DeepSpeed, only DeepSpeed,
    runs it as predicted. The copy costs 18 bytes a parameter per micro-batch over HBM."""
    p = ParallelPlan(micro_batch_size=1, **plan_fields)
    # (A TP plan: AutoTP's loss over the whole logits on every rank, and its five
    # column-parallel inputs a Llama layer.)
    base = TR.model_copy(update={"async_tensor_model_parallel_allreduce": p.tp == 1,
                                 "zero_grad_allreduce": True, "overlap_grad_reduce": False,
                                 "overlap_param_gather": False,
                                 "vocab_parallel_loss": p.tp == 1,
                                 "tp_column_parallel_inputs": 5})
    copy = base.model_copy(update={"microbatch_grad_copy": True})
    fused, copied = estimate(M8, C16, base, p), estimate(M8, C16, copy, p)
    assert copied.frameworks == ["deepspeed"] and "deepspeed" not in fused.frameworks
    m = fused.grad_accum_steps
    h100 = C16.gpu.memory_bandwidth_gb_per_s * 1e9 * C16.gpu.hbm_efficiency
    params = M8.num_params / p.tp
    kernels = 2 * 12 * 32 * 2.5e-6             # two kernels for each of a layer's 12 tensors
    assert copied.step_time_s - fused.step_time_s == pytest.approx(
        m * (params * 18 / h100 + kernels), rel=0.02)
    # fp16 weights with fp32 gradients: ZeRO-1 adds them into each parameter's fp32
    # grad_accum, the same copy.
    fp16 = estimate(M8, C16, base.model_copy(update={"precision": "fp16"}), p)
    fp16_copy = estimate(M8, C16, copy.model_copy(update={"precision": "fp16"}), p)
    assert "deepspeed" not in fp16.frameworks and fp16_copy.frameworks == ["deepspeed"]
    # A copy DeepSpeed would not make (bf16 gradients, accumulated in place) is charged by no
    # framework's run.
    bf16_grads = copy.model_copy(update={"grad_dtype": "bf16"})
    assert estimate(M8, C16, bf16_grads, p).frameworks == []


@pytest.mark.parametrize("plan_fields,training,reason", [
    (dict(dp=16, zero_stage=0), {"grad_dtype": "bf16"}, "overlapped with the backward"),
    (dict(dp=16, zero_stage=0), {"overlap_grad_reduce": False}, "unsupported mix"),
    (dict(dp=16, zero_stage=1), {**BF16_OPTIMIZER, "overlap_grad_reduce": True},
     "overlapped with the backward"),
    (dict(dp=16, zero_stage=1), {**BF16_OPTIMIZER, "zero_grad_allreduce": False},
     "which all-reduces them"),
    (dict(dp=8, pp=2, zero_stage=1), {"grad_dtype": "bf16", "overlap_param_gather": False},
     "with pipeline stages"),
    (dict(dp=16, zero_stage=2), {"grad_dtype": "bf16"}, "at the end of its optimizer step"),
])
def test_deepspeed_reduces_its_gradients_after_the_backward_where_its_engine_does(
        plan_fields, training, reason):
    """DeepSpeed 0.19.6: without ZeRO its engine all-reduces the gradients after the backward
    (``_backward_epilogue`` -> ``allreduce_gradients`` -> ``buffered_allreduce_fallback``), and
    refuses 16-bit weights with fp32 gradient accumulation there; its pipeline engine reduces
    at the end of the schedule (``ReduceGrads``); ZeRO-1 with bf16 weights and fp32 gradients
    is its BF16_Optimizer, which all-reduces them after the backward too; ZeRO-1/2 gather the
    updated weights at the end of the optimizer step (``stage_1_and_2.py`` step). A plan
    costed otherwise is refused DeepSpeed, with the reason; costed as it runs, DeepSpeed
    takes it."""
    p = ParallelPlan(micro_batch_size=1, **plan_fields)
    tr = TR.model_copy(update=training)
    est = estimate(M8, C16, tr, p)
    assert "deepspeed" not in est.frameworks
    reasons = reasons_by_framework(p, est.grad_accum_steps, True, tr)["deepspeed"]
    assert any(reason in r for r in reasons), reasons
    fixed = {"overlap_grad_reduce": False, "zero_grad_allreduce": True,
             "overlap_param_gather": False}
    if reason == "unsupported mix":
        fixed = {"grad_dtype": "bf16", "overlap_grad_reduce": False}
    assert "deepspeed" in estimate(M8, C16, tr.model_copy(update=fixed), p).frameworks


def test_a_blocking_tp_all_reduce_costs_its_exposure_and_runs_on_deepspeed_only():
    """Without sequence parallelism the backward all-reduce of a column-parallel layer's input
    gradient either runs beside the weight-gradient GEMM (Megatron-Core's async all-reduce)
    or blocks (DeepSpeed AutoTP's ColumnParallel.backward, Megatron-LM of 2021): the blocking
    one costs its whole time, per layer and micro-batch once per column-parallel input (QKV
    and MLP-up in Megatron, q, k, v, gate and up in AutoTP's Llama layer), and only
    DeepSpeed runs that plan as predicted; DeepSpeed runs the overlapped one too, with
    ``tensor_parallel.tp_overlap_comm`` (AsyncColumnParallel, from 0.16.6), and its config
    says which (Megatron runs it where its ZeRO-1 is costed reduce-scattering). With
    sequence parallelism (next test) the flag says whether the backward re-gathers the input
    beside the dgrad GEMM and reduce-scatters its gradient beside the wgrad GEMM (Megatron) or
    keeps the gathered input and blocks."""
    from planner.cost.tables import cost_tables, overlapped

    p = ParallelPlan(dp=4, tp=4, micro_batch_size=1, zero_stage=1)
    # (ZeRO-1 all-reducing its gradients, as DeepSpeed's does; Megatron's distributed
    # optimizer reduce-scatters them)
    blocking = TR.model_copy(update={"async_tensor_model_parallel_allreduce": False,
                                     "grad_dtype": "bf16", "overlap_param_gather": False,
                                     "zero_grad_allreduce": True, "vocab_parallel_loss": False,
                                     "tp_column_parallel_inputs": 5})
    overlap = blocking.model_copy(update={"async_tensor_model_parallel_allreduce": True})
    a, b = estimate(M8, C16, overlap, p), estimate(M8, C16, blocking, p)
    assert a.frameworks == ["deepspeed"] and b.frameworks == ["deepspeed"]
    assert estimate(M8, C16, overlap.model_copy(update={
        "zero_grad_allreduce": False, "vocab_parallel_loss": True,
        "tp_column_parallel_inputs": 2}), p).frameworks == ["megatron"]
    for est, tr, overlapped_tp in ((a, overlap, True), (b, blocking, False)):
        cfg = with_launch(est, M8, C16, tr).launch.deepspeed_config
        assert cfg["tensor_parallel"] == {"autotp_size": 4, "tp_overlap_comm": overlapped_tp}
    assert "megatron" not in b.frameworks
    npn = C16.gpus_per_node
    k = EfficiencyModel().overlap_slowdown
    # Megatron's two column-parallel inputs a layer (QKV and MLP-up), then AutoTP's five.
    for inputs in (2, 5):
        pair = [tr.model_copy(update={"tp_column_parallel_inputs": inputs})
                for tr in (overlap, blocking)]
        t_a, t_b = (cost_tables(M8, C16, tr, EfficiencyModel(), None) for tr in pair)
        (ar,) = [u.cost.time_s for u in t_a.tp_uses(4, 1, 1, 0, 0, npn)
                 if u.cost.op == "all_reduce"]
        la, lb = t_a.layer(4, 1, 1, 0, 0, npn), t_b.layer(4, 1, 1, 0, 0, npn)
        assert la.tp_bwd == pytest.approx(overlapped(inputs * ar, la.work.wgrad_colpar_s, k))
        assert lb.tp_bwd == pytest.approx(inputs * ar) and lb.tp_bwd > la.tp_bwd
        ea, eb = (estimate(M8, C16, tr, p) for tr in pair)
        assert eb.step_time_s - ea.step_time_s == pytest.approx(
            ea.grad_accum_steps * M8.num_layers * (lb.tp_bwd - la.tp_bwd), rel=0.02)


def test_sequence_parallelism_that_keeps_the_gathered_input_blocks_on_its_reduce_scatters():
    """Aleph Alpha's trainer under sequence parallelism: the norm gathers its output in the
    forward, the column-parallel layers keep it gathered, and the gather's backward
    reduce-scatters the input gradient before going on. Costed: the backward pays its two
    all-gathers and two reduce-scatters whole (Megatron: the all-gathers, the re-gathers and
    reduce-scatters beside the dgrad and wgrad GEMMs); each layer keeps both norms' outputs
    whole, 2 x 2 bytes x 4,096 tokens x 4,096 x (1 - 1/4) = 50,331,648 bytes more a
    micro-batch than the 1/tp shards Megatron keeps; Megatron refuses the plan."""
    from planner.cost.tables import cost_tables, overlapped

    sp = ParallelPlan(dp=4, tp=4, micro_batch_size=1, zero_stage=1, sequence_parallel=True)
    keep = TR.model_copy(update={"async_tensor_model_parallel_allreduce": False})
    a, b = estimate(M8, C16, TR, sp), estimate(M8, C16, keep, sp)
    assert "megatron" in a.frameworks and "megatron" not in b.frameworks
    t_a, t_b = (cost_tables(M8, C16, tr, EfficiencyModel(), None) for tr in (TR, keep))
    npn = C16.gpus_per_node
    t = {u.cost.op: u.cost.time_s for u in t_a.tp_uses(4, 1, 1, 0, 1, npn)}
    ag, rs = t["all_gather"], t["reduce_scatter"]
    la, lb = t_a.layer(4, 1, 1, 0, 1, npn), t_b.layer(4, 1, 1, 0, 1, npn)
    k = EfficiencyModel().overlap_slowdown
    assert la.tp_bwd == pytest.approx(2 * ag + overlapped(2 * ag, la.work.dgrad_colpar_s, k)
                                      + overlapped(2 * rs, la.work.wgrad_colpar_s, k))
    assert lb.tp_bwd == pytest.approx(2 * ag + 2 * rs) and lb.tp_bwd > la.tp_bwd
    assert lb.tp_fwd == pytest.approx(la.tp_fwd)
    assert lb.work.stored_bytes - la.work.stored_bytes == 2 * 2 * 4096 * 4096 * 3 / 4 == 50_331_648


def test_search_restricted_to_one_framework_returns_only_its_plans():
    body = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 128, "seq_length": 4096}}
    free = plan(PlanRequest.model_validate({**body, "search": {"top_k": 5}}))
    assert free.plans and all(p.frameworks for p in free.plans)
    for fw in ("megatron", "torchtitan", "deepspeed"):
        res = plan(PlanRequest.model_validate({**body, "search": {"top_k": 5, "framework": fw}}))
        assert res.plans, fw
        assert all(fw in p.frameworks for p in res.plans), fw
        assert res.search.space_size < free.search.space_size or fw == "megatron"
    titan = plan(PlanRequest.model_validate({**body, "search": {"framework": "torchtitan"}}))
    assert all(p.sequence_parallel or p.tp == 1 for p in titan.plans)
    assert all(p.zero_stage != 1 for p in titan.plans)


def test_an_unfused_softmax_launches_megatron_with_its_flag():
    """training.softmax_fusion false without FlashAttention is Megatron-LM's
    --no-masked-softmax-fusion (megatron/training/arguments.py, dest masked_softmax_fusion),
    read by Megatron-Core's own attention, which --transformer-impl local builds; the default
    launch leaves the fusion on and Transformer Engine in place."""
    from tests.launch_readers import megatron_parser
    plan_ = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1)
    c8 = ClusterSpec.from_preset("dgx-a100", num_nodes=1)
    fused = TrainingSpec(global_batch_size=64, seq_length=2048, flash_attention=False)
    plain = fused.model_copy(update={"softmax_fusion": False})
    for training, flag in ((fused, True), (plain, False)):
        est = with_launch(estimate(M8, c8, training, plan_), M8, c8, training)
        assert est.frameworks[0] == "megatron"
        args, _ = megatron_parser().parse_known_args(est.launch.megatron_args)
        assert args.masked_softmax_fusion is flag
        assert args.transformer_impl == ("transformer_engine" if flag else "local")


def test_a_named_attention_kernel_runs_only_where_a_framework_ships_it():
    """FlashAttention v1 and the Triton kernel replay older software: no framework of today runs
    them, so the default search finds nothing and says why, and 'any' costs them. FlashAttention-2
    is Megatron-LM's --attention-backend flash (megatron/training/arguments.py); torchtitan runs
    SDPA's kernels and DeepSpeed the model code's, so neither is listed for it."""
    plan_ = ParallelPlan(dp=8, zero_stage=3, micro_batch_size=1)
    tr = TrainingSpec(global_batch_size=64, seq_length=4096)
    c8 = ClusterSpec.from_preset("dgx-a100", num_nodes=1)
    default = estimate(M8, c8, tr, plan_)
    assert set(default.frameworks) == {"megatron", "deepspeed"}
    fsdp2 = estimate(M8, c8, tr.model_copy(update={"zero3_per_parameter": True}), plan_)
    assert fsdp2.frameworks == ["torchtitan"]
    fa2_training = tr.model_copy(update={"attention_kernel": "flash2"})
    fa2 = with_launch(estimate(M8, c8, fa2_training, plan_), M8, c8, fa2_training)
    assert fa2.frameworks == ["megatron"]
    args = fa2.launch.megatron_args
    assert args[args.index("--attention-backend") + 1] == "flash"
    for old in ("flash1", "flash_triton"):
        est = estimate(M8, c8, tr.model_copy(update={"attention_kernel": old}), plan_)
        assert est.frameworks == []
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
            "training": {"global_batch_size": 64, "seq_length": 4096,
                         "attention_kernel": "flash_triton"}}
    refused = plan(PlanRequest.model_validate(body))
    assert refused.search.status == "INFEASIBLE"
    assert "search.framework 'any'" in " ".join(refused.infeasible_reasons)
    replay = plan(PlanRequest.model_validate({**body, "search": {"framework": "any"}}))
    assert replay.plans and replay.plans[0].frameworks == []


def test_a_search_every_framework_refuses_says_what_each_refuses():
    """A request no framework runs at any degrees (the Triton FlashAttention, or the reference
    eager RMSNorm for Megatron) is answered with each framework's rules that refuse every
    plan, not only the pointer to the capability matrix; a rule that refuses some plans only
    (DeepSpeed's pipelines with tensor parallelism) is not listed."""
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
            "training": {"global_batch_size": 64, "seq_length": 4096,
                         "attention_kernel": "flash_triton"}}
    reasons = plan(PlanRequest.model_validate(body)).infeasible_reasons
    assert [r.split(":")[0] for r in reasons[1:]] == [
        "megatron runs none of them", "torchtitan runs none of them",
        "deepspeed runs none of them"]
    assert "FlashAttention v1 or the Triton FlashAttention" in reasons[1]
    assert "pipeline and tensor parallelism together" not in reasons[3]
    eager = {**body, "training": {"global_batch_size": 64, "seq_length": 4096,
                                  "norm_fusion": False},
             "search": {"framework": "megatron"}}
    reasons = plan(PlanRequest.model_validate(eager)).infeasible_reasons
    assert reasons[1] == ("megatron runs none of them: the reference eager RMSNorm "
                          "(training.norm_fusion false; Megatron's norms are fused kernels or "
                          "torch.nn.RMSNorm)")


OLMOE = {"model_type": "olmoe", "num_hidden_layers": 16, "hidden_size": 2048,
         "num_attention_heads": 16, "intermediate_size": 1024, "vocab_size": 50304,
         "num_experts": 64, "num_experts_per_tok": 8}


def test_moe_configs_of_unmapped_types_are_refused_naming_the_expert_keys(tmp_path):
    """An expert layout the import does not know is refused, not costed as a dense model."""
    body = {"model": {"hf_config": OLMOE}, "cluster": {"preset": "dgx-h100"},
            "training": {"global_batch_size": 8, "seq_length": 1024}, "plan": {"dp": 8}}
    with pytest.raises(PlannerInputError) as info:
        parse_request(EstimateRequest, body)
    assert info.value.field == "model"
    assert "mixture-of-experts" in info.value.reason and "num_experts=64" in info.value.reason
    req = tmp_path / "moe.json"
    req.write_text(json.dumps({**body, "cluster": {"preset": "dgx-h100", "num_nodes": 1}}))
    res = CliRunner().invoke(app, ["plan", str(req)])
    assert res.exit_code == 2
    assert "olmoe" in res.stderr and "num_experts=64" in res.stderr


def test_cli_prints_the_capability_matrix():
    runner = CliRunner()
    res = runner.invoke(app, ["frameworks", "--json"])
    assert res.exit_code == 0
    body = json.loads(res.stdout)
    assert body["capabilities"]["recompute_partial"]["megatron"]["status"] == "yes"
    assert any(r["framework"] == "deepspeed" and r["capability"] == "context_parallel"
               for r in body["rules"])
    res = runner.invoke(app, ["frameworks"])
    assert res.exit_code == 0 and "--use-distributed-optimizer" in res.stdout


def test_a_torchtitan_search_costs_fsdp2s_copies_unless_told_otherwise():
    """search.framework 'torchtitan' costs ZeRO-2/3 as FSDP2 runs it (training's unset
    zero3_per_parameter becomes true): its FSDP plans are found and priced with the copies; a
    request that sets the switch keeps it, and no other search changes it."""
    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "search": {"framework": "torchtitan", "top_k": 2}}
    req = PlanRequest.model_validate(body)
    assert req.training.zero3_per_parameter
    best = plan(req).plans[0]
    assert best.zero_stage == 3 and best.frameworks == ["torchtitan"]
    again = estimate(M8, C16, req.training, ParallelPlan(
        dp=best.dp, tp=best.tp, pp=best.pp, cp=best.cp, micro_batch_size=best.micro_batch_size,
        recompute=best.recompute, zero_stage=3, sequence_parallel=best.sequence_parallel))
    assert again.step_time_s == pytest.approx(best.step_time_s, rel=1e-9)
    flat = estimate(M8, C16, TR.model_copy(update={"global_batch_size": 64}), ParallelPlan(
        dp=best.dp, tp=best.tp, micro_batch_size=best.micro_batch_size, zero_stage=3))
    assert best.step_time_s > flat.step_time_s
    told = {**body, "training": {**body["training"], "zero3_per_parameter": False}}
    assert not PlanRequest.model_validate(told).training.zero3_per_parameter
    assert not PlanRequest.model_validate({**body, "search": {"top_k": 2}}
                                          ).training.zero3_per_parameter
    # A TrainingSpec object in the request is treated alike.
    obj = PlanRequest(model=M8, cluster=C16, training=TrainingSpec(global_batch_size=64,
                                                                   seq_length=4096),
                      search={"framework": "torchtitan"})
    assert obj.training.zero3_per_parameter


def test_deepspeed_runs_bf16_pipelines_only_with_zero():
    """Without ZeRO, DeepSpeed 0.19.6's engine runs bf16 pipeline stages with its
    BF16_Optimizer (``_do_optimizer_sanity_check``: bf16 gradients and the pipeline engine),
    which adds every micro-batch's gradients into a buffer of its own: not costed, so refused;
    with ZeRO-1 the same plan runs on its ZeRO optimizer."""
    tr = TR.model_copy(update={"grad_dtype": "bf16", "overlap_grad_reduce": False,
                               "overlap_param_gather": False, "zero_grad_allreduce": True})
    for zero, refused in ((0, True), (1, False)):
        p = ParallelPlan(dp=8, pp=2, zero_stage=zero, micro_batch_size=1)
        est = estimate(M8, C16, tr, p)
        reasons = reasons_by_framework(p, est.grad_accum_steps, True, tr)["deepspeed"]
        assert any("BF16_Optimizer" in r for r in reasons) is refused, reasons
        assert ("deepspeed" in est.frameworks) is not refused


def test_a_deepspeed_search_costs_its_zero_1_2_weight_gather_after_the_step():
    """DeepSpeed's ZeRO-1/2 gather the updated weights at the end of the optimizer step: a
    search for DeepSpeed costs them so unless the request says otherwise, and finds ZeRO-2
    plans it runs (with fp32 gradients ZeRO-1 would need its BF16_Optimizer's copy and
    all-reduce, and plain data parallelism is refused the mix)."""
    body = {"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"global_batch_size": 64, "seq_length": 4096},
            "search": {"framework": "deepspeed", "top_k": 3, "tp": 1, "pp": 1, "cp": 1}}
    req = PlanRequest.model_validate(body)
    assert req.training.overlap_param_gather is False
    res = plan(req)
    assert res.plans and all(p.frameworks and "deepspeed" in p.frameworks for p in res.plans)
    assert {p.zero_stage for p in res.plans} <= {2, 3}
    told = {**body, "training": {**body["training"], "overlap_param_gather": True}}
    assert PlanRequest.model_validate(told).training.overlap_param_gather is True
    assert PlanRequest.model_validate({**body, "search": {"top_k": 2}}
                                      ).training.overlap_param_gather is True


def test_a_torchtitan_search_with_tensor_parallelism_costs_dtensors_blocking_tp():
    """torchtitan runs TP as DTensor's sequence-parallel TP: a torchtitan search restricted to
    tp 4 finds plans only costed with the blocking reduce-scatters
    (training.async_tensor_model_parallel_allreduce false), and says why it finds none
    otherwise."""
    body = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 4},
            "training": {"global_batch_size": 64, "seq_length": 4096,
                         "zero3_per_parameter": True},
            "search": {"framework": "torchtitan", "tp": 4, "top_k": 3}}
    refused = plan(PlanRequest.model_validate(body))
    assert refused.search.status == "INFEASIBLE" and any(
        "torchtitan runs none of them" in r and "DTensor" in r for r in refused.infeasible_reasons)
    body["training"]["async_tensor_model_parallel_allreduce"] = False
    found = plan(PlanRequest.model_validate(body))
    assert found.plans and all(p.tp == 4 and "torchtitan" in p.frameworks for p in found.plans)


def test_torchtitan_v0_2_2_refuses_what_its_code_does_otherwise():
    """Read in torchtitan v0.2.2: its float8 converter converts nn.Linear only (the grouped
    experts stay bf16); deepseek_v3's and llama4's parallelize raise for DeepEP without EP or
    with ETP; every model's parallelize asserts seq_len % (2 tp cp) == 0; and its fp8 weight
    gathers act only where FSDP shards over data-parallel ranks (dp_shard > 1)."""
    mixtral = ModelSpec.from_preset("mixtral-8x7b")

    def titan(plan, model=M8, moe=False, **training):
        tr = TR.model_copy(update={**FSDP2, "async_tensor_model_parallel_allreduce": False,
                                   **training})
        return reasons_by_framework(plan, 4, True, tr, moe=moe)["torchtitan"]

    fsdp = ParallelPlan(dp=16, ep=8, zero_stage=3, micro_batch_size=1)
    assert not any("fp8 expert" in r for r in titan(fsdp, mixtral, True))
    assert any("fp8 expert" in r for r in titan(fsdp, mixtral, True, precision="fp8"))
    assert not any("fp8 expert" in r for r in titan(ParallelPlan(dp=16, zero_stage=3),
                                                    precision="fp8"))
    deepep = {"moe_dispatcher": "deepep"}
    assert not any("DeepEP" in r for r in titan(fsdp, mixtral, True, **deepep))
    for p in (ParallelPlan(dp=16, zero_stage=3),
              ParallelPlan(dp=8, tp=2, ep=8, etp=2, zero_stage=3, sequence_parallel=True)):
        assert any("DeepEP" in r for r in titan(p, mixtral, True, **deepep))
    tp4 = ParallelPlan(dp=4, tp=4, zero_stage=3, sequence_parallel=True)
    assert not any("2 x tp x cp" in r for r in titan(tp4))
    assert any("2 x tp x cp" in r for r in titan(tp4, seq_length=4100))
    gather = {"precision": "fp8", "fp8_param_gather": True}
    assert not any("fp8 weight gathers without" in r
                   for r in titan(ParallelPlan(dp=16, zero_stage=3), **gather))
    assert any("fp8 weight gathers without" in r
               for r in titan(ParallelPlan(dp=1, cp=16, zero_stage=3), **gather))
    # Its decoder models have no dropout layers: a plan costed with dropout's masks and
    # kernels is not what it runs. Megatron-LM runs it (with its dropout flags left at 0.1).
    fsdp16 = ParallelPlan(dp=16, zero_stage=3)
    assert not any("dropout" in r for r in titan(fsdp16))
    assert any("dropout" in r for r in titan(fsdp16, dropout=True))
    tr = TR.model_copy(update={"dropout": True})
    assert not any("dropout" in r for r in reasons_by_framework(
        ParallelPlan(dp=16, zero_stage=1), 4, True, tr)["megatron"])


def test_torchtitan_runs_fewer_micro_batches_than_stages_only_one():
    """With fewer micro-batches than stages torchtitan runs GPipe (Schedule1F1B refuses it),
    which runs every forward before any backward: each stage holds all m micro-batches where
    the plan's 1F1B memory holds min(pp - i, m). One micro-batch is the same either way."""
    tr = TR.model_copy(update={**DTENSOR_TP, "grad_reduce_after_last_backward": True})
    plan = ParallelPlan(dp=2, tp=2, pp=4, zero_stage=1, sequence_parallel=True,
                        micro_batch_size=1)

    def why(m):
        return [r for r in reasons_by_framework(plan, m, True, tr)["torchtitan"]
                if "GPipe" in r]
    assert why(1) == [] and why(4) == [] and why(8) == []
    assert why(2) and why(3)


def test_the_search_filter_and_an_estimate_agree_on_torchtitans_interleaved_rounds():
    """The search's filter (``runs_mask``, no group given) takes each interleaved plan's group
    as the step model costs it, the smallest valid one: 10 micro-batches on 4 stages run in
    groups of 5, torch's 2 rounds of 5, so torchtitan runs the plan in the search too; 9 do
    not divide into torch's 2 rounds, so neither path lists it."""
    from planner.cost.batch import PlanArrays
    from planner.frameworks import runs_mask

    fields = dict(dp=2, tp=2, pp=4, vpp=2, zero_stage=1, sequence_parallel=True,
                  micro_batch_size=1)
    arrays = PlanArrays.from_plans([ParallelPlan(**fields), ParallelPlan(**fields)])
    training = TR.model_copy(update=DTENSOR_TP)
    assert runs_mask("torchtitan", arrays, [10, 9], [True, True], training).tolist() == [
        True, False]
    for gbs, listed in ((20, True), (18, False)):
        est = estimate(M8, C16, training.model_copy(update={"global_batch_size": gbs}),
                       ParallelPlan(**fields))
        assert ("torchtitan" in est.frameworks) is listed
