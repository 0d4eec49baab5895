"""Pipelines over pools of different GPUs: the stages of one plan on different node types.

A plan over pools keeps one (dp, tp, cp, micro-batch, recompute, ZeRO) for every stage, as
Megatron-LM and torchtitan need, and gives each pipeline stage to one pool; stage i holds
``n_i`` layers (``--pipeline-model-parallel-layout``). On its pool a stage costs what the same
stage costs on a homogeneous cluster of that pool's nodes, so the step model's composition
(``batch.compose``, with one class per stage) prices every stage on every pool, and

    step = (m - 1) max_i t_i + sum_i t_i + send/recv + max over pools of (gradient reduction
           tail + weight gather tail + optimizer) of the pool's largest stage

with t_i stage i's forward and backward of one micro-batch on its pool: the closed form of
the non-interleaved schedule (``pipeline.makespan``), which holds for unequal stages. Each
stage's time and memory are linear in its layers (``stage_terms``), so the best layer counts
for a given assignment of stages to pools are found exactly (``best_layers``). Metis (Um et
al., USENIX ATC'24) and AMP (Li et al., NeurIPS'22) price heterogeneous pipelines the same way
(per-stage compute on its device type, the slowest stage times the micro-batches plus the
fill); unlike Metis this keeps the TP and DP degrees uniform, which is what the frameworks
launch. A boundary between two pools crosses the network; the send/recv is priced on the
slower pool's network. Each pool's tail is its composition's with the other pools' stages
empty: the gradient reduction of its largest stage overlaps the backward of the pool's copy of
the first stage, so a pool that does not hold the first stage gets no overlap there (a
conservative simplification: its stages finish their backward before the first stage does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost.batch import BREAKDOWN_KEYS, PlanArrays, compose
from planner.cost.pipeline import makespan
from planner.cost.tables import CostTables

PER_MICROBATCH = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "overhead",
                  "offload")
TAILS = ("dp_comm", "zero_comm", "optimizer")


@dataclass(frozen=True)
class StageTerms:
    """Per plan (n) and stage (P, the largest pp): time per micro-batch = layer * n + fixed,
    memory = mem_layer * n + mem_fixed, for the stage on one pool (inf past a plan's pp)."""

    layer: np.ndarray
    fixed: np.ndarray
    mem_layer: np.ndarray
    mem_fixed: np.ndarray


def stage_terms(plans: PlanArrays, tables: CostTables) -> StageTerms:
    """Every stage of every plan on this pool's GPUs, from the composition's split terms
    (``BatchCost.split_terms``, what the uneven-split search prices any split with): a layer's
    time, the fixed time of the first, middle and last stage, and per layer the model states and
    the activations of each micro-batch stage i holds (min(pp - i, m) in 1F1B). Exact for plans
    without interleaving, block recompute, ZeRO-2 or ZeRO-3 (what pools are searched with;
    ``tests/test_pools.py`` checks them against compositions with explicit layer counts)."""
    bc = compose(plans, tables, memory_cap=np.inf, any_split=True)
    terms = bc.split_terms
    assert terms is not None, "plans over pools have pp > 1 and no interleaving"
    P = int(plans.pp.max())
    idx = np.arange(P)[None, :]
    pp = plans.pp[:, None]
    m = (tables.training.global_batch_size // (plans.dp * plans.mbs))[:, None]
    on = idx < pp

    def by_position(first: str, mid: str, last: str) -> np.ndarray:
        return np.where(idx == 0, terms[first][:, None],
                        np.where(idx == pp - 1, terms[last][:, None], terms[mid][:, None]))

    past = np.where(on, 0.0, np.inf)
    layer = np.broadcast_to(terms["layer"][:, None], (len(plans), P)) + past
    mem_layer = terms["state"][:, None] + terms["act"][:, None] * np.minimum(pp - idx, m)
    return StageTerms(layer, by_position("time_first", "time_mid", "time_last") + past,
                      mem_layer + past, by_position("mem_first", "mem_mid", "mem_last") + past)


def best_layers(layer: np.ndarray, fixed: np.ndarray, room: np.ndarray, L: int, m: int
                ) -> tuple[float, np.ndarray] | None:
    """The layer counts n_i >= 1 (sum L, n_i <= room_i) that minimise (m - 1) max_i t_i +
    sum_i t_i with t_i = layer_i n_i + fixed_i, and that value; None when none fits.

    Exact: for a bound T on the slowest stage, stage i may hold u_i(T) = min(room_i,
    floor((T - fixed_i) / layer_i)) layers, and the cheapest way to place L layers under T
    fills the stages with the smallest layer time first (every layer costs layer_i where it
    goes). The optimum's own slowest stage time T* is one of the values layer_i k + fixed_i,
    and at T* that fill is no worse than the optimum; every T gives a feasible assignment whose
    value (m - 1) T + sum t bounds its own from above. So the minimum over those candidate T is
    the optimum (tests check it against brute force)."""
    P = len(layer)
    room = np.minimum(room, L - (P - 1))
    if P > L or (room < 1).any() or room.sum() < L:
        return None
    k = np.arange(1, int(room.max()) + 1)[None, :]
    T = np.unique((layer[:, None] * k + fixed[:, None])[k <= room[:, None]])
    with np.errstate(invalid="ignore"):
        u = np.minimum(room[None, :], np.floor((T[:, None] - fixed[None, :]) / layer[None, :]
                                               * (1 + 1e-12)))
    ok = (u >= 1).all(axis=1) & (u.sum(axis=1) >= L)
    if not ok.any():
        return None
    T, u = T[ok], u[ok]
    order = np.argsort(layer, kind="stable")
    extra = (u - 1)[:, order]
    before = np.cumsum(extra, axis=1) - extra
    n = np.empty_like(u)
    n[:, order] = 1 + np.clip((L - P) - before, 0, extra)
    value = (m - 1) * T + (n * layer + fixed).sum(axis=1)
    best = int(np.argmin(value))
    counts = n[best].astype(np.int64)
    t = counts * layer + fixed
    return float((m - 1) * t.max() + t.sum()), counts


@dataclass(frozen=True)
class MixedCost:
    """One plan over pools: step time, its breakdown, and per stage its time and memory."""

    step_time_s: float
    breakdown: dict[str, float]
    stage_time_s: np.ndarray
    stage_memory: np.ndarray
    bottleneck_pool: int
    memory_parts: dict[int, dict[str, float]]     # per pool: its fullest stage's memory parts


def mixed_cost(plan: PlanArrays, pool_tables: list[CostTables], stage_pool: np.ndarray,
               layers: np.ndarray) -> MixedCost:
    """The step of one plan (a single row, no interleaving) whose stage i holds ``layers[i]``
    layers on pool ``stage_pool[i]`` (see the module docstring)."""
    P = len(layers)
    m = int(pool_tables[0].training.global_batch_size // (plan.dp[0] * plan.mbs[0]))
    t = np.zeros(P)
    mem = np.zeros(P)
    per_pool: dict[int, dict[str, float]] = {}
    parts: dict[int, dict[str, float]] = {}
    p2p = 0.0
    for j in sorted(set(int(x) for x in stage_pool)):
        mine = stage_pool == j
        bc = compose(plan, pool_tables[j], stages=np.where(mine, layers, 0)[None, :])
        t[mine] = bc.class_time[0, :P][mine]
        mem[mine] = bc.class_memory[0, :P][mine]
        per_pool[j] = {k: float(v[0]) for k, v in bc.breakdown.items()}
        parts[j] = {k: float(v[0]) for k, v in bc.memory_parts.items()}
        tp, cp, mbs = int(plan.tp[0]), int(plan.cp[0]), int(plan.mbs[0])
        p2p = max(p2p, pool_tables[j].p2p_time(tp, cp, mbs, True, bool(plan.sp[0])))
    slow = int(stage_pool[int(np.argmax(t))])
    pipe, fill = makespan(t.max(), t.sum(), m, 1, P, 0.0)
    tail_pool = max(per_pool, key=lambda j: sum(per_pool[j][k] for k in TAILS))
    # The slowest stage's micro-batches, split as its pool's composition splits them (that
    # pool's slowest stage: the same one unless a stage of another pool is, there, slower).
    shares = {k: per_pool[slow][k] for k in PER_MICROBATCH}
    scale = m * float(t.max()) / max(sum(shares.values()), 1e-30)
    bd = {k: v * scale for k, v in shares.items()}
    bd.update({k: per_pool[tail_pool][k] for k in TAILS})
    bd["pp_comm"] = 2 * (m + P - 1) * p2p if P > 1 else 0.0
    bd["pipeline_bubble"] = float(fill)
    step = float(pipe) + bd["pp_comm"] + sum(bd[k] for k in TAILS)
    assert set(bd) == set(BREAKDOWN_KEYS)
    return MixedCost(step, bd, t, mem, slow, parts)
