"""Uneven pipeline stages: assign layers to stages to shorten the slowest stage (CP-SAT).

Splits keep every middle stage equal, as Megatron-LM can launch them
(``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``).

When the layers do not split evenly, or the embedding and the LM head make the first and last
stages heavier, moving layers between stages shortens the slowest stage, which sets the pace of
the whole 1F1B schedule (``batch.pipeline_time``). Each stage must still fit in memory: stage
i holds its layers' weights, gradients and optimizer states and the activations of
min(p - i, m) micro-batches, so early stages can afford fewer layers than late ones.

The model, per stage i with L_i layers:  t_i = L_i c + e_i  and  mem_i = L_i a_i + b_i <= cap,
sum L_i = num_layers, L_i >= 1; minimise max_i t_i, then (tie-break) the layers on early stages.
c, e_i, a_i, b_i come from the cost tables; the chosen split is then re-costed exactly.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from planner.cost.batch import PlanArrays, compose
from planner.cost.tables import CostTables
from planner.specs import ParallelPlan
from planner.specs.layout import split_layers

NS = 1e9


def _linear_terms(plan: ParallelPlan, tables: CostTables, layers: tuple[int, ...]):
    """Per stage: time per layer c, fixed time e_i, memory per layer a_i, fixed memory b_i,
    read off the shared composition for the split ``layers`` (ZeRO-3's exposed gathers, the
    one non-linear term, are left to the exact re-costing)."""
    bc = compose(PlanArrays.from_plans([plan]), tables, layers)
    L = np.array(layers, dtype=float)
    t, mem = bc.class_time[0], bc.class_memory[0]
    c = float(bc.layer_time[0])
    a = bc.class_layer_memory[0]
    return np.full(len(L), c), t - L * c, a, mem - L * a


def balance_stages(plan: ParallelPlan, tables: CostTables, capacity: float,
                   time_limit_s: float = 1.0) -> tuple[int, ...] | None:
    """The split minimising the slowest stage with every stage under ``capacity`` bytes, or
    None when no split fits. Interleaved plans (vpp > 1) keep the even split."""
    L = tables.model.num_layers
    p = plan.pp
    if p == 1 or plan.vpp > 1:
        return None
    even = split_layers(L, p)
    c, e, a, b = _linear_terms(plan, tables, even)
    t_even = c * np.array(even) + e
    fits_even = bool(np.all(a * np.array(even) + b <= capacity))
    # No split beats the even one when its slowest stage is within one layer of the average.
    if fits_even and t_even.max() <= t_even.sum() / p + c.max():
        return even
    model = cp_model.CpModel()
    n = [model.NewIntVar(1, L - p + 1, f"stage_layers[{i}]") for i in range(p)]
    # All layers are placed, each stage at least one.
    model.Add(sum(n) == L)
    # Middle stages hold equal layer counts: what Megatron-LM's first/last-stage flags express.
    for i in range(2, p - 1):
        model.Add(n[i] == n[1])
    t_max = model.NewIntVar(0, int(max(c) * L * NS + max(e) * NS) + 1, "slowest_stage_ns")
    for i in range(p):
        # Stage i's time per micro-batch bounds the slowest stage.
        model.Add(t_max >= int(round(c[i] * NS)) * n[i] + int(round(e[i] * NS)))
        # Stage i fits in memory.
        model.Add(int(np.ceil(a[i])) * n[i] + int(np.ceil(b[i])) <= int(capacity))
    # Slowest stage first; among equals, fewer layers early (where activations pile up).
    model.Minimize(t_max * (L * p + 1) + sum((p - i) * n[i] for i in range(p)))
    if fits_even:
        for x, v in zip(n, even, strict=True):
            model.AddHint(x, v)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return tuple(int(solver.Value(x)) for x in n)
