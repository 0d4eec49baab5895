"""Memory formulas of one pipeline stage's GPU (scalars or numpy arrays alike).

Model states (Rajbhandari et al., ZeRO, SC'20, section 3.1 and 5): per parameter, 16-bit
weights (``param_bytes``), gradients (``grad_bytes``; Megatron keeps fp32 main grads) and K bytes
of optimizer state (12 for mixed-precision Adam: fp32 master, momentum, variance). ZeRO stage 1
shards the optimizer states over the data-parallel group, stage 2 also the gradients, stage 3
also the weights:

    stage 0: (2 + g + K) P     stage 1: (2 + g) P + K P / Nd
    stage 2: 2 P + (g + K) P / Nd     stage 3: (2 + g + K) P / Nd

Nd is the ranks ZeRO shards over: dp x cp, or one replica's under hybrid sharding
(``plan.dp_replicate``: dp / dp_replicate x cp; PyTorch HSDP, MiCS).

Activations (Korthikanti et al., MLSys'23): per layer and micro-batch from ``layers.py``, times
the micro-batches a stage holds in flight: stage i of a 1F1B pipeline holds min(p - i, m); with
v interleaved chunks it holds (2 (p - i - 1) + (v - 1) p + 1) chunk-micro-batches of 1/v of
its layers, i.e. p + (p - 1)/v micro-batches on the first stage (Narayanan et al. SC'21). ZeRO-3
holds the gathered weights of the layer being computed and of the layers prefetched (plus one
layer's unsharded gradients before they are reduce-scattered). On top of the stored
activations a stage holds, one at a time, what a pass builds and frees: under full recompute
one layer's complete activations while that layer is recomputed, and on the last stage the
loss at its peak (``layers.loss_peak_bytes``: Korthikanti et al.'s fp32 logits, 4 s b V / t,
are what Megatron's loss keeps between its forward and its backward; at its peak it also
holds the 16-bit logits, PyTorch's eager loss a second fp32 tensor), whichever is larger: the
loss's buffers are gone before the backward reaches the layers (``batch.compose``). A fixed
reserve and a fragmentation share of the activations are added (``EfficiencyModel``).
"""

from __future__ import annotations

import numpy as np

from planner.specs import ModelSpec, TrainingSpec
from planner.specs.layout import Layout

GIB = 2**30


def stage_params(model: ModelSpec, tp, pp, layers, first, last, mtp=None):
    """Parameters one GPU of a stage holds before ZeRO sharding (TP splits them), the routed
    experts apart (``expert_stage_params``). ``first``, ``last`` and ``mtp`` are 0/1: the
    first stage holds the embedding; the last the LM head, or, with tied embeddings across a
    pipeline, its own copy of the embedding (Megatron keeps both in sync); the stage of the
    multi-token prediction modules (default: the last) their weights and, in a pipeline,
    the embedding they read."""
    pp = np.asarray(pp)
    mtp = last if mtp is None else mtp
    head = np.where(pp > 1, model.lm_head_params or model.embedding_params,
                    model.lm_head_params)
    out = layers * model.nonexpert_params_per_layer + first * model.embedding_params + last * head
    if model.mtp_num_layers:
        # Their embedding: the first stage's own, or the last stage's tied copy, or one more.
        embed = ((pp > 1) * (1 - np.asarray(first)) * model.embedding_params
                 * (1 - int(model.tied_embeddings) * np.asarray(last)))
        out = out + mtp * (model.mtp_nonexpert_params + embed)
    return out / tp


def expert_stage_params(model: ModelSpec, layers, ep, etp, mtp=0):
    """Routed-expert parameters one GPU of a stage holds: its layers' experts (and on the
    stage of the MTP modules, ``mtp`` 1, theirs) split over ep ranks, each expert's width over
    etp (their ZeRO sharding runs over the expert data parallel group, tp cp dp / (ep etp))."""
    return ((layers * model.expert_params_per_layer + mtp * model.mtp_expert_params)
            / (np.asarray(ep) * np.asarray(etp)))


def stage_layer_counts(model: ModelSpec, layout: Layout) -> tuple[int, ...]:
    """Transformer layers each stage runs per micro-batch: its decoder layers, and on the
    stage of the MTP modules theirs as well."""
    return tuple(n + (model.mtp_num_layers if i == layout.mtp_rank else 0)
                 for i, n in enumerate(layout.stages))


def model_state_bytes(params, training: TrainingSpec, zero_stage, nd, upcast=False):
    """(weights, gradients, optimizer states) bytes for ``params`` parameters under ZeRO
    ``zero_stage`` over ``nd`` data-parallel ranks (Rajbhandari et al. SC'20, Figure 1).
    ``upcast`` (per plan): FSDP2's unsharded gradients accumulate in the reduce dtype under a
    pipeline (``TrainingSpec.microbatch_grad_upcast``), so they take that dtype's bytes where
    it is the wider."""
    z = np.asarray(zero_stage)
    weights = params * training.param_bytes / np.where(z >= 3, nd, 1)
    grad_bytes = np.where(upcast, max(training.grad_bytes, training.grad_reduce_bytes),
                          training.grad_bytes)
    grads = params * grad_bytes / np.where(z >= 2, nd, 1)
    optim = params * training.optimizer_state_bytes / np.where(z >= 1, nd, 1)
    return weights, grads, optim


def in_flight_microbatches(pp, vpp, stage, m, group=None):
    """Micro-batches (in units of the stage's whole layer set) whose activations are held:
    the warm-up forwards plus the one in flight. Interleaved: (p - s - 1) * 2 + (v - 1) * g
    warm-up chunk forwards with micro-batch groups of g (default p; Megatron-LM schedules.py)."""
    pp, vpp = np.asarray(pp), np.asarray(vpp)
    g = pp if group is None else np.asarray(group)
    chunks = 2 * (pp - stage - 1) + (vpp - 1) * g + 1
    return np.where(vpp == 1, np.minimum(pp - stage, m), np.minimum(chunks, m * vpp) / vpp)
