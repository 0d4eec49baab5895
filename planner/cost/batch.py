"""Step time and memory of many plans at once (numpy arrays), from memoised components.

This is the cost model's composition, written once for arrays: ``estimate`` runs it on one plan,
the search on every plan of its space. Per micro-batch, pipeline stage i spends

    t_i = L_i (fwd + bwd + recompute + exposed TP + exposed CP) + embedding (first stage)
          + LM head and loss (last stage) + exposed ZeRO-3 gathers

and the step takes

    m max_i t_i + (sum_i t_i - max_i t_i) / v      (1F1B, interleaved when v > 1)
    + 2 v m t_p2p + exposed DP reduction + exposed ZeRO-1/2 gathers + optimizer

For equal stages the bubble is (p - 1) t / v, the fraction (p-1)/(v m) of Narayanan et al. SC'21
section 2.2. The DP reduction overlaps the last micro-batch's backward on the first stage when
``overlap_grad_reduce`` is on (the last bucket always stays exposed). Stages are grouped into at
most four classes (first, last, middle stages with one more layer, the other middle stages),
since stages of a class differ only in how many micro-batches they hold; each class is costed at
its earliest stage, which holds the most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.memory import GIB, in_flight_microbatches, model_state_bytes, stage_params
from planner.cost.tables import RECOMPUTE, CostTables
from planner.specs import ParallelPlan
from planner.specs.plan import split_layers

BREAKDOWN_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "pp_comm", "pipeline_bubble",
                  "dp_comm", "zero_comm", "optimizer")
PLAN_FIELDS = ("dp", "tp", "pp", "cp", "vpp", "mbs", "rec", "zero", "sp")


@dataclass(frozen=True)
class PlanArrays:
    """Plans as parallel integer arrays (rec: 0 none, 1 selective, 2 full; sp: 0/1)."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    vpp: np.ndarray
    mbs: np.ndarray
    rec: np.ndarray
    zero: np.ndarray
    sp: np.ndarray

    def __len__(self) -> int:
        return len(self.dp)

    @classmethod
    def from_plans(cls, plans: list[ParallelPlan]) -> PlanArrays:
        cols = {f: [] for f in PLAN_FIELDS}
        for p in plans:
            for f, v in zip(PLAN_FIELDS, (p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch_size,
                                          RECOMPUTE.index(p.recompute), p.zero_stage,
                                          int(p.sequence_parallel)), strict=True):
                cols[f].append(v)
        return cls(**{f: np.asarray(v, dtype=np.int64) for f, v in cols.items()})

    def take(self, idx: np.ndarray) -> PlanArrays:
        return PlanArrays(**{f: getattr(self, f)[idx] for f in PLAN_FIELDS})

    def plan(self, i: int, layers_per_stage: tuple[int, ...] | None = None) -> ParallelPlan:
        return ParallelPlan(
            dp=int(self.dp[i]), tp=int(self.tp[i]), pp=int(self.pp[i]), cp=int(self.cp[i]),
            vpp=int(self.vpp[i]), micro_batch_size=int(self.mbs[i]),
            recompute=RECOMPUTE[int(self.rec[i])], zero_stage=int(self.zero[i]),
            sequence_parallel=bool(self.sp[i]), layers_per_stage=layers_per_stage,
        )


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
    class_time: np.ndarray | None = None
    class_memory: np.ndarray | None = None
    layer_time: np.ndarray | None = None
    class_layer_memory: np.ndarray | None = None


def pipeline_time(t_max, t_sum, m, v):
    """(total, bubble) of a 1F1B schedule (interleaved when v > 1) of m micro-batches whose
    slowest stage takes t_max per micro-batch and all stages together t_sum: the slowest stage
    runs all m, the others' fill and drain is the bubble, shrunk v times by interleaving. With p
    equal stages the bubble is (p-1) t / v, a fraction (p-1)/(v m) of m t (Narayanan et al.)."""
    bubble = (t_sum - t_max) / v
    return m * t_max + bubble, bubble


def _gather(keys: np.ndarray, fn, width: int) -> np.ndarray:
    """fn(*unique key row) -> ``width`` floats, evaluated once per distinct row of ``keys``."""
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) == 1:                          # one plan (estimate): no grouping to do
        return np.array([fn(*map(int, keys[0]))], dtype=float).reshape(1, width)
    radix = [int(keys[:, j].max(initial=0)) + 1 for j in range(keys.shape[1])]
    if np.prod(radix, dtype=float) < 2**62:   # mixed-radix code of the row: one 1-D unique
        code = np.zeros(len(keys), dtype=np.int64)
        for j, r in enumerate(radix):
            code = code * r + keys[:, j]
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    else:                                       # would overflow int64: unique over rows
        _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    vals = np.array([fn(*map(int, keys[i])) for i in first], dtype=float).reshape(len(first), width)
    return vals[inv.reshape(-1)]


def _classes(pp: np.ndarray, num_layers: int, explicit: tuple[int, ...] | None):
    """(layers, is_first, is_last, count, first_index) arrays of shape (n, C)."""
    if explicit is not None:
        p = len(explicit)
        L = np.array([explicit], dtype=float)
        idx = np.arange(p)[None, :]
        return (L, (idx == 0).astype(float), (idx == p - 1).astype(float),
                np.ones((1, p)), idx.astype(float))
    table = {}
    for p in np.unique(pp):
        p = int(p)
        split = split_layers(num_layers, p)
        rows = [(split[0], 1, 1 if p == 1 else 0, 1, 0)]
        if p > 1:
            rows.append((split[-1], 0, 1, 1, p - 1))
            middle = split[1:-1]
            for n_layers in sorted(set(middle), reverse=True):
                where = [i + 1 for i, x in enumerate(middle) if x == n_layers]
                rows.append((n_layers, 0, 0, len(where), where[0]))
        rows += [(0, 0, 0, 0, 0)] * (4 - len(rows))
        table[p] = rows
    uniq, inv = np.unique(pp, return_inverse=True)
    arr = np.array([table[int(p)] for p in uniq], dtype=float)[inv.reshape(-1)]   # (n, 4, 5)
    return arr[..., 0], arr[..., 1], arr[..., 2], arr[..., 3], arr[..., 4]


def compose(plans: PlanArrays, tables: CostTables,
            layers_per_stage: tuple[int, ...] | None = None,
            memory_cap: float | None = None) -> BatchCost:
    """Cost of every plan (each assumed valid: see ``plan_violations``). With ``memory_cap``,
    step times are computed only for plans whose memory fits (the others get +inf): the search
    needs no more, and memory is the cheaper half."""
    model, training, eff = tables.model, tables.training, tables.eff
    dp, tp, pp, cp, v = plans.dp, plans.tp, plans.pp, plans.cp, plans.vpp
    mbs, rec, zero = plans.mbs, plans.rec, plans.zero
    m = training.global_batch_size // (dp * mbs)
    nd = dp * cp

    def layer_row(t, c, b, r, s):
        lw, tp_s, cp_s = tables.layer(t, c, b, r, s)
        return (lw.fwd_s, lw.bwd_s, lw.recompute_s, lw.fwd_flops, lw.recompute_flops,
                lw.stored_bytes, lw.working_bytes, tp_s, cp_s)

    def head_row(t, c, b):
        hw = tables.head(t, c, b)
        return (hw.head_fwd_s, hw.head_bwd_s, hw.head_flops, hw.logits_bytes, hw.embed_s)

    classes = _classes(pp, model.num_layers, layers_per_stage)
    L, first, last, count, sidx = classes
    present = count > 0
    rows = np.arange(len(plans))

    # Memory of each class at its earliest stage (ZeRO: Rajbhandari et al.; activations:
    # Korthikanti et al.; in-flight micro-batches: memory.in_flight_microbatches).
    params_c = stage_params(model, _col(tp), _col(pp), L, first, last)
    weights, grads, optim = model_state_bytes(params_c, training, _col(zero), _col(nd))
    zero_buf = np.where(_col(zero) >= 3,
                        2 * model.params_per_layer / _col(tp) * training.param_bytes, 0.0)
    zero_buf = zero_buf * np.ones_like(L)
    states = np.where(present, weights + grads + optim + zero_buf, -np.inf)
    # Model states alone are a lower bound: plans they already overflow need no more work.
    alive = rows
    if memory_cap is not None:
        floor = states.max(axis=1) + eff.memory_reserve_gib * GIB
        alive = np.flatnonzero(floor <= memory_cap)

    LW = np.zeros((len(plans), 9))
    HW = np.zeros((len(plans), 5))
    a_plans = plans.take(alive) if memory_cap is not None else plans
    LW[alive] = _gather(np.stack([a_plans.tp, a_plans.cp, a_plans.mbs, a_plans.rec,
                                  a_plans.sp], 1), layer_row, 9)
    HW[alive] = _gather(np.stack([a_plans.tp, a_plans.cp, a_plans.mbs], 1), head_row, 5)
    stored, working, logits = LW[:, 5], LW[:, 6], HW[:, 3]
    inflight = in_flight_microbatches(_col(pp), _col(v), sidx, _col(m))
    acts = (L * _col(stored) * inflight
            + np.where((_col(rec) == 2) & (L > 0), _col(working), 0.0) + last * _col(logits))
    reserved = eff.memory_reserve_gib * GIB + eff.memory_fragmentation * acts
    total = weights + grads + optim + zero_buf + acts + reserved
    total = np.where(present, total, -np.inf)
    pk = np.argmax(total, axis=1)
    memory = total[rows, pk]
    per_layer_state = sum(model_state_bytes(_col(model.params_per_layer / tp), training,
                                            _col(zero), _col(nd)))
    class_layer_memory = per_layer_state + _col(stored) * inflight * (1 + eff.memory_fragmentation)
    parts = {"weights": weights, "gradients": grads, "optimizer": optim,
             "activations": acts, "zero_buffers": zero_buf, "reserved": reserved}

    # (Plans dropped by the lower bound report it: their memory is at least that.)
    sel = rows if memory_cap is None else np.flatnonzero(memory <= memory_cap)
    t_masked = np.full(L.shape, -np.inf)
    step = np.full(len(plans), np.inf)
    bd = {k: np.full(len(plans), np.nan) for k in BREAKDOWN_KEYS}
    if len(sel):
        sub = plans.take(sel) if memory_cap is not None else plans
        t_masked[sel], step[sel], sub_bd = _times(
            sub, tables, layers_per_stage, LW[sel], HW[sel],
            tuple(a[sel] for a in classes), params_c[sel], present[sel])
        for k in BREAKDOWN_KEYS:
            bd[k][sel] = sub_bd[k]

    fwd_flops, rec_flops, head_flops = LW[:, 3], LW[:, 4], HW[:, 2]
    scale = (tp * cp).astype(float) * (training.global_batch_size / mbs.astype(float))
    model_flops = 3 * scale * (model.num_layers * fwd_flops + head_flops)
    hw_flops = model_flops + scale * model.num_layers * rec_flops
    return BatchCost(
        step_time_s=step, breakdown=bd, memory_bytes=memory,
        memory_stage=sidx[rows, pk].astype(int),
        memory_parts={k: val[rows, pk] for k, val in parts.items()},
        model_flops=model_flops, hardware_flops=hw_flops, m=m,
        class_time=t_masked, class_memory=total,
        layer_time=LW[:, 0] + LW[:, 1] + LW[:, 2] + LW[:, 7] + LW[:, 8],
        class_layer_memory=class_layer_memory,
    )


def _col(a):
    """A per-plan array as a column, to broadcast against (n, classes) arrays."""
    return a.astype(float)[:, None] if np.ndim(a) else a


def _times(plans: PlanArrays, tables: CostTables, layers_per_stage, LW, HW, classes,
           params_c, present):
    """(class times (n, C), step times, breakdown) of plans whose components are given."""
    training, eff = tables.training, tables.eff
    hbm = tables.cluster.gpu.memory_bandwidth_gb_per_s * 1e9
    dp, tp, pp, cp, v = plans.dp, plans.tp, plans.pp, plans.cp, plans.vpp
    mbs, zero = plans.mbs, plans.zero
    m = training.global_batch_size // (dp * mbs)
    nd = dp * cp
    fwd, bwd, rec_s, tp_layer, cp_layer = LW[:, 0], LW[:, 1], LW[:, 2], LW[:, 7], LW[:, 8]
    head_fwd, head_bwd, embed = HW[:, 0], HW[:, 1], HW[:, 4]
    L, first, last, count, _ = classes

    z3 = (zero >= 3) & (nd > 1)

    def z3_row(flag, t, c, d):
        if not flag:
            return (0.0, 0.0)
        ag, rs = tables.zero3_uses(t, c, d)
        return (ag.cost.time_s, rs.cost.time_s)

    z3_ag, z3_rs = _gather(np.stack([z3, tp, cp, dp], 1), z3_row, 2).T

    # Stage classes and their per-micro-batch times.
    compute_c = L * _col(fwd + bwd) + first * _col(2 * embed) + last * _col(head_fwd + head_bwd)
    recomp_c = L * _col(rec_s)
    tp_c = L * _col(tp_layer)
    cp_c = L * _col(cp_layer)
    z3_c = np.where(_col(z3), np.maximum(0.0, L * _col(2 * z3_ag + z3_rs) - compute_c - recomp_c)
                    + _col(z3_ag), 0.0)
    t_c = compute_c + recomp_c + tp_c + cp_c + z3_c
    t_masked = np.where(present, t_c, -np.inf)
    b = np.argmax(t_masked, axis=1)
    rows = np.arange(len(plans))
    t_max = t_masked[rows, b]
    t_sum = (np.where(present, t_c, 0.0) * count).sum(axis=1)
    bd = {
        "compute": m * compute_c[rows, b], "recompute": m * recomp_c[rows, b],
        "tp_comm": m * tp_c[rows, b], "cp_comm": m * cp_c[rows, b],
        "zero_comm": m * z3_c[rows, b], "pipeline_bubble": pipeline_time(t_max, t_sum, m, v)[1],
    }

    # Pipeline send/recv.
    def p2p_row(t, c, d, p, mb):
        return (tables.p2p_use(t, c, d, p, mb).cost.time_s if p > 1 else 0.0,)

    (p2p,) = _gather(np.stack([tp, cp, dp, pp, mbs], 1), p2p_row, 1).T
    bd["pp_comm"] = 2 * v * m * p2p

    # Data-parallel reduction and the optimizer, sized by the largest stage.
    p_stage = np.where(present, params_c, 0.0).max(axis=1)
    first_layers = L[:, 0]
    def dp_row(t, c, d, p, z):
        uses = tables.dp_uses(t, c, d, z, tables.largest_stage_params(t, p, layers_per_stage))
        grad = uses[0] if uses else None
        gather = uses[1] if len(uses) > 1 else None
        return (grad.calls if grad else 0.0, grad.cost.time_s if grad else 0.0,
                gather.cost.time_s if gather else 0.0)

    n_b, t_grad, t_gather = _gather(np.stack([tp, cp, dp, pp, zero], 1), dp_row, 3).T
    if training.overlap_grad_reduce:
        dp_exp = np.maximum(t_grad, n_b * t_grad - first_layers * bwd)
        ag_exp = np.maximum(t_gather, n_b * t_gather - first_layers * fwd)
    else:
        dp_exp, ag_exp = n_b * t_grad, n_b * t_gather
    bd["dp_comm"] = dp_exp
    bd["zero_comm"] = bd["zero_comm"] + ag_exp
    opt_params = p_stage / np.where(zero >= 1, nd, 1)
    opt_bytes = 2 * training.optimizer_state_bytes + 2 * training.grad_bytes + training.param_bytes
    bd["optimizer"] = opt_params * opt_bytes / (hbm * eff.hbm_efficiency)
    step = sum(bd[k] for k in BREAKDOWN_KEYS)
    return t_masked, step, bd
