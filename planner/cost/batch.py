"""The step model: step time and memory of many plans at once (numpy arrays), from memoised
components. ``estimate`` runs it on one plan, the search on every plan of its space.

One optimizer step, per pipeline stage s and micro-batch (layers L_s):

    forward  F_s = L_s * period_f + embedding (first stage) + LM head and loss (last stage)
    backward B_s = L_s * period_b + the same, backward

where the last stage's L_s counts the k multi-token prediction modules' layers too, and its
head and loss run 1 + k times, beside each module's own projection (``CostTables.mtp``).
    t_s      = F_s + B_s + host overhead per micro-batch and chunk (+ ZeRO-2's exposed reduce-scatter)

A layer's period is its compute plus the communication it exposes (``tables.LayerCost``: TP's
collectives on the critical path or beside the GEMMs that hide them, CP's ring exchanges beside
the attention blocks). With ZeRO-3 the layer's weights are all-gathered ``P`` layers ahead on
the communication stream (and again for the backward, with the gradients' reduce-scatter), so a
layer whose gather g outlasts its compute c waits (max-plus over identical layers):

    period = max(c + k min(c, g), g)            P >= 1
    period = c + k min(g, P c) + max(0, g - P c) P < 1 (only P c of compute to hide behind)

k being ``overlap_slowdown``; the first gather and the last reduce-scatter of every
micro-batch are exposed. ZeRO-2 reduce-scatters every micro-batch's gradients bucket by bucket
during its backward.

The pipeline (``pipeline.makespan``, checked against the event simulation in
``pipeline.simulate``): the slowest stage runs all m micro-batches, the others' fill and drain
is the bubble, v times smaller with interleaving, (p - 1) t whenever m < p:

    step = m t_max + bubble + send/recv + exposed DP reduction + exposed weight gather + optimizer

The gradient reduction (ZeRO 0/1, once per step) runs in buckets while the last micro-batch's
backward proceeds: bucket k of n is ready at k/n of that backward B and the buckets queue on
one stream, so the step ends max(tau, n tau - (n - 1) B / n) after the backward (the
max-plus recurrence e_k = max(e_(k-1), k B / n) + tau solved in closed form). Under
``training.grad_reduce_after_last_backward`` (torch.distributed.pipelining's FSDP, DeepSpeed's
pipeline engine) a pipelined ZeRO 1-3 plan without interleaving reduces as one part once the
backward has ended: all n tau exposed. The ZeRO-1/2
weight all-gather overlaps the next forward the same way. Under hybrid sharding
(``plan.dp_replicate``) ZeRO shards, gathers and reduce-scatters over one replica's ranks, and
each bucket's shard is all-reduced across the replicas once per step in the same window (after
its reduce-scatter under ZeRO-1; alone under ZeRO-2/3), narrowed by the NIC time the last
backward's ZeRO-3 gathers and reduce-scatters across nodes hold, as by its ring-attention
exchanges. Interleaved over v model chunks, the
schedule releases a chunk's gradients once the last micro-batch group's backward has left it,
chunk v - 1 first (Megatron-Core's interleaved schedule launches each chunk's reduction there:
``grad_sync_func`` at ``is_last_microbatch_for_model_chunk``), and needs a chunk's weights at
the first group's first forward of it (``param_sync_func``): the reduction runs as v parts of
n tau / v, the j-th ready at j / v of max(g_last, p) micro-batches' backward B, g_last the
last group's micro-batches (m - g floor((m - 1) / g) with groups of g), and the gather
likewise over max(min(m, g), p) forwards; max(g, p), since fewer micro-batches than stages
leave a chunk's backwards (and forwards) on a stage one pipeline traversal apart. Both equal
the replay of ``pipeline.simulate``'s chunk release (need) times on every stage
(tests/test_cost.py). Stages are grouped into at most four classes (first, last, and the
middle stages by layer count), since stages of a class differ only in how many micro-batches
they hold; each class is costed at its earliest stage.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from planner.cost.keyed import gather_rows as _gather
from planner.cost.keyed import unique_rows
from planner.cost.layers import hbm_bytes_per_s
from planner.cost.memory import (
    GIB,
    expert_stage_params,
    in_flight_microbatches,
    model_state_bytes,
    stage_params,
)
from planner.cost.pipeline import exchanges, makespan
from planner.cost.tables import RECOMPUTE, CostTables
from planner.cost.tp_overlap import userbuffer_bytes
from planner.specs import ParallelPlan
from planner.specs.layout import Layout, default_layout
from planner.specs.placement import group_span, launch_layout
from planner.specs.plan import microbatch_groups, plan_key
from planner.specs.training import reduced_after_backward

MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "zero_buffers", "reserved")
BREAKDOWN_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm",
                  "pipeline_bubble", "dp_comm", "zero_comm", "optimizer", "overhead", "offload")
PLAN_FIELDS = ("dp", "tp", "pp", "cp", "vpp", "mbs", "rec", "zero", "sp", "rnl", "ep", "etp",
               "off", "rep")
# ``microbatch_grad_copy``: bytes a parameter (read the 16-bit gradient, write and read its
# fp32 cast, read and write the fp32 main gradient) and the parameter tensors of a GPT layer
# (weights and biases of the fused QKV, the output projection, the two MLP GEMMs and the two
# layer norms), two kernels each (the cast and the add).
GRAD_COPY_BYTES = 18
LAYER_PARAM_TENSORS = 12
# ``microbatch_grad_upcast``: bytes a parameter of FSDP2's fp32 accumulation of a micro-batch's
# 16-bit unsharded gradient (``FSDPParam.accumulate_unsharded_grad_if_needed``: read the fp32
# accumulator and the 16-bit gradient, write the accumulator), one kernel a parameter tensor;
# the first micro-batch's cast (``to_accumulated_grad_if_needed``: read 2, write 4) is charged
# the same.
GRAD_UPCAST_BYTES = 10
# Columns of a layer's row (``compose.layer_row``), and of the head's: the head and the
# embedding (``compose.head_row``), then one MTP module's (``CostTables.mtp``), then the head's
# forward without the loss (``HeadWork.rerun_s``, what ``recompute_head`` reruns), then the
# memory at the loss's peak (``HeadWork.loss_peak_bytes``).
LAYER_COLUMNS = 15
HEAD_COLUMNS = 12
HEAD_RERUN = 10
HEAD_LOSS_PEAK = 11


@dataclass(frozen=True)
class PlanArrays:
    """Plans as parallel integer arrays (rec: 0 none, 1 selective, 2 full; sp: 0/1; rnl: with
    full recompute, the layers recomputed per model chunk, 0 for all of them; off: layers whose
    activations are offloaded to host memory; rep: hybrid sharding's replicas, 1 without)."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    vpp: np.ndarray
    mbs: np.ndarray
    rec: np.ndarray
    zero: np.ndarray
    sp: np.ndarray
    rnl: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    off: np.ndarray
    rep: np.ndarray

    def __len__(self) -> int:
        return len(self.dp)

    @classmethod
    def from_plans(cls, plans: list[ParallelPlan]) -> PlanArrays:
        cols: dict[str, list[int]] = {f: [] for f in PLAN_FIELDS}
        for p in plans:
            for f, v in zip(PLAN_FIELDS, plan_key(p), strict=True):
                cols[f].append(v)
        return cls(**{f: np.asarray(v, dtype=np.int64) for f, v in cols.items()})

    def data_sharded(self, moe: bool) -> np.ndarray:
        """Plans whose weights ZeRO can shard: more than one data-parallel replica of the
        dense part (dp x cp), or, in a MoE model, of the experts (the expert data parallel
        group dp x tp x cp / (ep x etp))."""
        return (self.dp * self.cp > 1) | (moe & (self.dp * self.tp * self.cp
                                                 > self.ep * self.etp))

    def take(self, idx: np.ndarray) -> PlanArrays:
        return PlanArrays(**{f: getattr(self, f)[idx] for f in PLAN_FIELDS})

    def plan(self, i: int, layers_per_stage: tuple[int, ...] | None = None) -> ParallelPlan:
        return ParallelPlan(
            dp=int(self.dp[i]), tp=int(self.tp[i]), pp=int(self.pp[i]), cp=int(self.cp[i]),
            vpp=int(self.vpp[i]), micro_batch_size=int(self.mbs[i]),
            recompute=RECOMPUTE[int(self.rec[i])], zero_stage=int(self.zero[i]),
            sequence_parallel=bool(self.sp[i]), layers_per_stage=layers_per_stage,
            recompute_num_layers=int(self.rnl[i]) or None, ep=int(self.ep[i]),
            etp=int(self.etp[i]), cpu_offload_layers=int(self.off[i]),
            dp_replicate=int(self.rep[i]),
        )

    @property
    def dp_shard(self) -> np.ndarray:
        """Data-parallel ranks of one replica (all of dp without hybrid sharding)."""
        return self.dp // self.rep


@dataclass
class BatchCost:
    """Per-plan results, arrays of len(plans)."""

    step_time_s: np.ndarray
    breakdown: dict[str, np.ndarray]
    memory_bytes: np.ndarray        # most loaded GPU
    memory_stage: np.ndarray        # its pipeline stage
    memory_parts: dict[str, np.ndarray]
    model_flops: np.ndarray
    hardware_flops: np.ndarray
    m: np.ndarray
    # Per stage class (n, C), for the layer-assignment model: time per micro-batch and memory
    # of the class's stage, and what one more layer adds to each.
    class_time: np.ndarray
    class_memory: np.ndarray
    layer_time: np.ndarray
    class_layer_memory: np.ndarray
    # A lower bound on the step time of any split of the layers over the stages (plans that
    # may be split: see ``compose(any_split=True)``); the step time for the others.
    split_bound: np.ndarray
    # Per plan: a layer's forward and backward periods, the fixed costs of a stage's
    # micro-batch, the embedding and head, one send/recv (the predicted trace draws them).
    detail: dict[str, np.ndarray] | None = None
    # Per plan, the terms the search bounds each split with (``split_terms``): a stage of n
    # layers takes n * layer + its fixed time (first, middle, last; ZeRO-2's per-micro-batch
    # reduction left out) and needs n * (state + act * in-flight micro-batches) + its fixed
    # memory (first, middle, last) bytes; "total" is all stages' times together, "extra" the
    # send/recv.
    split_terms: dict[str, np.ndarray] | None = None


def _layout_rows(layout: Layout) -> list[tuple]:
    """Stage classes of a layout: (layers, is_first, is_last, count, first index)."""
    p = layout.pp
    st = layout.stages
    rows = [(st[0], 1, 1 if p == 1 else 0, 1, 0)]
    if p > 1:
        rows.append((st[-1], 0, 1, 1, p - 1))
        middle = st[1:-1]
        for n_layers in sorted(set(middle), reverse=True):
            where = [i + 1 for i, x in enumerate(middle) if x == n_layers]
            rows.append((n_layers, 0, 0, len(where), where[0]))
    return rows


def stage_classes(plans: PlanArrays, num_layers: int, explicit: Layout | None = None,
                  stages: np.ndarray | None = None):
    """(layers, is_first, is_last, count, first_index) arrays of shape (n, C). ``stages``
    (n, P): each plan's own layers per stage (0 past its pp), one class per stage."""
    if stages is not None:
        idx = np.arange(stages.shape[1])[None, :]
        pp = _col(plans.pp)
        return (stages.astype(float), (idx == 0).astype(float) * np.ones_like(pp),
                (idx == pp - 1).astype(float), (idx < pp).astype(float),
                idx.astype(float) * np.ones_like(pp))
    if explicit is not None:     # one class per stage
        p = explicit.pp
        idx = np.arange(p)[None, :]
        return (np.array([explicit.stages], dtype=float), (idx == 0).astype(float),
                (idx == p - 1).astype(float), np.ones((1, p)), idx.astype(float))
    key = plans.pp * 100_000 + plans.vpp
    table = {}
    for k in np.unique(key):
        p, v = int(k // 100_000), int(k % 100_000)
        layout = default_layout(num_layers, p, v)
        rows = _layout_rows(layout) if layout is not None else [(0, 0, 0, 0, 0)]
        table[int(k)] = rows + [(0, 0, 0, 0, 0)] * (4 - len(rows))
    uniq, inv = np.unique(key, return_inverse=True)
    arr = np.array([table[int(k)] for k in uniq], dtype=float)[inv.reshape(-1)]   # (n, 4, 5)
    return arr[..., 0], arr[..., 1], arr[..., 2], arr[..., 3], arr[..., 4]


def _per_layer(LW, LW0, W, j):
    """Column j of the layer costs for each stage class, (n, C): under block recompute a
    class's layers mix the full-recompute row (share W) and the no-recompute row LW0; (n, 1)
    when no plan uses it (W None)."""
    if W is None:
        return _col(LW[:, j])
    return _col(LW0[:, j]) + W * _col(LW[:, j] - LW0[:, j])


def _col(a):
    """A per-plan array as a column, to broadcast against (n, classes) arrays."""
    return a.astype(float)[:, None] if np.ndim(a) else a


def zero3_period(c, g, prefetch: float, k: float):
    """Per-layer time when the layer's gather (and reduce-scatter) ``g`` runs ``prefetch``
    layers ahead of compute ``c`` on one stream (see the module docstring)."""
    if prefetch >= 1:
        return np.maximum(c + k * np.minimum(c, g), g)
    window = prefetch * c
    return c + k * np.minimum(g, window) + np.maximum(0.0, g - window)


def bucket_tail(tau, n, window, k: float):
    """Exposed time of n buckets of tau each, bucket j ready at j/n of ``window`` of compute
    (the closed form of the recurrence in the module docstring), plus the compute's slowdown
    while they overlap it."""
    n = np.maximum(n, 1)
    tail = np.maximum(tau, n * tau - (n - 1) / n * window)
    return tail + k * np.minimum(n * tau - tail, window)


def chunk_windows(n, m, pp, v, group):
    """(parts, backward micro-batches, forward micro-batches) of a step's once-per-step
    gradient reduction of n buckets and its weight gather (module docstring): without
    interleaving the n buckets within one micro-batch's backward and forward; interleaved, v
    parts (one per model chunk) over max(g_last, p) and max(min(m, g), p) micro-batches,
    g_last = m - g floor((m - 1) / g). At least one part (no buckets: no data parallelism)."""
    last = m - group * ((m - 1) // group)
    inter = np.asarray(v) > 1
    return (np.maximum(np.where(inter, v, n), 1), np.where(inter, np.maximum(last, pp), 1),
            np.where(inter, np.maximum(np.minimum(m, group), pp), 1))


@dataclass(frozen=True)
class ModelStates:
    """Model-state memory of each plan's stage classes, (n, C) but for ``layer_local`` and
    ``per_layer_state`` (n, 1) and ``splittable`` and ``floor`` (n,): parameters (the routed
    experts apart), weights, gradients, optimizer states, ZeRO-3's buffers and their sum
    (-inf for absent classes); a layer's parameters and states on one GPU; whether the plan's
    layers may move between stages; and the lower bound on its memory that the states give
    (for a splittable plan, under any split)."""

    params: np.ndarray
    experts: np.ndarray
    weights: np.ndarray
    grads: np.ndarray
    optim: np.ndarray
    zero_buf: np.ndarray
    states: np.ndarray
    layer_local: np.ndarray
    per_layer_state: np.ndarray
    splittable: np.ndarray
    floor: np.ndarray


def model_states(plans: PlanArrays, tables: CostTables, classes, mtp_at, any_split: bool,
                 split_interleaved: bool) -> ModelStates:
    """``ModelStates`` of the plans' stage classes (``stage_classes``), the MTP modules on the
    classes ``mtp_at`` marks (ZeRO: Rajbhandari et al., ``memory.model_state_bytes``). They
    depend on tp, pp, vpp, ZeRO stage, the ranks ZeRO shards over (one replica's dp x cp), ep,
    etp and whether block recompute is set: ``state_key``."""
    model, training = tables.model, tables.training
    tp, pp, cp, v, zero = plans.tp, plans.pp, plans.cp, plans.vpp, plans.zero
    nd = plans.dp_shard * cp
    L, first, last, count, _ = classes
    present = count > 0
    params_c = stage_params(model, _col(tp), _col(pp), L, first, last, mtp_at)
    edp = plans.dp_shard * tp * cp // (plans.ep * plans.etp)     # one replica's
    # FSDP2 under a pipeline: unsharded gradients accumulated in its reduce dtype
    # (``microbatch_grad_upcast``), in memory here and, per micro-batch, in time (``_times``).
    upcast = grad_upcast(plans, training)
    weights, grads, optim = model_state_bytes(params_c, training, _col(zero), _col(nd),
                                              _col(upcast))
    layer_local = model.nonexpert_params_per_layer / _col(tp)
    per_layer_state = sum(model_state_bytes(layer_local, training, _col(zero), _col(nd),
                                            _col(upcast)))
    if model.is_moe:     # the routed experts, sharded over the expert data parallel group
        experts_c = expert_stage_params(model, L, _col(plans.ep), _col(plans.etp), mtp_at)
        w_e, g_e, o_e = model_state_bytes(experts_c, training, _col(zero), _col(edp),
                                          _col(upcast))
        weights, grads, optim = weights + w_e, grads + g_e, optim + o_e
        expert_layer = expert_stage_params(model, 1, _col(plans.ep), _col(plans.etp))
        layer_local = layer_local + expert_layer
        per_layer_state = per_layer_state + sum(
            model_state_bytes(expert_layer, training, _col(zero), _col(edp), _col(upcast)))
    else:
        experts_c = np.zeros_like(L)
    # ZeRO-3 holds the layer in use and those prefetched, and one layer's full gradients.
    z3_layers = 1 + max(1.0, training.zero3_prefetch_layers)
    zero_buf = np.where(_col(zero) >= 3, layer_local
                        * (z3_layers * training.param_bytes + training.grad_bytes), 0.0)
    zero_buf = zero_buf * np.ones_like(L)
    states = np.where(present, weights + grads + optim + zero_buf, -np.inf)
    # Model states alone are a lower bound: plans they already overflow need no more work.
    # For plans whose layers may move between stages, the bound holds for every split: the
    # stages share the states, and the first holds a layer besides its own, the last too
    # with virtual stages (without, its head may stand alone: layout.head_alone_splits).
    splittable = ((pp > 1) & (plans.rnl == 0) & ((v == 1) | split_interleaved) if any_split
                  else np.zeros(len(plans), dtype=bool))
    floor = states.max(axis=1)
    if splittable.any():
        fixed = np.where(present, states - L * per_layer_state, 0.0)
        share = (np.where(present, states, 0.0) * count).sum(axis=1) / pp
        ends = _ends_bound((fixed * first).sum(axis=1), (fixed * last).sum(axis=1),
                           per_layer_state[:, 0], v)
        # (The default layout may leave the first and last stage no layer: it counts too.)
        floor = np.where(splittable, np.minimum(floor, np.maximum(share, ends)), floor)
    return ModelStates(params_c, experts_c, weights, grads, optim, zero_buf, states, layer_local,
                       per_layer_state, splittable, floor)


def compose(plans: PlanArrays, tables: CostTables,
            layers_per_stage: tuple[int, ...] | None = None,
            memory_cap: float | None = None, *, layout: Layout | None = None,
            group: int | None = None, stages: np.ndarray | None = None,
            any_split: bool = False, split_interleaved: bool = False,
            memory_only: bool = False) -> BatchCost:
    """``_compose``'s cost of every plan. Under a ``memory_cap`` with the default layouts (the
    search's call, where most plans of a large space overflow memory), the model states, which
    depend on a few plan variables (``state_key``), are computed once per distinct key first;
    the plans they already put over the cap skip ``_compose`` and get what it gives such plans
    (``_merge_dropped``): the same arrays as costing them all, for a fraction of the work."""
    defaults = layout is None and layers_per_stage is None and stages is None and group is None
    if (memory_cap is not None and np.isfinite(memory_cap) and not memory_only and defaults
            and len(plans) > 1):
        keys, inv = unique_rows(state_key(plans))
        kp = plans.take(_first_rows(inv, len(keys)))
        classes = stage_classes(kp, tables.model.num_layers)
        st = model_states(kp, tables, classes, classes[2], any_split, split_interleaved)
        reserve = tables.eff.memory_reserve_gib * GIB
        dropped = ~(st.floor + reserve <= memory_cap)[inv]
        keep = np.flatnonzero(~dropped)
        if len(keep) < len(plans):
            rows = inv[keep]            # the kept plans' keys: their classes and states
            known = (tuple(c[rows] for c in classes),
                     ModelStates(**{f.name: getattr(st, f.name)[rows] for f in fields(st)}))
            sub = _compose(plans.take(keep), tables, memory_cap=memory_cap, any_split=any_split,
                           split_interleaved=split_interleaved,
                           known=known) if len(keep) else _no_plans()
            return _merge_dropped(plans, tables, sub, keep, st, classes, inv)
    return _compose(plans, tables, layers_per_stage, memory_cap, layout=layout, group=group,
                    stages=stages, any_split=any_split, split_interleaved=split_interleaved,
                    memory_only=memory_only)


def state_key(plans: PlanArrays) -> np.ndarray:
    """The plan variables the model states depend on (``model_states``), (n, 8)."""
    return np.stack([plans.tp, plans.pp, plans.vpp, plans.zero, plans.dp_shard * plans.cp,
                     plans.ep, plans.etp, (plans.rnl > 0).astype(np.int64)], 1)


def _first_rows(inv: np.ndarray, n: int) -> np.ndarray:
    """One row index per distinct key (``unique_rows``'s inverse ``inv``): any of its rows,
    since the key decides what is computed from it."""
    out = np.empty(n, dtype=np.int64)
    out[inv] = np.arange(len(inv))
    return out


def _merge_dropped(plans: PlanArrays, tables: CostTables, sub: BatchCost, keep: np.ndarray,
                   st: ModelStates, classes, inv: np.ndarray) -> BatchCost:
    """The ``BatchCost`` of all plans from ``sub`` (that of the plans ``keep``) and the model
    states of the others' keys (``st``, ``classes``; plan i's is row ``inv[i]``), which is
    what ``_compose`` gives a plan its states put over the cap: memory its states and the
    reserve (no activations costed: a lower bound) where they peak, no step time (+inf),
    breakdown or layer time (nan), no FLOPs (0); its classes' times -inf, their memory the
    states and the reserve, a layer's memory its states alone; no split terms (nan: none
    is split), and none at all when no plan is kept."""
    reserve = tables.eff.memory_reserve_gib * GIB
    present = classes[3] > 0
    total = np.where(present, st.weights + st.grads + st.optim + st.zero_buf + 0.0 + reserve,
                     -np.inf)
    pk = np.argmax(total, axis=1)
    kr = np.arange(len(total))
    width = max(total.shape[1], sub.class_time.shape[1])

    def rows(kept: np.ndarray, of_key: np.ndarray | float, fill: float = np.nan) -> np.ndarray:
        """Per plan ``kept``'s row for the plans kept, else ``of_key``: its key's row, or one
        value for all; (n, C) arrays padded with ``fill`` past their classes."""
        if kept.ndim == 2:
            kept = _pad(kept, width, fill)
        if isinstance(of_key, np.ndarray):
            out = (_pad(of_key, width, fill) if of_key.ndim == 2 else of_key)[inv].astype(float)
        else:
            out = np.full((len(inv), *kept.shape[1:]), of_key)
        out[keep] = kept
        return out

    zeros = np.zeros(len(total))
    parts = dict(zip(MEMORY_PARTS, (st.weights[kr, pk], st.grads[kr, pk], st.optim[kr, pk],
                                    0.0, st.zero_buf[kr, pk], zeros + reserve), strict=True))
    terms = sub.split_terms
    return BatchCost(
        step_time_s=rows(sub.step_time_s, np.inf),
        breakdown={k: rows(v, np.nan) for k, v in sub.breakdown.items()},
        memory_bytes=rows(sub.memory_bytes, total[kr, pk]),
        memory_stage=rows(sub.memory_stage, classes[4][kr, pk]).astype(int),
        memory_parts={k: rows(sub.memory_parts[k], v) for k, v in parts.items()},
        model_flops=rows(sub.model_flops, 0.0), hardware_flops=rows(sub.hardware_flops, 0.0),
        m=tables.training.global_batch_size // (plans.dp * plans.mbs),
        class_time=rows(sub.class_time, -np.inf, -np.inf),
        class_memory=rows(sub.class_memory, total, -np.inf),
        layer_time=rows(sub.layer_time, np.nan),
        class_layer_memory=rows(sub.class_layer_memory,
                                st.per_layer_state * np.ones_like(total)),
        split_bound=rows(sub.split_bound, np.inf),
        split_terms=None if terms is None else {k: rows(v, np.nan) for k, v in terms.items()},
    )


def _no_plans() -> BatchCost:
    """The ``BatchCost`` of no plans."""
    e, e2 = np.zeros(0), np.zeros((0, 1))
    return BatchCost(step_time_s=e, breakdown=dict.fromkeys(BREAKDOWN_KEYS, e),
                     memory_bytes=e, memory_stage=e.astype(int),
                     memory_parts=dict.fromkeys(MEMORY_PARTS, e), model_flops=e,
                     hardware_flops=e, m=e, class_time=e2, class_memory=e2, layer_time=e,
                     class_layer_memory=e2, split_bound=e)


def _pad(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    """(n, C) padded to (n, width) with ``fill``."""
    if a.shape[1] >= width:
        return a
    return np.concatenate([a, np.full((len(a), width - a.shape[1]), fill)], axis=1)


def _ends_bound(first: np.ndarray, last: np.ndarray, one_layer: np.ndarray,
                v: np.ndarray) -> np.ndarray:
    """The least that the first or the last stage can take under any split of the layers
    (their fixed parts ``first`` and ``last`` and ``one_layer`` of time or memory): the first
    holds a layer at least; the last too with virtual stages, but without them it may hold
    the head and the loss alone (``layout.head_alone_splits``)."""
    return np.where(v == 1, np.maximum(first + one_layer, last),
                    np.maximum(first, last) + one_layer)


def _compose(plans: PlanArrays, tables: CostTables,
             layers_per_stage: tuple[int, ...] | None = None,
             memory_cap: float | None = None, *, layout: Layout | None = None,
             group: int | None = None, stages: np.ndarray | None = None,
             any_split: bool = False, split_interleaved: bool = False,
             memory_only: bool = False, known: tuple | None = None) -> BatchCost:
    """Cost of every plan (each assumed valid: see ``plan_violations``). With ``memory_cap``,
    step times are computed only for plans whose memory fits (the others get +inf): the search
    needs no more, and memory is the cheaper half. ``layers_per_stage`` (or a whole ``layout``)
    and ``group`` (the interleaved schedule's micro-batch group) apply to a single plan;
    ``stages`` (n, P) gives every plan its own layers per stage (an interleaved stage's spread
    evenly over its chunks; only the stage totals enter the step and the memory).
    ``memory_only``: every plan's exact memory, no step times (what the reasons for an
    infeasible request need).

    ``any_split``: also cost the plans without block recompute (and without interleaving
    unless ``split_interleaved``) whose layers could be split over the stages differently
    (``layout.search_splits``) and some split
    might fit, and return in ``split_bound`` a lower bound on the step time of any such split
    (see ``_times``): what the search prunes uneven splits with."""
    model, training, eff = tables.model, tables.training, tables.eff
    if layout is None and layers_per_stage is not None:
        from planner.specs.layout import explicit_layout
        layout = explicit_layout(tuple(layers_per_stage), int(plans.vpp[0]))
    dp, tp, pp, cp, v = plans.dp, plans.tp, plans.pp, plans.cp, plans.vpp
    mbs, rec = plans.mbs, plans.rec
    m = training.global_batch_size // (dp * mbs)
    world = dp * tp * pp * cp
    G = tables.cluster.gpus_per_node
    npn = _gather(world[:, None], lambda w: (launch_layout(w, G).nproc_per_node,), 1)[:, 0]
    npn = npn.astype(np.int64)
    if group is not None:
        grp = np.full(len(plans), group)
    else:
        grp = microbatch_groups(m, pp, v)

    rows_memo = tables.memo("layer_row")

    def layer_row(t, c, b, r, s, n, e, et):
        key = (t, c, b, r, s, n, e, et)
        row = rows_memo.get(key)
        if row is None:
            lc = tables.layer(t, c, b, r, s, n, e, et)
            w = lc.work
            row = rows_memo[key] = (
                w.fwd_s, w.bwd_s, w.recompute_s, w.fwd_flops, w.recompute_flops,
                w.stored_bytes, w.working_bytes, lc.tp_fwd, lc.tp_bwd, lc.cp_fwd, lc.cp_bwd,
                lc.cp_network_fwd, lc.cp_network_bwd, lc.ep_fwd, lc.ep_bwd)
        return row

    def head_row(t, c, b, n):
        hw = tables.head(t, c, b, n)
        return (hw.head_fwd_s, hw.head_bwd_s, hw.head_flops, hw.logits_bytes, hw.embed_s,
                hw.rerun_s, hw.loss_peak_bytes)

    # (``known``: the plans' stage classes and model states, already worked out by ``compose``.)
    classes = stage_classes(plans, model.num_layers, layout, stages) if known is None \
        else known[0]
    L, first, last, count, sidx = classes
    present = count > 0
    rows = np.arange(len(plans))
    # Transformer layers a stage runs: its decoder layers, and on the stage of the
    # multi-token prediction modules theirs (the last stage, Megatron-LM's default, or the
    # one before it in a standalone layout); their head and loss passes run on the last.
    k_mtp = model.mtp_num_layers
    mtp_at = (sidx == _col(pp) - 2).astype(float) if layout is not None and \
        layout.mtp_standalone else last
    Lx = L + k_mtp * mtp_at

    # Memory of each class at its earliest stage (ZeRO: Rajbhandari et al.; activations:
    # Korthikanti et al.; in-flight micro-batches: memory.in_flight_microbatches).
    st = model_states(plans, tables, classes, mtp_at, any_split, split_interleaved) \
        if known is None else known[1]
    params_c, experts_c, layer_local, per_layer_state = (st.params, st.experts, st.layer_local,
                                                         st.per_layer_state)
    weights, grads, optim, zero_buf, states = (st.weights, st.grads, st.optim, st.zero_buf,
                                               st.states)
    splittable, floor = st.splittable, st.floor
    alive = rows
    if memory_cap is not None and not memory_only:
        alive = np.flatnonzero(floor + eff.memory_reserve_gib * GIB <= memory_cap)

    LW = np.zeros((len(plans), LAYER_COLUMNS))
    HW = np.zeros((len(plans), HEAD_COLUMNS))
    a_plans = plans.take(alive) if len(alive) < len(plans) else plans
    a_npn = npn[alive]
    LW[alive] = _gather(np.stack([a_plans.tp, a_plans.cp, a_plans.mbs, a_plans.rec,
                                  a_plans.sp, a_npn, a_plans.ep, a_plans.etp], 1), layer_row,
                        LAYER_COLUMNS, tables.row_memo("layer"))
    head = _gather(np.stack([a_plans.tp, a_plans.cp, a_plans.mbs, a_npn], 1), head_row, 7,
                   tables.row_memo("head"))
    HW[alive, :5], HW[alive, HEAD_RERUN:] = head[:, :5], head[:, 5:]
    if k_mtp:
        HW[alive, 5:HEAD_RERUN] = _gather(
            np.stack([a_plans.tp, a_plans.cp, a_plans.mbs, a_plans.sp, a_npn], 1), tables.mtp, 5,
            tables.row_memo("mtp"))
    # Block recompute of the first rnl layers of each model chunk (Megatron-LM's
    # --recompute-method block): per stage, min(rnl * vpp, layers) layers behave as under full
    # recompute and the rest as without; W is that share per stage class.
    LW0, W = LW, None
    partial = (rec == 2) & (plans.rnl > 0)
    if partial.any():
        LW0 = LW.copy()
        a_part = alive[partial[alive]]
        pp_plans = plans.take(a_part)
        LW0[a_part] = _gather(np.stack([pp_plans.tp, pp_plans.cp, pp_plans.mbs,
                                        np.zeros_like(pp_plans.rec), pp_plans.sp, npn[a_part],
                                        pp_plans.ep, pp_plans.etp], 1), layer_row,
                              LAYER_COLUMNS, tables.row_memo("layer"))
        share = np.minimum(_col(plans.rnl * v), L) / np.maximum(L, 1)
        W = np.where(_col(partial), share, 1.0)

    working, logits = LW[:, 6], HW[:, 3]
    # The last stage at its loss: every prediction depth's kept logits, and one loss at its
    # peak (``layers.loss_peak_bytes``). The loss's buffers are gone before the backward
    # reaches the layers, so a recomputed layer's working set takes their place, not theirs
    # and its own together.
    head_mem = k_mtp * logits + HW[:, HEAD_LOSS_PEAK]
    stored = _per_layer(LW, LW0, W, 5)
    inflight = in_flight_microbatches(_col(pp), _col(v), sidx, _col(m), _col(grp))
    # CPU offloading (pp 1): the offloaded layers' activations live in host memory but for
    # the one layer in transit (Transformer Engine's offload handler stages a layer at a time).
    off = _col(plans.off)
    held = Lx - off + (off > 0)
    acts = (held * stored * inflight
            + np.maximum(np.where((_col(rec) == 2) & (Lx > 0), _col(working), 0.0),
                         last * _col(head_mem)))
    # Transformer Engine's userbuffers under tp_comm_overlap (tp_overlap.py), beside the reserve.
    ub = userbuffer_bytes(tables.model, tables.training, plans.tp, plans.sp, plans.mbs, plans.cp,
                          npn)
    reserved = eff.memory_reserve_gib * GIB + _col(ub) + eff.memory_fragmentation * acts
    total = weights + grads + optim + zero_buf + acts + reserved
    total = np.where(present, total, -np.inf)
    pk = np.argmax(total, axis=1)
    memory = total[rows, pk]
    class_layer_memory = per_layer_state + stored * inflight * (1 + eff.memory_fragmentation)
    parts = dict(zip(MEMORY_PARTS, (weights, grads, optim, acts, zero_buf, reserved),
                     strict=True))

    # (Plans dropped by the lower bound report it: their memory is at least that.)
    fits = np.ones(len(plans), dtype=bool) if memory_cap is None else memory <= memory_cap
    if memory_only:
        fits = np.zeros(len(plans), dtype=bool)
    if memory_cap is not None and splittable.any():
        # Some split fits only if every stage has room for a layer (but for a last stage
        # that may hold the head alone) and the stages together
        # for all of them: stage i holds the activations of in_flight(i) micro-batches per
        # layer (min(pp - i, m) in 1F1B; interleaved: memory.in_flight_microbatches), its fixed
        # states (the embedding on the first, the head on the last), the reserve, a
        # recomputed layer's working set, or on the last stage the loss if larger.
        frag = 1 + eff.memory_fragmentation
        fixed = np.where(present, states - L * per_layer_state, 0.0)
        rec_work = np.where(rec == 2, working, 0.0)
        reserve = eff.memory_reserve_gib * GIB + ub
        base = reserve + rec_work * frag
        terms = {"state": per_layer_state[:, 0], "act": stored[:, 0] * frag,
                 "mem_first": (fixed * first).sum(axis=1) + base,
                 "mem_mid": zero_buf[:, 0] + base,
                 "mem_last": (fixed * last).sum(axis=1) + reserve
                 + np.maximum(rec_work, head_mem) * frag
                 + k_mtp * stored[:, 0] * frag * in_flight_microbatches(pp, v, pp - 1, m, grp)}
        could = np.zeros(len(plans), dtype=bool)
        ask = np.flatnonzero(splittable & (LW[:, 0] > 0) & ~fits)
        if len(ask):
            q = _col(pp[ask])
            idx = np.arange(int(q.max()))[None, :]
            on = idx < q
            b = np.where(idx == 0, _col(terms["mem_first"][ask]),
                         np.where(idx == q - 1, _col(terms["mem_last"][ask]),
                                  _col(terms["mem_mid"][ask])))
            a = (_col(terms["state"][ask]) + _col(terms["act"][ask])
                 * in_flight_microbatches(q, _col(v[ask]), idx, _col(m[ask]),
                                          _col(grp[ask])))
            room = np.floor(np.maximum(memory_cap - b, -1.0) / np.maximum(a, 1.0))
            # Every stage needs room for a layer but, without virtual stages, the last.
            need = np.where((idx == q - 1) & (_col(v[ask]) == 1), 0.0, 1.0)
            could[ask] = ((np.where(on, room - need, np.inf).min(axis=1) >= 0)
                          & (np.where(on, room, 0.0).sum(axis=1) >= model.num_layers))
        sel = np.flatnonzero(fits | could)
    else:
        sel = np.flatnonzero(fits)
    t_masked = np.full(L.shape, -np.inf)
    step = np.full(len(plans), np.inf)
    split_bound = np.full(len(plans), np.inf)
    split_times = np.full((len(plans), 5), np.nan)
    layer_time = np.full(len(plans), np.nan)
    bd = {k: np.full(len(plans), np.nan) for k in BREAKDOWN_KEYS}
    detail = None
    if len(sel):
        sub = plans.take(sel) if memory_cap is not None else plans
        lw = LW[sel]
        (t_masked[sel], step[sel], layer_time[sel], sub_bd, sub_detail, split_bound[sel],
         split_times[sel]) = _times(
            sub, tables, layout, lw, HW[sel], tuple(a[sel] for a in classes), layer_local[sel],
            params_c[sel], experts_c[sel], present[sel], npn[sel],
            lw if W is None else LW0[sel],
            None if W is None else W[sel], mtp_at[sel], stored[sel], grp[sel])
        for k in BREAKDOWN_KEYS:
            bd[k][sel] = sub_bd[k]
        if memory_cap is None:
            detail = sub_detail
        step[~fits] = np.inf       # costed for their split bound only
        split_bound = np.where(splittable, split_bound, step)

    fwd_flops, rec_flops, head_flops = LW[:, 3], LW[:, 4], HW[:, 2]
    scale = (tp * cp).astype(float) * (training.global_batch_size / mbs.astype(float))
    # (The MTP modules' layers, projections and head passes count, as Megatron-LM's
    # num_floating_point_operations counts them.)
    model_flops = 3 * scale * ((model.num_layers + k_mtp) * fwd_flops + head_flops
                               + k_mtp * (head_flops + HW[:, 9]))
    # Recomputed FLOPs: the recomputed share of the layers (all of them but under block
    # recompute, where each stage class counts its share).
    rec_share = 1.0 if W is None else np.where(
        partial, (W * L * count).sum(axis=1) / np.maximum((L * count).sum(axis=1), 1), 1.0)
    hw_flops = model_flops + scale * (model.num_layers + k_mtp) * rec_flops * rec_share
    # (and the LM head's GEMM again where full recompute reruns it, ``recompute_head``)
    hw_flops = hw_flops + scale * head_flops * ((rec == 2) & training.recompute_head)
    return BatchCost(
        step_time_s=step, breakdown=bd, memory_bytes=memory,
        memory_stage=sidx[rows, pk].astype(int),
        memory_parts={k: val[rows, pk] for k, val in parts.items()},
        model_flops=model_flops, hardware_flops=hw_flops, m=m,
        class_time=t_masked, class_memory=total, layer_time=layer_time,
        class_layer_memory=class_layer_memory, detail=detail, split_bound=split_bound,
        split_terms=None if not (memory_cap is not None and splittable.any()) else {
            **terms, **dict(zip(("layer", "time_first", "time_mid", "time_last", "total"),
                                split_times.T, strict=True)),
            "extra": bd["pp_comm"], "vpp": v.astype(float), "group": grp.astype(float)},
    )


def pipelined_fsdp(plans: PlanArrays) -> np.ndarray:
    """Plans whose data-parallel sharding runs under a pipeline: pp > 1, ZeRO >= 1 over more
    than one rank (one replica's dp x cp), where FSDP2 keeps the unsharded gradients between
    micro-batches (``TrainingSpec.microbatch_grad_upcast``; the framework rules read it too)."""
    return (plans.pp > 1) & (plans.zero >= 1) & (plans.dp_shard * plans.cp > 1)


def grad_upcast(plans: PlanArrays, training) -> np.ndarray:
    """Plans whose FSDP2 accumulates every micro-batch's unsharded gradients in its reduce
    dtype (``TrainingSpec.microbatch_grad_upcast``)."""
    return training.microbatch_grad_upcast & pipelined_fsdp(plans)


def offload_exposed(off, layers, stored, period_f, period_b, host_gb_per_s):
    """(forward, backward) seconds per micro-batch that CPU offloading adds, per stage class.

    Megatron-Core's --cpu-offloading-num-layers N runs Transformer Engine's
    AsyncDoubleBufferGroupOffloadHandler: the activations of each of the first N layers go to
    host memory on a copy stream after that layer's forward, and the handler waits for that
    copy floor(L / N) - 1 layers later (its offload windows are spread evenly over the L
    layers); the backward reloads each a window ahead of its use. TE's docstring: the copies
    are "completely hidden behind computation if computation time of a layer is longer than
    host-device communication time". So each offloaded layer exposes what its copy
    (stored bytes / host bandwidth) takes beyond its window of compute, in each pass:
    N max(0, t_x - (floor(L / N) - 1) t_layer)."""
    off = _col(np.asarray(off, dtype=float))
    if not off.any() or host_gb_per_s is None:
        zero = np.zeros(np.shape(layers))
        return zero, zero
    t_x = stored / (host_gb_per_s * 1e9)
    window = np.floor(layers / np.maximum(off, 1)) - 1
    fwd = off * np.maximum(0.0, t_x - window * _col(period_f))
    bwd = off * np.maximum(0.0, t_x - window * period_b)
    return fwd, bwd


def _times(plans: PlanArrays, tables: CostTables, layout, LW, HW, classes, layer_params,
           params_c, experts_c, present, npn, LW0, W, mtp_at, stored, grp):
    """(class times (n, C), step times, time per added layer, breakdown) of plans whose
    components are given."""
    training, eff = tables.training, tables.eff
    gpu = tables.cluster.gpu
    hbm = hbm_bytes_per_s(gpu, eff)
    k = eff.overlap_slowdown
    dp, tp, pp, cp, v = plans.dp, plans.tp, plans.pp, plans.cp, plans.vpp
    mbs, zero = plans.mbs, plans.zero
    m = training.global_batch_size // (dp * mbs)
    dsh = plans.dp_shard               # hybrid sharding: one replica's data-parallel ranks
    nd = dsh * cp
    fwd, bwd = LW[:, 0], LW[:, 1]
    rec_s = _per_layer(LW, LW0, W, 2)
    tp_f, cp_f = LW[:, 7], LW[:, 9]
    tp_b, cp_b, cp_net_b, ep_b = (_per_layer(LW, LW0, W, j) for j in (8, 10, 12, 14))
    ep_f = LW[:, 13]
    head_fwd, head_bwd, embed = HW[:, 0], HW[:, 1], HW[:, 4]
    # Full recompute that reruns the embedding, the final norm and the LM head too
    # (``training.recompute_head``): their forwards again in the backward of their stages.
    reruns = (plans.rec == 2) & training.recompute_head
    head_rerun = np.where(reruns, HW[:, HEAD_RERUN], 0.0)
    embed_rerun = np.where(reruns, embed, 0.0)
    L, first, last, count, _ = classes
    # The multi-token prediction modules: k transformer layers more and their own work on
    # their stage (``mtp_at``), and per module one more pass through the head and loss on the
    # last (``CostTables.mtp``).
    k_mtp = tables.model.mtp_num_layers
    Lx = L + k_mtp * mtp_at
    mtp = k_mtp * mtp_at
    mtp_cf, mtp_cb, mtp_tf, mtp_tb = (_col(HW[:, j]) for j in (5, 6, 7, 8))
    # ZeRO-3: per-layer gathers and reduce-scatters on the communication stream, over one
    # replica's ranks under hybrid sharding.
    edp = dsh * tp * cp // (plans.ep * plans.etp)
    sharding = plans.data_sharded(tables.model.is_moe)
    z3 = (zero >= 3) & sharding
    # FSDP2's per-parameter copies on the compute stream (``zero3_per_parameter``): each
    # gather's copy-out (forward, and again in backward where ZeRO-3 resharded the layer),
    # each reduce-scatter's copy-in.
    fsdp2 = (zero >= 2) & sharding if training.zero3_per_parameter else np.zeros(len(plans), bool)
    pb = training.param_bytes
    launch1 = eff.kernel_overhead_us * 1e-6
    copy_out = np.where(fsdp2, layer_params[:, 0] * 2 * training.layer_gather_bytes / hbm
                        + launch1, 0.0)
    copy_in = np.where(fsdp2, layer_params[:, 0] * (pb + training.grad_bytes) / hbm + launch1,
                       0.0)
    fsdp_f = copy_out
    fsdp_b = np.where(z3, copy_out, 0.0) + copy_in
    c_f = fwd + tp_f + cp_f + ep_f + fsdp_f           # a layer's forward and backward
    c_b = _col(bwd + fsdp_b) + rec_s + tp_b + cp_b + ep_b    # periods, (n, classes)

    def z3_row(flag, t, c, d, n, e, et, layers):
        return (tables.zero3_times(t, c, d, n, e, et, layers) if flag
                else (0.0, 0.0, 0.0, 0.0, 0.0))

    # (A stage's layer count matters only under DeepSpeed's reuse distance; elsewhere it is
    # left out of the key, so plans that differ only in it share one row.)
    z3_layers = L.max(axis=1) if tables.reuse_applies else np.zeros(len(plans))
    z3_ag, z3_ag_b0, z3_ag_b1, z3_rs, z3_net = _gather(
        np.stack([z3, tp, cp, dsh, npn, plans.ep, plans.etp, z3_layers], 1), z3_row, 5,
        tables.row_memo("zero3")).T
    # The backward's gathers: under DeepSpeed's reuse distance, as many again as the
    # recompute needs on the layers full recompute reruns (``reuse.backward_gathers``).
    full = np.where(_col(plans.rec == 2), 1.0 if W is None else W, 0.0)
    ag_b = _col(z3_ag_b0) + full * _col(z3_ag_b1 - z3_ag_b0)
    # Concurrent groups that cross nodes share the NICs: a layer's ZeRO-3 traffic waits for
    # the NIC time its ring-attention exchanges take.
    shared = z3_net > 0
    g_f = z3_ag + np.where(shared, LW[:, 11], 0.0)
    g_b = ag_b + _col(z3_rs) + np.where(_col(shared), cp_net_b, 0.0)
    P = training.zero3_prefetch_layers
    period_f = np.where(z3, zero3_period(c_f, g_f, P, k), c_f)
    period_b = np.where(_col(z3), zero3_period(c_b, g_b, P, k), c_b)
    z3_edges = np.where(z3, z3_ag + z3_rs, 0.0)          # first gather, last reduce-scatter

    # Per stage class, one micro-batch.
    heads = (1 + k_mtp) * last
    compute_c = (Lx * _col(fwd + bwd) + first * _col(2 * embed)
                 + heads * _col(head_fwd + head_bwd) + mtp * (mtp_cf + mtp_cb))
    recomp_c = Lx * rec_s + first * _col(embed_rerun) + last * _col(head_rerun)
    tp_c = Lx * (_col(tp_f) + tp_b) + mtp * (mtp_tf + mtp_tb)
    cp_c = Lx * (_col(cp_f) + cp_b)
    ep_c = Lx * (_col(ep_f) + ep_b)
    zero_c = Lx * (_col(period_f - c_f + fsdp_f + fsdp_b) + period_b - c_b) + _col(z3_edges)
    # Host work per micro-batch and model chunk: Megatron runs forward_step / backward_step,
    # with their send/recv set-up, once per chunk, so an interleaved stage pays it v times.
    overhead = eff.microbatch_overhead_us * 1e-6 * v
    F_c = (Lx * _col(period_f) + first * _col(embed) + heads * _col(head_fwd)
           + mtp * (mtp_cf + mtp_tf))
    B_c = (Lx * period_b + first * _col(embed + embed_rerun) + heads * _col(head_bwd)
           + last * _col(head_rerun) + mtp * (mtp_cb + mtp_tb))
    # Each micro-batch's copy of the 16-bit gradients into fp32 (``microbatch_grad_copy``:
    # DeepSpeed's, every plan), or FSDP2's fp32 accumulation of the unsharded gradients under a
    # pipeline (``microbatch_grad_upcast``: plans whose FSDP shards under pp > 1), per layer
    # and for the rest of the stage (embedding, head, MTP modules).
    upcast = grad_upcast(plans, training).astype(float)
    copy_bytes = (GRAD_COPY_BYTES * float(training.microbatch_grad_copy)
                  + GRAD_UPCAST_BYTES * upcast)
    copy_kernels = 2 * float(training.microbatch_grad_copy) + upcast
    launch = copy_kernels * LAYER_PARAM_TENSORS * eff.kernel_overhead_us * 1e-6
    copy_layer = layer_params[:, 0] * copy_bytes / hbm + launch
    copy_c = np.where(present, (params_c + experts_c) * _col(copy_bytes) / hbm
                      + Lx * _col(launch), 0.0)
    B_c = B_c + copy_c

    offload_c = offload_exposed(plans.off, Lx, stored, period_f, period_b,
                                tables.cluster.host_link_gb_per_s)
    F_c, B_c = F_c + offload_c[0], B_c + offload_c[1]

    # Data-parallel reduction and weight gather, sized by the largest stage.
    p_stage = np.where(present, params_c, 0.0).max(axis=1)
    e_stage = np.where(present, experts_c, 0.0).max(axis=1)

    l_stage = np.where(present, Lx, 0.0).max(axis=1)

    def dp_row(t, c, d, z, n, e, et, params, layers, r, p):
        return tables.dp_costs(t, c, d, z, n, float(params), int(layers), e, et, r, p)

    sharded = np.where(zero >= 3, 3, zero) * ((nd > 1) | (edp > 1) | (plans.rep > 1))
    n_b, t_grad, t_mb, t_gather, dp_net = _gather(
        np.stack([tp, cp, dsh, sharded, npn, plans.ep, plans.etp, np.rint(p_stage),
                  l_stage, plans.rep, np.minimum(pp, 2)], 1).astype(np.int64), dp_row, 5,
        tables.row_memo("dp")).T
    # The last backward's ring-attention exchanges hold the NICs the buckets need, and so do
    # its ZeRO-3 gathers and reduce-scatters across nodes, beside which hybrid sharding's
    # all-reduce across the replicas runs.
    busy = Lx[:, 0] * (cp_net_b[:, 0] + np.where(z3_net > 0, ag_b[:, 0] + z3_rs, 0.0))
    window_b = np.maximum(0.0, B_c[:, 0] - np.where(dp_net > 0, busy, 0.0))
    # ZeRO-2: every micro-batch's gradients are reduce-scattered during its backward (and
    # with FSDP2's HSDP, ``training.hsdp_all_reduce_every_microbatch``, all-reduced across the
    # replicas).
    z2_tail = np.where(t_mb > 0, bucket_tail(t_mb, n_b, window_b, k), 0.0)
    dpm_c = np.where(present, _col(z2_tail), 0.0)
    t_c = F_c + B_c + _col(overhead) + dpm_c + _col(z3_edges)
    t_masked = np.where(present, t_c, -np.inf)
    b = np.argmax(t_masked, axis=1)
    rows = np.arange(len(plans))
    t_max = t_masked[rows, b]
    t_sum = (np.where(present, t_c, 0.0) * count).sum(axis=1)

    # One send/recv between neighbouring stages: across nodes when any pair of them is.
    def cross_row(p, stride, n):
        return (float(group_span(p, stride, n).neighbours_cross) if p > 1 else 0.0,)

    (cross,) = _gather(np.stack([pp, tp * cp * dp, npn], 1), cross_row, 1,
                       tables.row_memo("cross")).T

    def p2p_row(t, c, mb, x, s):
        return (tables.p2p_time(t, c, mb, bool(x), bool(s)),)

    (p2p,) = _gather(np.stack([tp, cp, mbs, cross.astype(np.int64), plans.sp], 1), p2p_row,
                     1, tables.row_memo("p2p")).T
    p2p = np.where(pp > 1, p2p, 0.0)
    # Send/recv: 1F1B's blocking exchanges sit on the critical path of every micro-batch;
    # interleaved schedules overlap them (Megatron's overlap_p2p_comm), leaving the fill, or
    # without that option wait for one per chunk's forward-and-backward (``exchanges``).
    hops = exchanges(m, v, pp, grp, training.overlap_p2p_comm)
    pipe, bubble = makespan(t_max, t_sum, m, v, pp, 0.0)
    bd = {
        "compute": m * compute_c[rows, b], "recompute": m * recomp_c[rows, b],
        "tp_comm": m * tp_c[rows, b], "cp_comm": m * cp_c[rows, b],
        "ep_comm": m * ep_c[rows, b],
        "zero_comm": m * zero_c[rows, b], "dp_comm": m * dpm_c[rows, b],
        "overhead": m * (overhead + copy_c[rows, b]), "pipeline_bubble": bubble,
        "pp_comm": hops * p2p,
        "offload": m * (offload_c[0] + offload_c[1])[rows, b],
    }
    # Interleaved (v > 1): a model chunk's gradients are released once the last micro-batch
    # group's backward has left it, chunk v - 1 first, and a chunk's weights are needed at the
    # first group's first forward of it, so the step's reduction (and gather) runs as v
    # parts, the j-th ready (needed) at j / v of the windows ``chunk_windows`` gives.
    parts, mbs_b, mbs_f = chunk_windows(n_b, m, pp, v, grp)
    # torch.distributed.pipelining reduces a chunk's gradients after its last backward
    # (``training.grad_reduce_after_last_backward``): without interleaving, one part that
    # starts when the backward ends; interleaved, the v parts as costed.
    after = training.grad_reduce_after_last_backward & reduced_after_backward(pp, zero, v)
    r_parts = np.where(after, 1, parts)
    if training.overlap_grad_reduce:
        dp_exp = bucket_tail(n_b * t_grad / r_parts, r_parts, mbs_b * window_b, k)
    else:
        dp_exp = n_b * t_grad
    # (ZeRO 0/1's reduction; under ZeRO-2/3 only hybrid sharding's all-reduce across the
    # replicas runs once per step.)
    dp_tail = np.where(t_grad > 0, dp_exp, 0.0)
    bd["dp_comm"] = bd["dp_comm"] + dp_tail
    if training.overlap_param_gather:
        ag_exp = bucket_tail(n_b * t_gather / parts, parts, mbs_f * F_c[:, 0], k)
    else:
        ag_exp = n_b * t_gather
    gather_tail = np.where(t_gather > 0, ag_exp, 0.0)
    bd["zero_comm"] = bd["zero_comm"] + gather_tail
    opt_params = (p_stage / np.where(zero >= 1, nd, 1)
                  + e_stage / np.where(zero >= 1, edp, 1))
    bd["optimizer"] = opt_params * training.optimizer_step_bytes / hbm
    step = sum(bd[key] for key in BREAKDOWN_KEYS)
    layer_time = period_f + period_b[:, 0] + copy_layer
    # Any split of the layers over the stages (the same layers in all; an interleaved
    # stage's spread evenly over its chunks): the stages' times add up to S, whatever the
    # split, but for ZeRO-2's per-micro-batch reduction (>= 0, dropped); the slowest stage
    # takes at least S / pp, and at least the first stage's fixed time and one layer, and the
    # last's fixed time (and one layer with virtual stages: ``_ends_bound``);
    # the pipeline's closed form (m - 1/v) t_max + S / v (``pipeline.makespan``: m t_max and
    # the fill (S - t_max) / v), the send/recv and the tails (>= 0, dropped) bound the step.
    t_nodp = np.where(present, t_c - dpm_c, 0.0)
    S = (t_nodp * count).sum(axis=1)
    fixed = t_nodp - L * _col(layer_time)
    ends = _ends_bound((fixed * first).sum(axis=1), (fixed * last).sum(axis=1), layer_time, v)
    split_bound = (m - 1 / v) * np.maximum(S / pp, ends) + S / v + bd["pp_comm"]
    fixed_mid = overhead + z3_edges
    split_times = np.stack([layer_time, (fixed * first).sum(axis=1), fixed_mid,
                            (fixed * last).sum(axis=1), S], 1)
    copy_rest = np.where(present, copy_c - L * _col(copy_layer), 0.0)
    detail = {"layer_fwd": period_f, "layer_bwd": period_b[:, 0] + copy_layer, "embed": embed,
              "copy_first": (copy_rest * first).sum(axis=1),
              "copy_last": (copy_rest * last * (1 - first)).sum(axis=1),
              "copy_mtp": (copy_rest * mtp_at * (1 - last) * (1 - first)).sum(axis=1),
              "head_fwd": head_fwd, "head_bwd": head_bwd + head_rerun,
              "embed_rerun": embed_rerun, "p2p": p2p,
              "mtp_fwd": k_mtp * (period_f + HW[:, 5] + HW[:, 7]),
              "mtp_bwd": k_mtp * (period_b[:, 0] + HW[:, 6] + HW[:, 8]),
              "mtp_heads_fwd": k_mtp * head_fwd, "mtp_heads_bwd": k_mtp * head_bwd,
              "microbatch_fixed": overhead + z2_tail + z3_edges, "pipeline": pipe,
              "offload_fwd": offload_c[0][:, 0], "offload_bwd": offload_c[1][:, 0],
              "dp_tail": dp_tail, "gather_tail": gather_tail}
    return t_masked, step, layer_time, bd, detail, split_bound, split_times
