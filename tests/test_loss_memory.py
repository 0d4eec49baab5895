"""The memory the last stage needs at the loss (``TrainingSpec.loss_implementation``).

``layers.loss_peak_bytes`` counts the bytes a logit that each cross-entropy holds at its peak,
the 16-bit logits included. Here the three are measured on bf16 logits on the CPU: every
allocation and free the allocator reports (torch.profiler's memory events) replayed in order
over one forward and backward of the loss, as a training step runs it (the logits from the LM
head, the loss, the logits released, the backward). Megatron-Core's vocab-parallel
cross-entropy is replayed op for op on one rank (its tensor_parallel/cross_entropy.py: the
fp32 copy, the in-place max subtraction, exp and division, the saved softmax, the backward's
in-place update and product); its collectives over one rank change no tensor.
"""

from __future__ import annotations

import pytest

from planner.cost import EfficiencyModel, estimate
from planner.cost.layers import LayerShape, head_work, layer_work, loss_peak_bytes
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec

torch = pytest.importorskip("torch")

N, V, H = 1024, 4096, 64          # tokens, vocabulary, hidden (the LM head's input)


class _MegatronCrossEntropy(torch.autograd.Function):
    """Megatron-Core's _VocabParallelCrossEntropy on one rank (no label smoothing)."""

    @staticmethod
    def forward(ctx, logits, target):
        logits = logits.float()                                   # calculate_logits_max
        logits_max = torch.max(logits, dim=-1)[0]
        logits -= logits_max.unsqueeze(dim=-1)                    # calculate_predicted_logits
        logits_2d = logits.view(-1, logits.size(-1))
        arange_1d = torch.arange(logits_2d.size(0))
        predicted = logits_2d[arange_1d, target.view(-1)].clone().view_as(target)
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        sum_exp = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp) - predicted                     # calculate_cross_entropy_loss
        exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target = ctx.saved_tensors
        grad_input = softmax                                      # in place, as Megatron does
        grad_2d = grad_input.view(-1, grad_input.size(-1))
        grad_2d[torch.arange(grad_2d.size(0)), target.view(-1)] -= 1.0
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None


def _megatron(pred, labels):
    return _MegatronCrossEntropy.apply(pred, labels).mean()


def _eager(pred, labels):       # torchtitan's cross_entropy_loss
    return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def _peak_bytes_per_logit(loss_fn) -> float:
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(H, V, dtype=torch.bfloat16))
    x = torch.randn(1, N, H, dtype=torch.bfloat16)
    labels = torch.randint(0, V, (1, N))
    for _ in range(2):                       # compile (where it does) and warm the allocator
        pred = x @ w
        loss = loss_fn(pred, labels)
        del pred
        loss.backward()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        pred = x @ w                         # the bf16 logits
        loss = loss_fn(pred, labels)
        del pred
        loss.backward()
    now = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        now += event.self_cpu_memory_usage
        peak = max(peak, now)
    return peak / (N * V)


@pytest.mark.parametrize("implementation,loss_fn", [
    ("megatron", _megatron), ("eager", _eager),
    ("fused", lambda pred, labels: _compiled(pred, labels))])
def test_each_loss_peaks_where_the_model_says(implementation, loss_fn):
    # (beyond the logits, a few bytes a token: the labels, the per-token losses)
    assert _peak_bytes_per_logit(loss_fn) == pytest.approx(loss_peak_bytes(implementation, 2),
                                                           abs=0.01)


_COMPILED = None


def _compiled(pred, labels):
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = torch.compile(_eager)
    return _COMPILED(pred, labels)


H100 = ClusterSpec.model_validate({"preset": "dgx-h100", "num_nodes": 1})
LLAMA = ModelSpec.model_validate({"preset": "llama3-8b"})
EFF = EfficiencyModel()


def _training(**kw) -> TrainingSpec:
    return TrainingSpec.model_validate({"global_batch_size": 16, "seq_length": 8192, **kw})


def test_fp32_logits_need_no_copy():
    assert [loss_peak_bytes(i, 4) for i in ("megatron", "eager", "fused")] == [4, 8, 4]
    assert [loss_peak_bytes(i, 2) for i in ("megatron", "eager", "fused")] == [6, 10, 2]


def test_head_memory_by_hand():
    T, V_ = 2 * 8192, 128256                # two sequences a rank, tp 1 (no padding needed)
    for implementation, peak, kept in (("megatron", 6, 4), ("eager", 10, 4),
                                       ("fused", 2, 2)):
        hw = head_work(LLAMA, _training(loss_implementation=implementation),
                       LayerShape(1, 1, 2), H100.gpu, EFF)
        assert (hw.loss_peak_bytes, hw.logits_bytes) == (peak * T * V_, kept * T * V_)
    # tp 2: each rank's half of the vocabulary
    hw = head_work(LLAMA, _training(), LayerShape(2, 1, 2), H100.gpu, EFF)
    assert hw.loss_peak_bytes == 6 * T * V_ / 2
    # A loss over the gathered logits runs PyTorch's: 'megatron' reads as 'eager' there.
    gathered = head_work(LLAMA, _training(vocab_parallel_loss=False), LayerShape(2, 1, 2),
                         H100.gpu, EFF)
    assert (gathered.loss_peak_bytes, gathered.logits_bytes) == (10 * T * V_, 6 * T * V_)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_last_stage_holds_the_loss_or_a_recomputed_layer(recompute):
    """One stage (pp 1): its activations are every layer's stored ones, then at the loss its
    peak, or later the layer the backward recomputes, whichever is larger; the allocator's
    share on top (``memory_fragmentation``)."""
    plan = ParallelPlan(dp=8, micro_batch_size=2, zero_stage=3, recompute=recompute)
    acts = {}
    for implementation in ("megatron", "eager", "fused"):
        training = _training(loss_implementation=implementation)
        est = estimate(LLAMA, H100, training, plan)
        work = layer_work(LLAMA, training, plan, H100.gpu, EFF)
        hw = head_work(LLAMA, training, plan, H100.gpu, EFF)
        working = work.working_bytes if recompute == "full" else 0.0
        expect = LLAMA.num_layers * work.stored_bytes + max(working, hw.loss_peak_bytes)
        assert est.memory.activations_gib * 2**30 == pytest.approx(expect, rel=1e-12)
        acts[implementation] = expect
    assert acts["fused"] < acts["megatron"] < acts["eager"]


@pytest.mark.parametrize("implementation, vocab_parallel, megatron_note, deepspeed_note", [
    ("megatron", True, False, True),      # Hugging Face's model code runs its eager loss
    ("megatron", False, False, False),    # gathered logits: costed as the eager loss it runs
    ("eager", True, True, False),
    ("fused", True, True, True),
])
def test_a_command_says_when_its_framework_runs_another_loss(implementation, vocab_parallel,
                                                             megatron_note, deepspeed_note):
    """Megatron-LM runs its own loss whatever was costed, DeepSpeed the model code's eager
    one: their artifacts say so where the costed loss is another."""
    from planner.launch.context import LaunchContext
    from planner.launch.deepspeed import deepspeed_config
    from planner.launch.megatron import megatron_args

    training = _training(loss_implementation=implementation, vocab_parallel_loss=vocab_parallel)
    est = estimate(LLAMA, H100, training, ParallelPlan(dp=8, zero_stage=1))
    ctx = LaunchContext(est, LLAMA, H100, training)
    notes = {"megatron": megatron_args(ctx)[1], "deepspeed": deepspeed_config(ctx)[1]}
    said = {k: any("training.loss_implementation" in n for n in v) for k, v in notes.items()}
    assert said == {"megatron": megatron_note, "deepspeed": deepspeed_note}


@pytest.mark.parametrize("implementation, vocab_parallel, costed", [
    ("megatron", True, "megatron"), ("megatron", False, "eager"),
    ("eager", False, "eager"), ("fused", False, "fused"), ("fused", True, "fused")])
def test_the_loss_a_plan_is_costed_with(implementation, vocab_parallel, costed):
    from planner.cost.layers import costed_loss

    training = _training(loss_implementation=implementation, vocab_parallel_loss=vocab_parallel)
    assert costed_loss(training) == costed
    hw = head_work(LLAMA, training, LayerShape(1, 1, 2), H100.gpu, EFF)
    assert hw.loss_peak_bytes == loss_peak_bytes(costed, 2) * 2 * 8192 * 128256
