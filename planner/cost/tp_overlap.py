"""Tensor parallelism's communication overlap (``TrainingSpec.tp_comm_overlap``): how much of
a layer's TP collectives it hides, and the memory its buffers take.

Megatron-LM's ``--tp-comm-overlap`` hands the sequence-parallel all-gathers and reduce-scatters
to Transformer Engine's userbuffers, which split each into chunks pipelined with the GEMM that
consumes or produces it (ring exchange for the QKV and fc1 gathers, a pipelined reduce-scatter
for the projection and fc2 outputs, bulk overlap in the backward). Megatron-LM refuses it
without ``--sequence-parallel`` (megatron/training/arguments.py: "Tensor parallel
communication/GEMM overlap can happen only when sequence parallelism is enabled"), and the
userbuffers address the TP ranks' memory directly, over one NVLink domain (Transformer
Engine's ``initialize_ub``: CUDA multicast, or CUDA IPC with ``UB_SKIPMC=1``). torchtitan's
AsyncTP (``parallelism.enable_async_tensor_parallel``) micro-pipelines the same collectives
through symmetric memory, under torch.compile only. So the overlap is costed on
sequence-parallel plans whose TP group sits inside a node: ``tp_overlap_share`` of the
collectives that would block (the forward's, and where TP's backward runs as Megatron-Core's,
``training.async_tensor_model_parallel_allreduce``, its output-gradient gathers) hidden under
the layer's GEMMs, which run ``overlap_slowdown`` slower beside them; the rest,
and every other plan's, stays exposed as ``tables.CostTables.layer`` costs it.

Memory (``userbuffer_bytes``): ``initialize_ub`` registers one buffer per overlapped GEMM of
its default methods, 4 ring-exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad), 2
pipelined (proj_fprop, fc2_fprop) and 4 bulk (qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad), each
of Megatron-LM's shape ``[(seq_length * micro_batch_size) // context_parallel_size,
hidden_size]`` (megatron/training/initialize.py ``_initialize_tp_communicators``); the
all-gather buffers (qkv_fprop, qkv_dgrad, proj_dgrad, fc1_fprop, fc1_dgrad, fc2_dgrad) hold
fp8 under an fp8 recipe, the others the 16-bit activations (TransformerEngine
transformer_engine/pytorch/module/base.py, ``layers_all_gather_overlap``). torchtitan's AsyncTP
allocates one symmetric-memory workspace for the TP group (``get_symm_mem_workspace``, reused
by every fused op and grown to the largest request; torch/distributed/_symmetric_memory/
__init__.py): a rank's shard of the gathered input (``_pipelined_all_gather_and_consume``) or
two of its output chunks, double-buffered (``_pipelined_produce_and_all2all``, the
matmul-reduce-scatter), so ``2 * (seq_length * micro_batch_size) // (cp * tp) * hidden_size``
16-bit elements (``training.tp_comm_overlap`` 'async_tp', against 'te').
"""

from __future__ import annotations

import numpy as np

from planner.cost.efficiency import TP_COMM_OVERLAP_SHARE, EfficiencyModel
from planner.specs import ModelSpec, TrainingSpec

# Transformer Engine's userbuffers (module docstring): all-gather and other buffers.
GATHER_BUFFERS = 6
OTHER_BUFFERS = 4
# torchtitan's AsyncTP workspace, in a rank's shards of the activations.
SYMMETRIC_SHARDS = 2


def overlap_runs(training: TrainingSpec, tp, sp, npn):
    """Whether ``training.tp_comm_overlap`` runs on plans of ``tp`` ranks with sequence
    parallelism ``sp`` placed ``npn`` ranks a node (scalars or arrays): a kind asked for, TP,
    sequence parallelism, and the TP group inside one node's NVLink domain. What the step
    model costs and what the launch files turn on (``LaunchContext.tp_overlap``)."""
    tp = np.asarray(tp)
    return (training.tp_comm_overlap != "none") & (tp > 1) & (np.asarray(sp) > 0) & (tp <= npn)


def tp_overlap_share(training: TrainingSpec, eff: EfficiencyModel, sp: bool, tp: int,
                     npn: int) -> float:
    """The share of a layer's blocking TP collectives hidden under its GEMMs for a plan of
    ``tp`` ranks, with sequence parallelism or not (``sp``), placed ``npn`` ranks a node:
    ``efficiency.tp_comm_overlap`` where set (any TP plan, as before the training setting
    existed); else, where ``training.tp_comm_overlap`` runs the overlap, 0.8
    (``TP_COMM_OVERLAP_SHARE``) on sequence-parallel plans whose TP group sits inside a node
    and 0 on the others; else 0."""
    if eff.tp_comm_overlap is not None:
        return eff.tp_comm_overlap
    if overlap_runs(training, tp, sp, npn):
        return TP_COMM_OVERLAP_SHARE
    return 0.0


def userbuffer_bytes(model: ModelSpec, training: TrainingSpec, tp, sp, mbs, cp, npn):
    """Bytes of the overlap's buffers on each GPU (module docstring) for plans of ``tp`` ranks
    with sequence parallelism ``sp`` (0/1), micro-batch ``mbs`` and ``cp`` context-parallel
    ranks placed ``npn`` a node (scalars or arrays): Transformer Engine's ten userbuffers
    ('te'), or PyTorch's symmetric-memory workspace ('async_tp'); 0 where the overlap does not
    run (``training.tp_comm_overlap`` 'none', tp 1, no sequence parallelism, or a TP group
    across nodes)."""
    tp, mbs, cp = (np.asarray(x) for x in (tp, mbs, cp))
    on = overlap_runs(training, tp, sp, npn)
    elems = (training.seq_length * mbs // cp) * model.hidden_size
    act = training.activation_bytes
    if training.tp_comm_overlap == "async_tp":
        return np.where(on, SYMMETRIC_SHARDS * elems // np.maximum(tp, 1) * act, 0.0)
    gather = 1 if training.precision in ("fp8", "fp4") else act
    return np.where(on, elems * (GATHER_BUFFERS * gather + OTHER_BUFFERS * act), 0.0)
