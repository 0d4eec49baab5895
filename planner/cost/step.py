"""One plan's step time, throughput and memory, composed from the pieces of this package.

Per micro-batch, pipeline stage i spends t_i = (its layers) x (forward + backward + recompute +
exposed TP and CP collectives) + the embedding on the first stage + the LM head and loss on the
last, + exposed ZeRO-3 gathers. The 1F1B schedule then takes

    m * max_i t_i + (sum_i t_i - max_i t_i) / v

(for equal stages: m t + (p - 1) t / v, the bubble fraction (p-1)/(v m) of Narayanan et al.
SC'21 section 2.2), plus the activations' send/recv between stages (2 v m per GPU, the message
divided by tp thanks to the scatter/gather optimisation of section 4.1), the part of the
data-parallel gradient reduction that the last micro-batch's backward does not hide (buckets of
40M parameters, Megatron's DDP default), the ZeRO parameter all-gathers, and the optimizer step
(memory-bound: it streams weights, gradients and states once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.collectives import BACKEND_ALGORITHMS, GroupTopology, collective_time
from planner.cost.efficiency import EfficiencyModel
from planner.cost.layers import HeadWork, LayerWork, head_work, layer_work, tokens_per_gpu
from planner.cost.memory import GIB, StageMemory, stage_memory, stage_params
from planner.cost.placement import plan_groups
from planner.result import CommunicationItem, MemoryBreakdown, PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, ParallelPlan, TrainingSpec
from planner.specs.plan import check_plan, grad_accum_steps, stage_layers

DDP_BUCKET_PARAMS = 40_000_000
BREAKDOWN_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "pp_comm", "pipeline_bubble",
                  "dp_comm", "zero_comm", "optimizer")


@dataclass(frozen=True)
class _Comm:
    strategy: str
    op: str
    message_bytes: float
    count: float
    group: GroupTopology
    exposed_s: float = -1.0  # -1: fully exposed
    algorithm: str = ""
    time_s: float = 0.0
    busbw: float = 0.0


@dataclass
class Evaluation:
    """Plain numbers of one plan, cheap to compute many times (the search uses these)."""

    step_time_s: float
    memory_bytes: float
    stages: list[StageMemory]
    breakdown: dict[str, float]
    comms: list[_Comm] = field(default_factory=list)
    model_flops: float = 0.0
    hardware_flops: float = 0.0
    m: int = 0
    layers: tuple[int, ...] = ()


def pipeline_time(stage_times: list[float], m: int, v: int) -> tuple[float, float]:
    """(total, bubble) seconds of a 1F1B schedule (interleaved when v > 1) of m micro-batches
    whose per-micro-batch time on stage i is stage_times[i]: the bottleneck stage runs all m,
    and the others' fill/drain is the bubble, shrunk v times by interleaving. With equal stages
    the bubble is (p-1) t / v, a fraction (p-1)/(v m) of the ideal m t (Narayanan et al.)."""
    t_max = max(stage_times)
    bubble = (sum(stage_times) - t_max) / v
    return m * t_max + bubble, bubble


def _backend(cluster: ClusterSpec) -> frozenset[str]:
    return BACKEND_ALGORITHMS["gloo" if cluster.intra_node.kind == "loopback" else "nccl"]


def _call(op: str, n: float, group: GroupTopology, allowed: frozenset[str]):
    return collective_time(op, n, group, allowed=allowed)


def evaluate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel,
) -> Evaluation:
    """Cost of a plan already known to satisfy ``plan_violations`` (no checks here)."""
    m = grad_accum_steps(plan, training)
    assert m is not None
    layers = stage_layers(plan, model)
    gpu = cluster.gpu
    lw: LayerWork = layer_work(model, training, plan, gpu, eff)
    hw: HeadWork = head_work(model, training, plan, gpu, eff)
    groups = plan_groups(cluster, plan)
    allowed = _backend(cluster)
    hbm = gpu.memory_bandwidth_gb_per_s * 1e9
    e = training.activation_bytes
    T = tokens_per_gpu(plan, training)
    h = model.hidden_size
    p, v, t = plan.pp, plan.vpp, plan.tp
    comms: list[_Comm] = []

    # Tensor parallel: 2 collectives per layer forward and 2 backward (Megatron f/g operators),
    # all_reduce, or all_gather + reduce_scatter with sequence parallelism; full recompute
    # repeats the forward ones.
    tp_layer_s, tp_ops = 0.0, []
    if t > 1:
        passes = 3 if plan.recompute == "full" else 2
        ops = ("all_gather", "reduce_scatter") if plan.sequence_parallel else ("all_reduce",)
        for op in ops:
            c = _call(op, T * h * e, groups["TP"], allowed)
            tp_ops.append((op, c, 2 * passes))
            tp_layer_s += 2 * passes * c.time_s
        tp_layer_s *= 1 - eff.tp_comm_overlap

    # Context parallel: ring attention passes K,V chunks around the cp ranks, overlapped with
    # the attention core; backward also passes dK, dV.
    cp_layer_s, cp_calls = 0.0, []
    if plan.cp > 1:
        kv_bytes = 2 * T * model.kv_width / t * e
        c_f = _call("send_recv", kv_bytes, GroupTopology(2, groups["CP"].ranks_per_node
                    if groups["CP"].nodes == 1 else 1, groups["CP"].intra, groups["CP"].inter),
                    allowed)
        c_b = _call("send_recv", 2 * kv_bytes, GroupTopology(2, 2 if groups["CP"].nodes == 1
                    else 1, groups["CP"].intra, groups["CP"].inter), allowed)
        steps = plan.cp - 1
        fwd_passes = 2 if plan.recompute == "full" else 1
        fwd_exposed = max(0.0, steps * c_f.time_s - lw.attn_core_fwd_s)
        bwd_exposed = max(0.0, steps * c_b.time_s - 2.5 * lw.attn_core_fwd_s)
        cp_layer_s = fwd_passes * fwd_exposed + bwd_exposed
        cp_calls = [(c_f, steps * fwd_passes), (c_b, steps)]

    # ZeRO-3: gather each layer's weights before forward and backward, reduce-scatter its
    # gradients after backward, every micro-batch; prefetching hides it under compute.
    nd = plan.dp * plan.cp
    z3_ag = z3_rs = None
    if plan.zero_stage >= 3 and nd > 1:
        layer_p = model.params_per_layer / t
        z3_ag = _call("all_gather", layer_p * training.param_bytes, groups["DP"], allowed)
        z3_rs = _call("reduce_scatter", layer_p * training.grad_bytes, groups["DP"], allowed)

    stage_times, stage_parts = [], []
    for i, n_layers in enumerate(layers):
        compute = n_layers * (lw.fwd_s + lw.bwd_s)
        if i == 0:
            compute += 2 * hw.embed_s
        if i == p - 1:
            compute += hw.head_fwd_s + hw.head_bwd_s
        recompute = n_layers * lw.recompute_s
        tp_s = n_layers * tp_layer_s
        cp_s = n_layers * cp_layer_s
        z3_s = 0.0
        if z3_ag is not None and z3_rs is not None:
            comm = n_layers * (2 * z3_ag.time_s + z3_rs.time_s)
            z3_s = max(0.0, comm - (compute + recompute)) + z3_ag.time_s
        parts = {"compute": compute, "recompute": recompute, "tp_comm": tp_s, "cp_comm": cp_s,
                 "zero_comm": z3_s}
        stage_parts.append(parts)
        stage_times.append(sum(parts.values()))
    b_idx = stage_times.index(max(stage_times))
    _, bubble = pipeline_time(stage_times, m, v)
    bd = {k: 0.0 for k in BREAKDOWN_KEYS}
    for k, val in stage_parts[b_idx].items():
        bd[k] = m * val
    bd["pipeline_bubble"] = bubble

    if tp_ops:
        for op, c, per_layer in tp_ops:
            n_calls = m * layers[b_idx] * per_layer
            comms.append(_Comm("TP", op, c.message_bytes, n_calls, groups["TP"],
                               n_calls * c.time_s * (1 - eff.tp_comm_overlap), c.algorithm,
                               c.time_s, c.busbw_gb_per_s))
    for c, per_layer in cp_calls:
        n_calls = m * layers[b_idx] * per_layer
        comms.append(_Comm("CP", "send_recv", c.message_bytes, n_calls, groups["CP"],
                           bd["cp_comm"] * (c.time_s * per_layer) / max(
                               1e-30, sum(cc.time_s * k for cc, k in cp_calls)),
                           c.algorithm, c.time_s, c.busbw_gb_per_s))
    if z3_ag is not None and z3_rs is not None:
        n_ag = m * layers[b_idx] * 2
        n_rs = m * layers[b_idx]
        tot = n_ag * z3_ag.time_s + n_rs * z3_rs.time_s
        share = bd["zero_comm"] / tot if tot else 0.0
        comms.append(_Comm("ZeRO", "all_gather", z3_ag.message_bytes, n_ag, groups["DP"],
                           share * n_ag * z3_ag.time_s, z3_ag.algorithm, z3_ag.time_s,
                           z3_ag.busbw_gb_per_s))
        comms.append(_Comm("DP", "reduce_scatter", z3_rs.message_bytes, n_rs, groups["DP"],
                           share * n_rs * z3_rs.time_s, z3_rs.algorithm, z3_rs.time_s,
                           z3_rs.busbw_gb_per_s))

    # Pipeline: activations forward and their gradients backward at each chunk boundary.
    if p > 1:
        pp_group = groups["PP"]
        pair = GroupTopology(2, 2 if pp_group.nodes == 1 else 1, pp_group.intra, pp_group.inter)
        msg = T * h * e / t
        c = _call("send_recv", msg, pair, allowed)
        n_calls = 2 * v * m
        bd["pp_comm"] = n_calls * c.time_s
        comms.append(_Comm("PP", "send_recv", msg, n_calls, pair, bd["pp_comm"], c.algorithm,
                           c.time_s, c.busbw_gb_per_s))

    # Data parallel gradient reduction (and ZeRO-1/2 parameter all-gather) at the end of the
    # step, bucket by bucket, overlapping the last micro-batch's backward when enabled.
    p_stage = max(stage_params(model, plan, n, i) for i, n in enumerate(layers))
    if nd > 1 and plan.zero_stage < 3:
        n_buckets = max(1, math.ceil(p_stage / DDP_BUCKET_PARAMS))
        bucket = p_stage / n_buckets
        op = "all_reduce" if plan.zero_stage == 0 else "reduce_scatter"
        c = _call(op, bucket * training.grad_bytes, groups["DP"], allowed)
        total = n_buckets * c.time_s
        window = layers[0] * lw.bwd_s if training.overlap_grad_reduce else 0.0
        exposed = max(c.time_s, total - window) if training.overlap_grad_reduce else total
        bd["dp_comm"] = exposed
        comms.append(_Comm("DP", op, c.message_bytes, n_buckets, groups["DP"], exposed,
                           c.algorithm, c.time_s, c.busbw_gb_per_s))
        if plan.zero_stage in (1, 2):
            c = _call("all_gather", bucket * training.param_bytes, groups["DP"], allowed)
            total = n_buckets * c.time_s
            window = layers[0] * lw.fwd_s if training.overlap_grad_reduce else 0.0
            exposed = max(c.time_s, total - window) if training.overlap_grad_reduce else total
            bd["zero_comm"] += exposed
            comms.append(_Comm("ZeRO", "all_gather", c.message_bytes, n_buckets, groups["DP"],
                               exposed, c.algorithm, c.time_s, c.busbw_gb_per_s))

    # Optimizer step: read/write fp32 master weights and states, read gradients (twice, with
    # the norm for clipping), write the 16-bit weights.
    opt_params = p_stage / (nd if plan.zero_stage >= 1 else 1)
    opt_bytes = (2 * training.optimizer_state_bytes + 2 * training.grad_bytes
                 + training.param_bytes)
    bd["optimizer"] = eff.memory_time(opt_params * opt_bytes, hbm)

    stages = [stage_memory(model, training, plan, eff, lw, hw, n, i, m)
              for i, n in enumerate(layers)]
    peak = max(stages, key=lambda s: s.total)

    n_micro_total = training.global_batch_size / plan.micro_batch_size
    scale = t * plan.cp * n_micro_total
    layer_flops = model.num_layers * lw.fwd_flops
    model_flops = 3 * scale * (layer_flops + hw.head_flops)
    hardware_flops = model_flops + scale * model.num_layers * lw.recompute_flops
    return Evaluation(
        step_time_s=sum(bd.values()), memory_bytes=peak.total, stages=stages, breakdown=bd,
        comms=comms, model_flops=model_flops, hardware_flops=hardware_flops, m=m, layers=layers,
    )


def estimate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: ParallelPlan,
    eff: EfficiencyModel | None = None, *, rank: int | None = None,
) -> PlanEstimate:
    """Validate ``plan`` and return its full cost in the public contract's shape."""
    check_plan(plan, model, cluster, training)
    ev = evaluate(model, cluster, training, plan, eff or EfficiencyModel())
    return to_estimate(ev, model, cluster, training, plan, rank=rank)


def to_estimate(
    ev: Evaluation, model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec,
    plan: ParallelPlan, *, rank: int | None = None,
) -> PlanEstimate:
    gpus = plan.world_size
    step = ev.step_time_s
    peak_flops = cluster.gpu.peak_flops(training.precision)
    tflops = ev.model_flops / step / gpus / 1e12
    peak = max(ev.stages, key=lambda s: s.total)
    capacity = cluster.gpu.memory_gib
    comms = [
        CommunicationItem(
            strategy=c.strategy, op=c.op, message_bytes=c.message_bytes,
            count_per_step=c.count, group_size=c.group.size, tier=c.group.tier,
            algorithm=c.algorithm, time_s=c.time_s, total_time_s=c.time_s * c.count,
            exposed_time_s=(c.time_s * c.count if c.exposed_s < 0 else c.exposed_s),
            busbw_gb_per_s=c.busbw,
        )
        for c in ev.comms
    ]
    return PlanEstimate(
        rank=rank, dp=plan.dp, tp=plan.tp, pp=plan.pp, cp=plan.cp, vpp=plan.vpp,
        micro_batch_size=plan.micro_batch_size, grad_accum_steps=ev.m, recompute=plan.recompute,
        zero_stage=plan.zero_stage, sequence_parallel=plan.sequence_parallel,
        layers_per_stage=list(ev.layers), gpus_used=gpus, step_time_s=step,
        tokens_per_s=training.global_batch_size * training.seq_length / step,
        tflops_per_gpu=tflops, hardware_tflops_per_gpu=ev.hardware_flops / step / gpus / 1e12,
        mfu=tflops * 1e12 / peak_flops,
        memory_per_gpu_gib=peak.total / GIB, memory_capacity_gib=capacity,
        fits_in_memory=peak.total / GIB <= capacity,
        memory=MemoryBreakdown(
            stage=peak.stage, weights_gib=peak.weights / GIB, gradients_gib=peak.gradients / GIB,
            optimizer_gib=peak.optimizer / GIB, activations_gib=peak.activations / GIB,
            zero_buffers_gib=peak.zero_buffers / GIB, reserved_gib=peak.reserved / GIB,
            total_gib=peak.total / GIB,
        ),
        breakdown=dict(ev.breakdown), communication=comms,
    )
