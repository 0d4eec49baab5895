"""Block recompute in the search: the fewest recomputed layers that make a plan fit.

Megatron-LM's ``--recompute-method block --recompute-num-layers N`` recomputes the first N
layers of each model chunk and keeps the activations of the others. For one plan (its degrees,
micro-batch, ZeRO stage, sequence parallelism), step time grows with N and memory falls, so
the best block-recompute variant is the one with the fewest layers that fits. The step model
makes each stage's memory affine in the number of layers it recomputes, min(N * vpp, layers),
(``cost/batch.py``), so that N follows from the memory at N = 1 and under full recompute; a
last costing checks it. Time at N = 1 bounds every variant of a plan from below, so plans that
cannot beat the current k-th best are dropped before the last costing: the answer is exact
over the space with block recompute (``tests/search_oracle.py`` enumerates every N).
"""

from __future__ import annotations

import numpy as np

from planner.cost.batch import BatchCost, PlanArrays, compose, stage_classes
from planner.cost.tables import CostTables
from planner.search.space import runs_on
from planner.specs.layout import layout_of

FULL = 2


def _with(plans: PlanArrays, rnl: np.ndarray) -> PlanArrays:
    return PlanArrays(**{**plans.__dict__, "rec": np.full(len(plans), FULL), "rnl": rnl})


def _max_chunk_layers(plans: PlanArrays, num_layers: int) -> np.ndarray:
    key = plans.pp * 100_000 + plans.vpp
    uniq, inv = np.unique(key, return_inverse=True)
    most = np.array([max(max(c) for c in layout_of(num_layers, int(k // 100_000),
                                                   int(k % 100_000)).chunks)
                     for k in uniq])
    return most[inv.reshape(-1)]


def block_recompute(plans: PlanArrays, tables: CostTables, bc: BatchCost, fits: np.ndarray,
                    capacity: float, bar: float, any_framework: bool = False
                    ) -> list[tuple[float, float, int, int]]:
    """[(step time, memory, plan index, N)] of the block-recompute variants that fit and may
    beat ``bar`` (the k-th best step time so far), one per plan without recompute that does
    not fit but whose model states do; only those Megatron-LM runs as predicted, unless
    ``any_framework``."""
    parts = bc.memory_parts
    states = parts["weights"] + parts["gradients"] + parts["optimizer"] + parts["zero_buffers"]
    # A plan's time without recompute bounds its block-recompute variants from below.
    cand = np.flatnonzero((plans.rec == 0) & ~fits & (states < capacity)
                          & (~np.isfinite(bc.step_time_s) | (bc.step_time_s < bar)))
    if not len(cand):
        return []
    sub = plans.take(cand)
    cmax = _max_chunk_layers(sub, tables.model.num_layers)
    # One layer per chunk: block recompute is full. Only Megatron-LM runs block recompute.
    keep = cmax > 1
    if not any_framework:
        keep &= runs_on(_with(sub, np.ones(len(sub), dtype=np.int64)), tables.model,
                        tables.training, ["megatron"])
    cand, sub, cmax = cand[keep], sub.take(np.flatnonzero(keep)), cmax[keep]
    if not len(cand):
        return []
    one = compose(_with(sub, np.ones(len(sub), dtype=np.int64)), tables)
    ok = one.step_time_s < bar
    if not ok.any():
        return []
    idx = np.flatnonzero(ok)
    cand, sub, cmax = cand[idx], sub.take(idx), cmax[idx]
    one_mem = one.class_memory[idx]
    full = compose(_with(sub, np.zeros(len(sub), dtype=np.int64)), tables)
    alive = full.memory_bytes <= capacity       # else no N fits either
    # Per stage class: memory(N) = full + (L - min(N v, L)) / (L - min(v, L)) (memory(1) - full).
    L = stage_classes(sub, tables.model.num_layers)[0]
    v = sub.vpp[:, None].astype(float)
    m1, mf = one_mem, full.class_memory
    slope_den = np.maximum(L - np.minimum(v, L), 0.0)
    over = (m1 > capacity) & (slope_den > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        X = np.where(over, (capacity - mf) * slope_den / (m1 - mf), np.inf)
        need = np.where(over, np.ceil((L - X) / v - 1e-9), 1.0)
    n_star = np.maximum(need.max(axis=1), 1.0)
    alive &= n_star < cmax                      # N >= the largest chunk: full recompute
    if not alive.any():
        return []
    idx = np.flatnonzero(alive)
    return fewest_that_fit(_with, sub.take(idx), cand[idx], n_star[idx].astype(np.int64),
                           cmax[idx], tables, capacity, bar)


def fewest_that_fit(variant, sub: PlanArrays, cand: np.ndarray, n: np.ndarray,
                    limit: np.ndarray, tables: CostTables, capacity: float, bar: float
                    ) -> list[tuple[float, float, int, int]]:
    """[(step time, memory, plan index, N)] of ``variant(sub, n)`` (plans with N layers
    recomputed or offloaded) that fit and beat ``bar``, N the count memory's affine form gave;
    where rounding left one over memory, one more layer, below ``limit``, up to three tries."""
    out = []
    for _ in range(3):
        res = compose(variant(sub, n), tables)
        fit = res.memory_bytes <= capacity
        for j in np.flatnonzero(fit & (res.step_time_s < bar)):
            out.append((float(res.step_time_s[j]), float(res.memory_bytes[j]),
                        int(cand[j]), int(n[j])))
        retry = np.flatnonzero(~fit & (n + 1 < limit))
        if not len(retry):
            break
        cand, sub, limit, n = cand[retry], sub.take(retry), limit[retry], n[retry] + 1
    return out
