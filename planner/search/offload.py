"""CPU activation offloading in the search: the fewest offloaded layers that make a plan fit.

Megatron-Core's ``--cpu-offloading-num-layers N`` moves the activations of the first N
transformer layers to host memory between the forward and the backward; it needs one pipeline
stage and no recompute (``ParallelPlan.cpu_offload_layers``). For one plan, memory falls by one
layer's activations per offloaded layer beyond the first (one layer is always in transit,
``cost/batch.py``) and the step time does not fall (``batch.offload_exposed`` grows with N), so
the best variant is the one with the fewest layers that fits. N follows from the memory at
N = 1 and N = 2; a last costing checks it (as ``partial.block_recompute`` does for block
recompute). ``tests/search_oracle.py`` enumerates every N.
"""

from __future__ import annotations

import numpy as np

from planner.cost.batch import BatchCost, PlanArrays, compose
from planner.cost.tables import CostTables
from planner.search.partial import fewest_that_fit
from planner.search.space import runs_on


def _with(plans: PlanArrays, off: np.ndarray) -> PlanArrays:
    return PlanArrays(**{**plans.__dict__, "off": off})


def cpu_offload(plans: PlanArrays, tables: CostTables, bc: BatchCost, fits: np.ndarray,
                capacity: float, bar: float, any_framework: bool = False
                ) -> list[tuple[float, float, int, int]]:
    """[(step time, memory, plan index, N)] of the offloading variants that fit and may beat
    ``bar`` (the k-th best step time so far), one per plan without pipelining or recompute
    that does not fit but whose model states do; only those Megatron-LM runs as predicted,
    unless ``any_framework``. None on a cluster without a host link."""
    if tables.cluster.host_link_gb_per_s is None:
        return []
    L = tables.model.num_layers
    parts = bc.memory_parts
    states = parts["weights"] + parts["gradients"] + parts["optimizer"] + parts["zero_buffers"]
    cand = np.flatnonzero((plans.rec == 0) & (plans.pp == 1) & (plans.off == 0) & ~fits
                          & (states < capacity))
    if not len(cand) or L < 2:
        return []
    sub = plans.take(cand)
    if not any_framework:
        keep = runs_on(_with(sub, np.ones(len(sub), dtype=np.int64)), tables.model,
                       tables.training, ["megatron"])
        cand, sub = cand[keep], sub.take(np.flatnonzero(keep))
        if not len(cand):
            return []
    one = compose(_with(sub, np.ones(len(sub), dtype=np.int64)), tables)
    ok = one.step_time_s < bar          # offloading more layers is no faster
    if not ok.any():
        return []
    idx = np.flatnonzero(ok)
    cand, sub, m1 = cand[idx], sub.take(idx), one.memory_bytes[idx]
    two = compose(_with(sub, np.full(len(sub), 2, dtype=np.int64)), tables, memory_only=True)
    per_layer = m1 - two.memory_bytes               # one more layer's activations off the GPU
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(m1 <= capacity, 1.0,
                        1 + np.ceil((m1 - capacity) / np.where(per_layer > 0, per_layer, np.nan)
                                    - 1e-9))
    alive = np.isfinite(need) & (need < L)
    if not alive.any():
        return []
    idx = np.flatnonzero(alive)
    return fewest_that_fit(_with, sub.take(idx), cand[idx], need[idx].astype(np.int64),
                           np.full(len(idx), L), tables, capacity, bar)
