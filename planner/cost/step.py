"""One plan's full cost in the public contract's shape (``estimate``).

The numbers come from ``batch.compose`` (the composition shared with the search); this module
adds the validation and the per-collective table of the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration.model import CalibrationIn
from planner.cost.batch import BREAKDOWN_KEYS, PlanArrays, compose
from planner.cost.caveats import caveats, gpu_family, per_layer_ms, step_time_band
from planner.cost.efficiency import EfficiencyModel
from planner.cost.memory import GIB, stage_layer_counts
from planner.cost.pipeline import chunk_times, simulate
from planner.cost.tables import RECOMPUTE, CollectiveUse, CostTables
from planner.errors import PlannerInputError
from planner.frameworks import frameworks_for, model_rule_args
from planner.result import (
    CommunicationItem,
    MemoryBreakdown,
    NodePlacement,
    Parameters,
    Placement,
    PlanEstimate,
    StepTimeBand,
)
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.allocation import UniformSlice, placement, slice_for
from planner.specs.layout import Layout
from planner.specs.placement import launch_layout
from planner.specs.plan import check_plan, grad_accum_steps, microbatch_group, plan_layout

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
    layout: Layout | None = None
    group: int | None = None
    params: tuple[int, int] = (0, 0)     # the model's (total, active) parameters
    moe: bool = False                    # the model has expert layers
    # How much longer the event simulation of the schedule runs than the closed form (custom
    # interleaved layouts only, whose chunks may hold unequal work; 0 otherwise).
    schedule_excess: float = 0.0


def evaluate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel, tables: CostTables | None = None,
) -> Evaluation:
    """Cost of a plan already known to satisfy ``plan_violations`` (no checks here)."""
    tables = tables or CostTables(model, cluster, training, eff)
    layout = plan_layout(plan, model)
    m = grad_accum_steps(plan, training)
    assert m is not None, "plan_violations rejects a batch the plan does not divide"
    group = plan.microbatch_group_size or (microbatch_group(m, plan.pp) if plan.vpp > 1
                                           else None)
    bc = compose(PlanArrays.from_plans([plan]), tables, layout=layout, group=group)
    bd = {k: float(v[0]) for k, v in bc.breakdown.items()}
    excess = 0.0
    if plan.vpp > 1 and layout.kind == "custom" and bc.detail is not None:
        detail = {k: float(v[0]) for k, v in bc.detail.items()}
        fwd, bwd = chunk_times(detail, layout)
        closed = detail["pipeline"] + bd["pp_comm"]
        excess = simulate(fwd, bwd, m, detail["p2p"], group,
                          training.overlap_p2p_comm).makespan / closed - 1
    npn = tables.npn(plan.world_size)
    key = (plan.tp, plan.cp, plan.micro_batch_size, RECOMPUTE.index(plan.recompute),
           int(plan.sequence_parallel), npn)
    # The bottleneck stage sets the per-micro-batch collectives; count them on it.
    n_b = max(stage_layer_counts(model, layout))
    uses: list[tuple[CollectiveUse, float, float]] = []
    per_layer = _shares(tables.tp_uses(*key) + tables.saved_input_gathers(*key), m * n_b,
                        bd["tp_comm"])
    per_layer += _shares(tables.cp_uses(*key), m * n_b, bd["cp_comm"])
    per_layer += _shares(tables.ep_uses(*key, plan.ep, plan.etp),
                         m * n_b * model.moe_share, bd["ep_comm"])
    uses += per_layer
    if plan.zero_stage >= 3:
        uses += _shares(tables.zero3_uses(plan.tp, plan.cp, plan.dp_shard, npn, plan.ep, plan.etp,
                                          n_b, plan.recompute == "full"),
                        m * n_b, bd["zero_comm"])
    if plan.pp > 1:
        u = tables.p2p_use(plan.tp, plan.cp, plan.dp, plan.pp, plan.micro_batch_size,
                           plan.sequence_parallel)
        uses.append((u, u.calls * plan.vpp * m, bd["pp_comm"]))
    p_stage = tables.largest_stage_params(plan.tp, layout)
    dp_uses = tables.dp_uses(plan.tp, plan.cp, plan.dp_shard, plan.zero_stage, p_stage, npn,
                             layer_params=tables.stage_layer_params(plan.tp, n_b),
                             replicas=plan.dp_replicate)
    dp_uses += tables.expert_dp_uses(plan.tp, plan.cp, plan.dp_shard, plan.zero_stage, npn,
                                     n_b, plan.ep, plan.etp, plan.dp_replicate)
    for u in dp_uses:
        exposed = bd["dp_comm"] if u.strategy == "DP" else bd["zero_comm"]
        every_mb = u.strategy == "DP" and tables.every_microbatch(u, plan.pp, plan.zero_stage)
        uses.append((u, u.calls * (m if every_mb else 1), exposed))
    return Evaluation(
        step_time_s=float(bc.step_time_s[0]), memory_bytes=float(bc.memory_bytes[0]),
        memory_stage=int(bc.memory_stage[0]),
        memory_parts={k: float(v[0]) for k, v in bc.memory_parts.items()},
        breakdown=bd, uses=uses, model_flops=float(bc.model_flops[0]),
        hardware_flops=float(bc.hardware_flops[0]), m=m, layers=layout.stages,
        layout=layout, group=group, params=(model.num_params, model.active_params),
        moe=model.is_moe, schedule_excess=excess,
    )


def _shares(uses: list[CollectiveUse], multiplier: float, exposed: float
            ) -> list[tuple[CollectiveUse, float, float]]:
    """(use, calls per step, exposed seconds): the strategy's exposed time split over its
    collectives in proportion to their total time."""
    total = sum(u.cost.time_s * u.calls for u in uses)
    return [(u, u.calls * multiplier,
             exposed * u.cost.time_s * u.calls / total if total else 0.0) for u in uses]


def estimate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel | None = None, *, rank: int | None = None,
    tables: CostTables | None = None, calibration: CalibrationIn | None = None,
) -> PlanEstimate:
    """Validate ``plan`` and return its full cost in the public contract's shape (without the
    ``launch`` object, which ``planner.launch.with_launch`` adds where it is wanted). On a
    fragmented allocation the plan runs on the slice of it that places its ranks evenly
    (``specs.allocation``), and ``placement`` names the nodes and GPUs."""
    if cluster.pools is not None:
        raise PlannerInputError(
            "cluster.pools", "an estimate costs a plan on one pool: give that pool as the "
            "cluster (plan chooses which pool each pipeline stage runs on)")
    if cluster.free_nodes is not None:
        part = slice_for(cluster, plan.world_size, plan.tp)
        est = estimate(model, part.cluster, training, plan, eff, rank=rank,
                       calibration=calibration)
        return on_allocation(est, cluster, part)
    check_plan(plan, model, cluster, training)
    eff = eff or (tables.eff if tables else EfficiencyModel())
    if tables is None and calibration is not None:
        tables = CostTables(model, cluster, training, eff, calibration)
    ev = evaluate(model, cluster, training, plan, eff, tables)
    return to_estimate(ev, model, cluster, training, plan, rank=rank, efficiency=eff)


def on_allocation(est: PlanEstimate, cluster: ClusterSpec, part: UniformSlice) -> PlanEstimate:
    """The estimate of a plan costed on one slice of a fragmented allocation, with the nodes
    and GPUs it uses."""
    nodes = [NodePlacement(index=j, name=name, local_gpus=gpus)
             for j, name, gpus in placement(cluster, part, est.gpus_used)]
    return est.model_copy(update={"placement": Placement(
        nnodes=len(nodes), nproc_per_node=len(nodes[0].local_gpus), nodes=nodes)})


def to_estimate(
    ev: Evaluation, model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
    plan: ParallelPlan, *, rank: int | None = None, efficiency: EfficiencyModel | None = None,
    mixed_gpus: bool = False,
) -> PlanEstimate:
    """The public shape of one evaluated plan; ``efficiency``: the request's, whose speeds,
    where fitted to measured runs (``efficiency.anchored``), set the band, which then names
    the anchor they came from (``efficiency.anchor``); ``mixed_gpus``: the plan's stages run on
    GPUs of different families (a pipeline over pools), which no published run did, so its
    band is its class's on every GPU rather than ``cluster``'s family's."""
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
    even = ev.layout.kind == "even" if ev.layout else True
    runs = frameworks_for(plan, ev.m, even, training, ev.group, *model_rule_args(model))
    lay = launch_layout(gpus, cluster.host_gpus)
    mfu = tflops * 1e12 / cluster.gpu.peak_flops(training.precision)
    chunks = ([list(c) for c in ev.layout.chunks] if ev.layout and plan.vpp > 1 else None)
    floor = (efficiency or EfficiencyModel()).layer_host_floor_us
    layer = (None if floor or not max(ev.layers) else
             per_layer_ms(ev.breakdown["compute"], step, ev.m, max(ev.layers))[0])
    notes = caveats(model, cluster, training, mfu=mfu, schedule_excess=ev.schedule_excess,
                    layer_ms=layer)
    anchor = efficiency if efficiency is not None and efficiency.anchored else None
    family = None if mixed_gpus else gpu_family(cluster)
    band = StepTimeBand.model_validate({**step_time_band(model, step, anchor is not None, family),
                                        "anchor": anchor and anchor.anchor})
    placement = Placement(nnodes=lay.nnodes, nproc_per_node=lay.nproc_per_node)
    return PlanEstimate(
        rank=rank, dp=plan.dp, tp=plan.tp, pp=plan.pp, cp=plan.cp, ep=plan.ep, etp=plan.etp,
        vpp=plan.vpp,
        micro_batch_size=plan.micro_batch_size, grad_accum_steps=ev.m, recompute=plan.recompute,
        recompute_num_layers=plan.recompute_num_layers,
        cpu_offload_layers=plan.cpu_offload_layers,
        zero_stage=plan.zero_stage, dp_replicate=plan.dp_replicate,
        sequence_parallel=plan.sequence_parallel,
        layers_per_stage=list(ev.layers), gpus_used=gpus, step_time_s=step,
        layers_per_chunk=chunks,
        pipeline_layout=ev.layout.kind if ev.layout and plan.pp > 1 else None,
        microbatch_group_size=ev.group, mtp_standalone=plan.mtp_standalone,
        tokens_per_s=training.global_batch_size * training.seq_length / step,
        tflops_per_gpu=tflops, hardware_tflops_per_gpu=ev.hardware_flops / step / gpus / 1e12,
        mfu=mfu,
        memory_per_gpu_gib=total, memory_capacity_gib=cluster.gpu.memory_gib,
        fits_in_memory=total <= cluster.gpu.memory_gib,
        memory=MemoryBreakdown(
            stage=ev.memory_stage, weights_gib=mp["weights"], gradients_gib=mp["gradients"],
            optimizer_gib=mp["optimizer"], activations_gib=mp["activations"],
            zero_buffers_gib=mp["zero_buffers"], reserved_gib=mp["reserved"], total_gib=total,
        ),
        breakdown=dict(ev.breakdown), communication=comms, frameworks=runs, caveats=notes,
        step_time_band=band,
        placement=placement,
        parameters=Parameters(total=ev.params[0], active=ev.params[1]),
    )
