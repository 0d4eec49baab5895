"""Earlier costings of the step model, for the tests that replay the figures the README quoted
before a correction: each is the formula the model used then, patched in for the duration of a
``with`` block (and the kept cost tables cleared on the way in and out, so no table built one
way is read the other)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from planner.cost import batch, kernels, layers, tables
from planner.cost.layers import GatheredLoss
from planner.cost.pipeline import exchanges
from planner.cost.tables import cost_tables
from planner.kept import Kept
from planner.search import space
from planner.specs import gpu

# NeMo AutoModel's two MoE runs train in pure bf16 (``training.master_weights`` false, bf16
# gradients and moments, fp32 reduction): encoded so once the planner could express it.
PURE_BF16_RUNS = ("automodel-deepseek-v3-h100-256-bf16", "automodel-qwen3-30b-a3b-h100-8-bf16")


def with_master_copy(run: dict) -> dict:
    """The run as the corpus costed it before ``training.master_weights`` existed: NeMo
    AutoModel's MoE runs with an fp32 master copy, fp32 moments and fp32 gradients (an
    encoding of the corpus then, not a formula of the model)."""
    if run["id"] not in PURE_BF16_RUNS:
        return run
    dropped = ("master_weights", "grad_dtype", "grad_reduce_dtype", "optimizer_state_dtype")
    return {**run, "training": {k: v for k, v in run["training"].items() if k not in dropped}}


def with_bf16_gathers(run: dict) -> dict:
    """The run as the corpus costed it before ``training.fp8_param_gather`` existed: weights
    gathered in 16 bits (an encoding of the corpus then; its sources' fp8 weight gathers were
    quoted in ``assumed`` as not modelled)."""
    if "fp8_param_gather" not in run["training"]:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items()
                                if k != "fp8_param_gather"}}


# The fp16 runs of DeepSpeed's 2022 pipeline stacks whose gradients were encoded fp32 (the
# default) until its fp16 reduction was read.
DEEPSPEED_FP16_GRAD_SOURCES = ("bloom", "glm-130b")


def before_deepspeed_source_read(run: dict) -> dict:
    """The run as the corpus encoded it before DeepSpeed's gradient dtypes and
    ``training.zero3_max_reuse_params`` were read in its source: SC'21 Table 2's DeepSpeed
    ZeRO-3 rows with the backward gathering every tensor once, as the forward does, and fp32
    gradients (DeepSpeed 0.3.13 reduces fp16 buckets), and the fp16 BLOOM prequel and GLM-130B
    runs with fp32 gradients (DeepSpeed's fp16 ZeRO-1 of 2022 reduces them in fp16)."""
    training = run["training"]
    if "zero3_max_reuse_params" in training:
        training = {k: v for k, v in training.items() if k != "zero3_max_reuse_params"}
        return {**run, "training": {**training, "grad_dtype": "fp32"}}
    if (run["source"] in DEEPSPEED_FP16_GRAD_SOURCES and training.get("precision") == "fp16"
            and training.get("grad_dtype") == "fp16"):
        return {**run, "training": {k: v for k, v in training.items() if k != "grad_dtype"}}
    return run


# The sources whose fork of Megatron blocks on the TP all-reduce of the input gradient (no
# asynchronous all-reduce beside the weight-gradient GEMM), encoded so once their code was read.
BLOCKING_TP_SOURCES = ("bloom", "gpt-neox-20b")


def before_blocking_tp_read(run: dict) -> dict:
    """The run as the corpus encoded it before BigScience's and EleutherAI's Megatron forks
    were read: their backward TP all-reduce overlapped, as Megatron-LM's
    (``training.async_tensor_model_parallel_allreduce`` at its default)."""
    if run["source"] not in BLOCKING_TP_SOURCES:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items()
                                if k != "async_tensor_model_parallel_allreduce"}}


def before_torch_ring(run: dict) -> dict:
    """The run as the corpus encoded it before PyTorch's ring attention was costed
    (``training.ring_attention``): torchtitan's context-parallel sweeps with Transformer
    Engine's ring."""
    if "ring_attention" not in run["training"]:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items()
                                if k != "ring_attention"}}


def before_distributed_saved_inputs(run: dict) -> dict:
    """The run as the corpus encoded it before ``training.distribute_saved_activations``
    existed: OPT-175B keeping every checkpointed layer input whole on each TP rank (metaseq's
    --distribute-checkpointed-activations quoted in ``assumed`` as not costed)."""
    if "distribute_saved_activations" not in run["training"]:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items()
                                if k != "distribute_saved_activations"}}


def before_reduce_after_backward(run: dict) -> dict:
    """The run as the corpus encoded it before ``training.grad_reduce_after_last_backward``
    existed: torchtitan's pipelined FSDP runs with their reduction costed beside the last
    backward, as Megatron-LM's buckets run."""
    if "grad_reduce_after_last_backward" not in run["training"]:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items()
                                if k != "grad_reduce_after_last_backward"}}


def _without_field(run: dict, field: str) -> dict:
    """The run without ``training.<field>`` and the note in ``assumed`` that marks it."""
    if field not in run["training"]:
        return run
    return {**run, "training": {k: v for k, v in run["training"].items() if k != field},
            "assumed": [a for a in run.get("assumed", []) if not a.startswith(field)]}


def before_tp_column_inputs(run: dict) -> dict:
    """The run as the corpus encoded it before ``training.tp_column_parallel_inputs``
    existed: Hagemann et al.'s layouts with Megatron-LM's two column-parallel inputs a layer
    where Aleph Alpha's trainer has three (its SwiGLU's two input linears)."""
    return _without_field(run, "tp_column_parallel_inputs")


def before_grad_upcast(run: dict) -> dict:
    """The run as the corpus encoded it before ``training.microbatch_grad_upcast`` existed:
    torchtitan's pipelined FSDP runs without FSDP2's fp32 accumulation of every micro-batch's
    unsharded gradients."""
    return _without_field(run, "microbatch_grad_upcast")


def before_moe_routing(run: dict) -> dict:
    """The run as the corpus encoded it before ``training.moe_routing`` existed: torchtitan's
    MoE runs costed with Megatron-Core's fused permutation."""
    return _without_field(run, "moe_routing")


def _gathered_loss_in_logits_dtype(e: int, t: int) -> GatheredLoss:
    """The loss over gathered logits as costed until December 2026: ``cross_entropy`` over the
    whole vocabulary in the logits' own dtype (no fp32 upcast) and no per-rank copies out of
    the gather. Forward, at tp > 1 the concatenation (read e, write e), then ``log_softmax``
    (read e; read e, write e); backward the NLL gradient (write e), ``log_softmax``'s backward
    (read e; read 2 e, write e) and the rank's slice (2 e / t); four kernels each way; the
    gathered logits and ``log_softmax``'s output kept, e each."""
    cat = 2 * e if t > 1 else 0
    shard = 2 * e / t if t > 1 else 0.0
    return GatheredLoss(fwd_bytes=cat + 3 * e, bwd_bytes=e + 4 * e + shard, fwd_kernels=4,
                        bwd_kernels=4, kept_bytes=2 * e)


def _overlapped_exchanges(m, vpp, pp, group=None, overlap=True):
    """Every interleaved schedule's sends overlapped, as costed until December 2026."""
    return exchanges(m, vpp, pp, group)


def _full_grid(seq: float, batch_heads: float, sm_count: int | None) -> float:
    """Fused attention at its benchmark rate whatever its grid, as costed until December
    2026."""
    return 1.0


def _windows_of_one_micro_batch(n, m, pp, v, group):
    """Every once-per-step reduction and gather as n buckets within one micro-batch's backward
    and forward, interleaved or not, as costed until December 2026."""
    one = np.ones_like(np.asarray(m))
    return np.maximum(n, 1), one, one


@contextmanager
def _patched(module: object, name: str, value: object) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        cost_tables.cache_clear()
        patch.setattr(module, name, value)
        try:
            yield
        finally:
            cost_tables.cache_clear()


@contextmanager
def loss_in_logits_dtype() -> Iterator[None]:
    """The step model as it costed ``TrainingSpec.vocab_parallel_loss`` false before the
    loss's fp32 upcast was read from the trainers' code (and, as it was then, without the
    attention kernels' grid: ``attention_without_grid``)."""
    with attention_without_grid(), _patched(layers, "gathered_loss",
                                            _gathered_loss_in_logits_dtype):
        yield


@contextmanager
def attention_without_grid() -> Iterator[None]:
    """The step model before a fused attention kernel's grid was costed
    (``planner.cost.kernels.attention_fill``): every call at its benchmark rate."""
    with _patched(kernels, "attention_fill", _full_grid):
        yield


@contextmanager
def a100_rate_before_blocking_sends() -> Iterator[None]:
    """The A100's sustained GEMM rate at 0.75, what the fit runs chose before their interleaved
    runs' blocking sends were costed (``TrainingSpec.overlap_p2p_comm``), which moved the
    choice to 0.76."""
    with pytest.MonkeyPatch.context() as patch:
        cost_tables.cache_clear()
        for name in ("a100-80gb", "a100-40gb"):
            patch.setitem(gpu._GPU_PRESETS[name], "matmul_efficiency", 0.75)
        try:
            yield
        finally:
            cost_tables.cache_clear()


@contextmanager
def sends_overlapped() -> Iterator[None]:
    """Every interleaved schedule's send/recv overlapped, whatever
    ``TrainingSpec.overlap_p2p_comm`` says, as costed before it existed."""
    with _patched(batch, "exchanges", _overlapped_exchanges):
        yield


@contextmanager
def overlapped_sends() -> Iterator[None]:
    """The step model before ``TrainingSpec.overlap_p2p_comm``: every interleaved schedule's
    send/recv overlapped (``sends_overlapped``), and the A100's rate the fit chose then
    (``a100_rate_before_blocking_sends``)."""
    with a100_rate_before_blocking_sends(), sends_overlapped():
        yield


def _no_replicas(dp, tp, cp, expert_unit, gpus_per_node, search):
    return [1]


@contextmanager
def without_hybrid_sharding() -> Iterator[None]:
    """The plan space before hybrid sharding (``plan.dp_replicate``): ZeRO sharded over every
    data-parallel rank, with the kept spaces of the search set aside for the duration."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(space, "_SPACES", Kept(16))
        patch.setattr(space, "replica_counts", _no_replicas)
        yield


@contextmanager
def one_micro_batch_windows() -> Iterator[None]:
    """The step model before an interleaved stage's reduction and gather were released chunk
    by chunk over its micro-batch groups (``batch.chunk_windows``): the n buckets within the
    last micro-batch's backward and the first one's forward, whatever the schedule."""
    with _patched(batch, "chunk_windows", _windows_of_one_micro_batch):
        yield


@contextmanager
def without_grad_upcast() -> Iterator[None]:
    """The framework rules before FSDP2's fp32 accumulation under a pipeline was costed
    (``training.microbatch_grad_upcast``): torchtitan ran pipelined FSDP plans costed
    without it."""
    import planner.frameworks as frameworks

    rules = [r for r in frameworks.RULES if r[1] != "microbatch_gradient_upcast"]
    with _patched(frameworks, "RULES", rules):
        yield


@contextmanager
def fused_moe_routing() -> Iterator[None]:
    """The framework rules before a MoE layer's token copies were costed as its code makes
    them (``training.moe_routing``): torchtitan ran MoE plans costed with Megatron-Core's
    fused permutation."""
    import planner.frameworks as frameworks

    rules = [r for r in frameworks.RULES if "training.moe_routing" not in r[2]]
    with _patched(frameworks, "RULES", rules):
        yield


def _no_chunk_sorts(routing, dispatcher, local_experts, rows, activation_bytes) -> float:
    """Megatron-Core's all-to-all dispatcher without its sorts by local expert, as costed until
    December 2026."""
    return 0.0


@contextmanager
def without_chunk_sorts() -> Iterator[None]:
    """The step model before the all-to-all dispatcher's sorts of the received rows by local
    expert and back were costed (``planner.cost.moe_routing.chunk_sort_bytes``)."""
    with _patched(layers, "chunk_sort_bytes", _no_chunk_sorts):
        yield


def _no_rank_views(op: str) -> int:
    """ZeRO-3's per-rank lists without the Python loop's views, as costed until December
    2026."""
    return 0


def _no_list_fill(op: str, message_bytes: float) -> float:
    """ZeRO-3's list gathers without their zero-filled buffer, as costed until December
    2026."""
    return 0.0


@contextmanager
def without_rank_views() -> Iterator[None]:
    """The step model before the views DeepSpeed 0.3's Python loop makes to build a ZeRO-3
    call's per-rank list and the zero-fill of a gather's buffer were costed
    (``planner.cost.tables.rank_views``, ``list_fill_bytes``,
    ``EfficiencyModel.view_call_us``): only the per-rank copies."""
    with _patched(tables, "rank_views", _no_rank_views), \
            _patched(tables, "list_fill_bytes", _no_list_fill):
        yield
