"""One plan's full cost in the public contract's shape (``estimate``).

The numbers come from ``batch.compose`` (the composition shared with the search); this module
adds the validation and the per-collective table of the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration.model import CalibrationIn
from planner.cost.batch import BREAKDOWN_KEYS, PlanArrays, compose
from planner.cost.efficiency import EfficiencyModel
from planner.cost.memory import GIB
from planner.cost.tables import RECOMPUTE, CollectiveUse, CostTables
from planner.result import CommunicationItem, MemoryBreakdown, PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import check_plan, stage_layers

__all__ = ["BREAKDOWN_KEYS", "Evaluation", "estimate", "evaluate", "to_estimate"]


@dataclass
class Evaluation:
    """Plain numbers of one plan."""

    step_time_s: float
    memory_bytes: float
    memory_stage: int
    memory_parts: dict[str, float]
    breakdown: dict[str, float]
    uses: list[tuple[CollectiveUse, float, float]]   # (use, calls per step, exposed seconds)
    model_flops: float
    hardware_flops: float
    m: int
    layers: tuple[int, ...]


def evaluate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel, tables: CostTables | None = None,
) -> Evaluation:
    """Cost of a plan already known to satisfy ``plan_violations`` (no checks here)."""
    tables = tables or CostTables(model, cluster, training, eff)
    bc = compose(PlanArrays.from_plans([plan]), tables, plan.layers_per_stage)
    m = int(bc.m[0])
    layers = stage_layers(plan, model)
    bd = {k: float(v[0]) for k, v in bc.breakdown.items()}
    key = (plan.tp, plan.cp, plan.micro_batch_size, RECOMPUTE.index(plan.recompute),
           int(plan.sequence_parallel))
    # The bottleneck stage sets the per-micro-batch collectives; count them on it.
    lw, _, _ = tables.layer(*key)
    n_b = max(layers)
    uses: list[tuple[CollectiveUse, float, float]] = []
    for u in tables.tp_uses(*key):
        calls = m * n_b * u.calls
        uses.append((u, calls, calls * u.cost.time_s * (1 - eff.tp_comm_overlap)))
    cp_uses = tables.cp_uses(*key)
    cp_total = sum(u.cost.time_s * u.calls for u in cp_uses)
    for u in cp_uses:
        calls = m * n_b * u.calls
        share = u.cost.time_s * u.calls / cp_total if cp_total else 0.0
        uses.append((u, calls, bd["cp_comm"] * share))
    nd = plan.dp * plan.cp
    z3_exposed = bd["zero_comm"]
    if plan.zero_stage >= 3 and nd > 1:
        ag, rs = tables.zero3_uses(plan.tp, plan.cp, plan.dp)
        tot = m * n_b * (ag.calls * ag.cost.time_s + rs.calls * rs.cost.time_s)
        for u in (ag, rs):
            calls = m * n_b * u.calls
            uses.append((u, calls, z3_exposed * calls * u.cost.time_s / tot if tot else 0.0))
    if plan.pp > 1:
        u = tables.p2p_use(plan.tp, plan.cp, plan.dp, plan.pp, plan.micro_batch_size)
        uses.append((u, u.calls * plan.vpp * m, bd["pp_comm"]))
    p_stage = tables.largest_stage_params(plan.tp, plan.pp, plan.layers_per_stage)
    for u in tables.dp_uses(plan.tp, plan.cp, plan.dp, plan.zero_stage, p_stage):
        exposed = bd["dp_comm"] if u.strategy == "DP" else bd["zero_comm"]
        uses.append((u, u.calls, exposed))
    return Evaluation(
        step_time_s=float(bc.step_time_s[0]), memory_bytes=float(bc.memory_bytes[0]),
        memory_stage=int(bc.memory_stage[0]),
        memory_parts={k: float(v[0]) for k, v in bc.memory_parts.items()},
        breakdown=bd, uses=uses, model_flops=float(bc.model_flops[0]),
        hardware_flops=float(bc.hardware_flops[0]), m=m, layers=layers,
    )


def estimate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel | None = None, *, rank: int | None = None,
    tables: CostTables | None = None, calibration: CalibrationIn | None = None,
) -> PlanEstimate:
    """Validate ``plan`` and return its full cost in the public contract's shape."""
    from planner.launch import build_launch

    check_plan(plan, model, cluster, training)
    eff = eff or (tables.eff if tables else EfficiencyModel())
    if tables is None and calibration is not None:
        tables = CostTables(model, cluster, training, eff, calibration)
    ev = evaluate(model, cluster, training, plan, eff, tables)
    est = to_estimate(ev, cluster, training, plan, rank=rank)
    return est.model_copy(update={"launch": build_launch(est, model, cluster, training)})


def to_estimate(
    ev: Evaluation, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan, *,
    rank: int | None = None,
) -> PlanEstimate:
    gpus = plan.world_size
    step = ev.step_time_s
    tflops = ev.model_flops / step / gpus / 1e12
    comms = [
        CommunicationItem(
            strategy=u.strategy, op=u.cost.op, message_bytes=u.cost.message_bytes,
            count_per_step=calls, group_size=u.group.size, tier=u.group.tier,
            algorithm=u.cost.algorithm, time_s=u.cost.time_s,
            total_time_s=u.cost.time_s * calls, exposed_time_s=exposed,
            busbw_gb_per_s=u.cost.busbw_gb_per_s, source=u.cost.source,
        )
        for u, calls, exposed in ev.uses
    ]
    mp = {k: v / GIB for k, v in ev.memory_parts.items()}
    total = ev.memory_bytes / GIB
    return PlanEstimate(
        rank=rank, dp=plan.dp, tp=plan.tp, pp=plan.pp, cp=plan.cp, vpp=plan.vpp,
        micro_batch_size=plan.micro_batch_size, grad_accum_steps=ev.m, recompute=plan.recompute,
        zero_stage=plan.zero_stage, sequence_parallel=plan.sequence_parallel,
        layers_per_stage=list(ev.layers), gpus_used=gpus, step_time_s=step,
        tokens_per_s=training.global_batch_size * training.seq_length / step,
        tflops_per_gpu=tflops, hardware_tflops_per_gpu=ev.hardware_flops / step / gpus / 1e12,
        mfu=tflops * 1e12 / cluster.gpu.peak_flops(training.precision),
        memory_per_gpu_gib=total, memory_capacity_gib=cluster.gpu.memory_gib,
        fits_in_memory=total <= cluster.gpu.memory_gib,
        memory=MemoryBreakdown(
            stage=ev.memory_stage, weights_gib=mp["weights"], gradients_gib=mp["gradients"],
            optimizer_gib=mp["optimizer"], activations_gib=mp["activations"],
            zero_buffers_gib=mp["zero_buffers"], reserved_gib=mp["reserved"], total_gib=total,
        ),
        breakdown=dict(ev.breakdown), communication=comms,
    )
