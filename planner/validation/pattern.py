"""What a probe must run to reproduce one plan's training step: its communication pattern
with the plan's true message sizes, and its compute as the layers' GEMM shapes.

Everything comes from the cost model's tables (the same numbers ``estimate`` costs), so the
probe measures exactly what was predicted: per layer and micro-batch the linear GEMMs and the
TP collectives (forward, backward, and the forward repeated by full recompute), per micro-batch
the pipeline send/recv, per step the data-parallel buckets (all_reduce, or reduce_scatter and
all_gather with a sharded optimizer) and ZeRO-3's per-layer gathers.

Mixture-of-experts plans run, in their MoE layers (the stage's share of them), the router and
shared-expert GEMMs, the local experts as batched GEMMs of the busiest rank's tokens, and the
EP all-to-alls (with the ETP all-gather and reduce-scatter when etp > 1); the dense layers
run the dense MLP. The routed experts' gradients reduce over the expert data parallel group.
"""

from __future__ import annotations

import math
from typing import TypedDict

from planner.cost.layers import (
    LayerShape,
    attention_gemms,
    expert_gemms,
    linear_gemms,
    tokens_per_gpu,
)
from planner.cost.memory import stage_layer_counts
from planner.cost.ring import uses_torch_ring
from planner.cost.tables import RECOMPUTE, CostTables
from planner.cost.tp_overlap import tp_overlap_share
from planner.cost.ulysses import cp_split, uses_a2a
from planner.result import PlanEstimate
from planner.specs.layout import explicit_layout
from planner.validation.compare import STRATEGY_COMPONENT


class NotProbeable(ValueError):
    pass


class StepPattern(TypedDict):
    """What ``planner.probe.step_worker`` runs (the JSON it reads): the plan's degrees and,
    per layer, micro-batch and step, its kernels and collectives with their true sizes.
    Collective entries are lists: ``[op, bytes, calls]`` (TP forward/backward), ``[bytes,
    ring steps]`` (CP), ``[op, bytes, calls, kind]`` (EP/ETP), ``[op, bytes, component,
    group]`` (ZeRO-3 gathers) and ``[op, bytes, calls, component, group]`` (DP buckets)."""

    dp: int
    dpr: int                                # hybrid sharding's replicas (plan.dp_replicate)
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    m: int                                  # micro-batches per step (gradient accumulation)
    vpp: int
    layers: list[int]                       # layers per pipeline stage
    recompute: str
    dtype: str
    moe_share: float                        # share of the layers that are MoE
    gemms: list[list[int]]                  # [M, N, K] of each linear GEMM of a layer
    moe_gemms: list[list[int]]
    expert_bmm: list[list[int]]             # [count, M, N, K] batched expert GEMMs
    expert_launch: str                      # TrainingSpec.moe_expert_gemm: how they launch
    attn_bmm: list[list[int]]               # [batch, M, N, K] attention core
    head_gemm: list[int] | None             # [M, N, K] of the output layer (None: not on
                                            # this rank's stage)
    head_bwd_passes: int                    # its GEMM's runs in a backward: 2, 3 where full
                                            # recompute reruns the head (recompute_head)
    elementwise: int                        # elements of the memory-bound work per layer
    tp_fwd: list[list]
    tp_bwd: list[list]
    tp_beside: dict[str, dict[str, int]]    # per pass ("F", "B"), per op: a layer's TP
                                            # calls run beside its compute (``tp_beside``)
    cp_fwd: list[list]                      # [bytes, calls] ring steps over "cp", [op,
    cp_bwd: list[list]                      # bytes, calls] all-to-alls over "cp", or either
                                            # with its group ("cpa", "cpr": the hierarchy)
    cpa: int                                # CP ranks an all-to-all of the hierarchy spans
    ep_fwd: list[list]
    ep_bwd: list[list]
    zero3: list[list]
    dp_ops: list[list]
    pp_bytes: float                         # activation bytes of one stage-boundary send


def tp_beside(tables: CostTables, est: PlanEstimate, npn: int) -> dict[str, dict[str, int]]:
    """Per pass, per op: how many of a layer's TP calls run beside its compute, in whole
    calls: the share that TP communication overlap hides (``tp_overlap.tp_overlap_share``) of
    the calls that would block, the forward's, the recomputed forward's again in the backward
    and, with Megatron-Core's backward (``training.async_tensor_model_parallel_allreduce``)
    and sequence parallelism, its output-gradient gathers. Megatron-Core's own backward
    overlaps (the re-gathers beside the dgrad GEMMs, the reduce-scatters or all-reduces beside
    the wgrad GEMMs) run after the compute: the probe's compute is one span a pass, and run
    beside all of it they hid more than the step model's window of those GEMMs (commit
    871cc39 ran them so: ``benchmarks/validation_accuracy.py`` put the held-out step error at
    38-46% there, 25% at the commit before it, on one VM)."""
    t, sp = tables.training, est.sequence_parallel
    if est.tp == 1:
        return {"F": {}, "B": {}}
    ov = tp_overlap_share(t, tables.eff, sp, est.tp, npn)
    rec = RECOMPUTE.index(est.recompute)
    again = 2 if est.recompute == "full" else tables.mlp_recomputed(rec)   # forward repeats
    async_bwd = t.async_tensor_model_parallel_allreduce
    if not sp:
        return {"F": {"all_reduce": round(2 * ov)}, "B": {"all_reduce": round(again * ov)}}

    def split(n_gathers: float, n_scatters: float) -> tuple[int, int]:
        """The share ``ov`` of so many gathers and reduce-scatters, in whole calls, the
        gathers first."""
        total = round(ov * (n_gathers + n_scatters))
        gathers = min(total, math.ceil(n_gathers))
        return gathers, total - gathers

    fwd = split(2, 2)
    bwd = split(again + (2 if async_bwd else 0), again)
    return {"F": {"all_gather": fwd[0], "reduce_scatter": fwd[1]},
            "B": {"all_gather": bwd[0], "reduce_scatter": bwd[1]}}


def step_pattern(est: PlanEstimate, tables: CostTables) -> StepPattern:
    """The pattern ``planner.probe.step_worker`` runs for ``est`` (JSON-ready)."""
    if any(n % est.vpp for n in est.layers_per_stage):
        raise NotProbeable(f"stages of {est.layers_per_stage} layers do not split into "
                           f"{est.vpp} model chunks")
    model, training = tables.model, tables.training
    npn = tables.npn(est.gpus_used)
    key = (est.tp, est.cp, est.micro_batch_size, RECOMPUTE.index(est.recompute),
           int(est.sequence_parallel), npn)
    shape = LayerShape(est.tp, est.cp, est.micro_batch_size, est.recompute,
                       est.sequence_parallel, est.ep, est.etp)
    gemms = [[int(m), max(1, int(n)), max(1, int(k))]
             for m, n, k in linear_gemms(model, training, shape)]
    moe_gemms, expert_bmm = [], []
    if model.is_moe:
        attn, _ = attention_gemms(model, training, shape)
        moe_gemms = [[int(m), max(1, int(n)), max(1, int(k))] for m, n, k in attn]
        for m, n, k, c in expert_gemms(model, training, shape):
            if c == 1:
                moe_gemms.append([max(1, int(m)), max(1, int(n)), max(1, int(k))])
            else:
                expert_bmm.append([int(c), max(1, round(m)), max(1, int(n)), max(1, int(k))])
    # The attention core per head: scores Q K^T (s/cp x s x d) and the weighted sum P V.
    # All-to-all context parallelism: s / c queries on heads / a heads (ulysses.cp_split:
    # the whole sequence on heads / cp heads alone, a ring's chunk within the hierarchy).
    a2a, ring_ranks = cp_split(training, est.cp)
    s_q, s_kv = training.seq_length // ring_ranks, training.seq_length
    heads = max(1, est.micro_batch_size * max(1, model.num_attention_heads // est.tp) // a2a)
    attn_bmm = [[heads, s_q, s_kv, model.d_head], [heads, s_q, model.d_head, s_kv]]
    # The memory-bound kernels (norms, residual adds, activation; softmax without flash
    # attention) as one streaming add that moves the same bytes: read two, write one.
    elementwise = int(tables.work(*key[:5]).elementwise_bytes
                      // (3 * training.activation_bytes))
    tp_fwd, tp_bwd = [], []
    for use in tables.tp_uses(*key):
        # 2 of each op per layer forward; the rest in the backward (with the recomputed
        # forward's and, with sequence parallelism, the input re-gathers).
        tp_fwd.append([use.cost.op, use.cost.message_bytes, 2])
        tp_bwd.append([use.cost.op, use.cost.message_bytes, int(use.calls) - 2])
    for use in tables.saved_input_gathers(*key):
        # A distributed saved input is gathered back before its layer is recomputed.
        tp_bwd.insert(0, [use.cost.op, use.cost.message_bytes, int(use.calls)])
    cp_fwd, cp_bwd = [], []
    if uses_a2a(training, est.cp):
        # All-to-all context parallelism: Q, K, V and O (their gradients backward) each
        # exchanged once a pass, [op, bytes, calls, group]; the recomputed forward's again.
        # In the hierarchy ('a2a+p2p') over the a consecutive CP ranks ("cpa"), then the
        # ring's steps over the strided ones ("cpr").
        uses = tables.cp_uses(*key)
        passes = 2 if est.recompute == "full" else 1
        group = [] if ring_ranks == 1 else ["cpa"]
        exchanges: list[list] = [["all_to_all", u.cost.message_bytes,
                                  int(u.calls) // (passes + 1), *group] for u in uses[:3]]
        cp_fwd, cp_bwd = list(exchanges), exchanges * passes
        if ring_ranks > 1:
            fwd, bwd = uses[3:]
            steps = ring_ranks - 1
            cp_fwd.append(["ring", fwd.cost.message_bytes, steps, "cpr"])
            cp_bwd.append(["ring", bwd.cost.message_bytes, steps, "cpr"])
            if est.recompute == "full":
                cp_bwd.insert(3, ["ring", fwd.cost.message_bytes, steps, "cpr"])
    elif uses_torch_ring(training, est.cp):
        # PyTorch's ring: K,V passed cp - 1 times per pass (an all-gather replayed as those
        # exchanges of one rank's K,V); cp exchanges of the K,V gradients backward.
        kv_use, grads = tables.cp_uses(*key)
        own = kv_use.cost.message_bytes / (est.cp if kv_use.cost.op == "all_gather" else 1)
        cp_fwd = [[own, est.cp - 1]]
        cp_bwd = [[own, est.cp - 1], [grads.cost.message_bytes, est.cp]]
        if est.recompute == "full":
            cp_bwd.insert(0, [own, est.cp - 1])
    elif est.cp > 1:
        fwd, bwd = tables.cp_uses(*key)      # ring steps: K,V forward; K,V and grads backward
        cp_fwd = [[fwd.cost.message_bytes, est.cp - 1]]
        cp_bwd = [[bwd.cost.message_bytes, est.cp - 1]]
        if est.recompute == "full":
            cp_bwd.insert(0, [fwd.cost.message_bytes, est.cp - 1])
    # ZeRO-3: [op, bytes, component, group]: the dense part over dp x cp, the experts over
    # the expert data parallel group.
    zero3 = []
    dsh, dpr = est.dp // est.dp_replicate, est.dp_replicate    # hybrid: one replica's ranks
    if est.zero_stage >= 3:
        uses = tables.zero3_uses(est.tp, est.cp, dsh, npn, est.ep, est.etp)
        groups = ["dp", "dp"] * (dsh * est.cp > 1) + ["edp", "edp"]   # zero3_uses' order
        zero3 = [[u.cost.op, u.cost.message_bytes, STRATEGY_COMPONENT[u.strategy], kind]
                 for u, kind in zip(uses, groups, strict=False)]
    layout = explicit_layout(tuple(est.layers_per_stage), est.vpp, est.mtp_standalone,
                             tables.model.mtp_num_layers)
    p_stage = tables.largest_stage_params(est.tp, layout)
    n_stage = max(stage_layer_counts(tables.model, layout))
    # (Hybrid sharding's all-reduce of the sharded gradients runs over the replicas, "dpr".)
    dp_ops = [[u.cost.op, u.cost.message_bytes, int(u.calls), STRATEGY_COMPONENT[u.strategy],
               "dpr" if u.replica else "dp"]
              for u in tables.dp_uses(est.tp, est.cp, dsh, est.zero_stage, p_stage, npn,
                                      layer_params=tables.stage_layer_params(est.tp, n_stage),
                                      replicas=dpr)]
    dp_ops += [[u.cost.op, u.cost.message_bytes, int(u.calls), STRATEGY_COMPONENT[u.strategy],
                "dpr" if u.replica else "edp"]
               for u in tables.expert_dp_uses(est.tp, est.cp, dsh, est.zero_stage, npn,
                                              n_stage, est.ep, est.etp, dpr)]
    ep_fwd, ep_bwd = [], []
    for use in tables.ep_uses(*key, est.ep, est.etp):
        kind = "ep" if use.cost.op == "all_to_all" else "etp"
        per_pass = 2 if use.cost.op == "all_to_all" else 1     # dispatch and combine
        ep_fwd.append([use.cost.op, use.cost.message_bytes, per_pass, kind])
        ep_bwd.append([use.cost.op, use.cost.message_bytes, int(use.calls) - per_pass, kind])
    pp_bytes = 0.0
    if est.pp > 1:
        pp_bytes = tables.p2p_use(est.tp, est.cp, est.dp, est.pp, est.micro_batch_size,
                                  est.sequence_parallel).cost.message_bytes
    T = tokens_per_gpu(shape, training)
    return {
        "ep": est.ep, "etp": est.etp, "moe_share": model.moe_share, "moe_gemms": moe_gemms,
        "expert_bmm": expert_bmm, "expert_launch": training.moe_expert_gemm,
        "ep_fwd": ep_fwd, "ep_bwd": ep_bwd,
        "dp": est.dp, "dpr": dpr, "tp": est.tp, "pp": est.pp, "cp": est.cp, "cpa": a2a,
        "m": est.grad_accum_steps,
        "layers": list(est.layers_per_stage), "recompute": est.recompute,
        "gemms": gemms, "attn_bmm": attn_bmm, "elementwise": elementwise, "vpp": est.vpp,
        "dtype": training.precision,
        "head_gemm": [T, max(1, model.vocab_size // est.tp), model.hidden_size],
        "head_bwd_passes": 3 if est.recompute == "full" and training.recompute_head else 2,
        "tp_fwd": tp_fwd, "tp_bwd": tp_bwd, "cp_fwd": cp_fwd, "cp_bwd": cp_bwd,
        "tp_beside": tp_beside(tables, est, npn),
        "zero3": zero3, "dp_ops": dp_ops, "pp_bytes": pp_bytes,
    }
