"""One parallelism plan (the degrees and schedule knobs) and the checks a real run imposes.

Rank order is Megatron-LM's: tp innermost, then cp, then dp, then pp outermost
(Narayanan et al. SC'21, section 3.3: keep the chattiest groups on the fastest links).
Under hybrid sharding (``dp_replicate``) the dp ranks split into replicas of dp / dp_replicate
consecutive ones, the replicas outermost (torchtitan's HSDP mesh, Megatron-Core's distributed
optimizer instances, MiCS's shard groups): ZeRO shards within a replica.

Expert parallelism folds into the same ranks (Megatron-Core's MoE Parallel Folding, Liu et al.
2025, arXiv 2504.14960; ``parallel_state.initialize_model_parallel``): the MoE layers of a
pipeline stage see its tp * cp * dp ranks as etp x ep x edp, etp innermost, then ep, then the
expert data parallel group, so ep * etp must divide tp * cp * dp (world % (etp ep pp) == 0 in
Megatron-Core) and edp = tp * cp * dp / (ep * etp). An EP group is ep consecutive blocks of
etp ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import PlannerInputError
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, default_layout, explicit_layout, place_mtp
from planner.specs.model import ModelSpec
from planner.specs.placement import launch_layout
from planner.specs.training import TrainingSpec
from planner.vocabulary import RECOMPUTE, Recompute


class ParallelPlan(BaseModel):
    """Degrees and knobs of one way to run the training step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dp: int = Field(1, ge=1, le=1_000_000, description="Data parallel degree. 1 means disabled.")
    tp: int = Field(1, ge=1, le=1_000_000, description="Tensor parallel degree. 1 means disabled.")
    pp: int = Field(1, ge=1, le=1_000_000, description="Pipeline parallel degree (stages). 1 means disabled.")
    cp: int = Field(1, ge=1, le=1_000_000, description="Context parallel degree (sequence split). 1 = off.")
    ep: int = Field(1, ge=1, le=1_000_000, description="Expert parallel degree (MoE): the routed "
                    "experts are split over ep ranks carved out of tp * cp * dp (MoE Parallel "
                    "Folding). 1 = every rank holds every expert.")
    etp: int = Field(1, ge=1, le=1_000_000, description="Expert tensor parallel degree: each "
                     "expert's width split over etp ranks. Default 1, as Megatron-Core advises "
                     "for fine-grained MoE (its own default is tp; the launch passes it).")
    vpp: int = Field(1, ge=1, le=1_000_000,
                     description="Virtual stages per pipeline rank (interleaved 1F1B).")
    micro_batch_size: int = Field(1, ge=1, le=100_000_000,
                                  description="Sequences per micro-batch per DP rank.")
    grad_accum_steps: int | None = Field(
        None, ge=1, le=100_000_000, description="Micro-batches per step per DP rank. Default: "
        "global_batch_size / (dp * micro_batch_size)."
    )
    recompute: Recompute = Field("none", description="Activation recomputation.")
    recompute_num_layers: int | None = Field(
        None, ge=1, le=1_000_000,
        description="With recompute 'full': recompute only the first N transformer layers of "
        "each model chunk and keep the others' activations (Megatron-LM's --recompute-method "
        "block --recompute-num-layers N). Default: every layer."
    )
    cpu_offload_layers: int = Field(
        0, ge=0, le=1_000_000,
        description="Offload the activations of the first N transformer layers to host memory "
        "in the forward and reload them for the backward (Megatron-Core's "
        "--cpu-offloading-num-layers N, through Transformer Engine's CPU offload), instead of "
        "recomputing them. Needs pp 1, no recompute, N < num_layers (Megatron-Core's rules) "
        "and cluster.host_link_gb_per_s. Default 0.")
    zero_stage: int = Field(0, ge=0, le=3, description="0 plain DP, 1 optimizer states sharded "
                            "(distributed optimizer), 2 + gradients, 3 + parameters (FSDP).")
    dp_replicate: int = Field(
        1, ge=1, le=1_000_000,
        description="Hybrid sharding: the dp ranks form dp_replicate replicas of dp / "
        "dp_replicate ranks each; ZeRO shards over one replica's ranks (times cp) and the "
        "replicas all-reduce the sharded gradients once per step (PyTorch HSDP: torchtitan's "
        "data_parallel_replicate_degree; Megatron-LM's --num-distributed-optimizer-instances; "
        "DeepSpeed's MiCS, mics_shard_size). Needs zero_stage >= 1. Default 1: shard over "
        "every dp * cp rank.")
    sequence_parallel: bool = Field(False, description="Megatron sequence parallelism in TP.")
    layers_per_stage: tuple[int, ...] | None = Field(
        None, description="Transformer layers of each pipeline stage (length pp). Default: even "
        "when the layers divide pp * vpp; else the embedding and the loss count as a layer each "
        "when that divides; else the middle stages hold the same count and the first and last "
        "share the rest (planner.specs.layout). Every stage holds a layer, but the last of a "
        "plan without virtual stages may hold none: the LM head and the loss alone "
        "(Megatron-LM's --pipeline-model-parallel-layout '...|L'; nanotron's cost-balanced "
        "split puts a large vocabulary's head there)."
    )
    mtp_standalone: bool = Field(
        False, description="Multi-token prediction modules in their own virtual stage: the "
        "last model chunk of the stage before the last, the loss alone in the last stage's "
        "last chunk (Megatron-LM layout 'm|L', e.g. 'Et*3|(tt|)*29m|L'; Megatron-Bridge "
        "mtp_standalone). Needs model.mtp_num_layers > 0 and vpp > 1. Default: the modules "
        "beside the loss on the last stage.")
    microbatch_group_size: int | None = Field(
        None, ge=1, le=100_000_000,
        description="Interleaved 1F1B: micro-batches that go through a model chunk together "
        "(Megatron-LM's --microbatch-group-size-per-virtual-pipeline-stage; needs pp <= it <= "
        "grad_accum_steps and the last group empty or at least pp). Default: the smallest valid "
        "size, pp when pp divides grad_accum_steps."
    )

    @model_validator(mode="after")
    def _self_consistent(self) -> ParallelPlan:
        if self.vpp > 1 and self.pp == 1:
            raise ValueError(f"vpp={self.vpp} needs pipeline parallelism (pp > 1)")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel needs tensor parallelism (tp > 1)")
        if self.layers_per_stage is not None and len(self.layers_per_stage) != self.pp:
            raise ValueError(
                f"layers_per_stage has {len(self.layers_per_stage)} entries; pp is {self.pp}"
            )
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError("recompute_num_layers (block recompute of the first N layers of "
                             "each model chunk) needs recompute='full'")
        if self.cpu_offload_layers and self.pp > 1:
            raise ValueError("cpu_offload_layers needs pp=1: Megatron-Core has no CPU "
                             "offloading with pipeline parallelism (TransformerConfig)")
        if self.cpu_offload_layers and self.recompute != "none":
            raise ValueError("cpu_offload_layers needs recompute='none': Megatron-Core's CPU "
                             "offloading does not work with activation recomputation")
        if self.microbatch_group_size is not None and self.vpp == 1:
            raise ValueError("microbatch_group_size applies to interleaved schedules (vpp > 1)")
        if self.dp_replicate > 1:
            if self.dp % self.dp_replicate:
                raise ValueError(f"dp_replicate({self.dp_replicate}) must divide "
                                 f"dp({self.dp}): each replica holds dp / dp_replicate ranks")
            if self.zero_stage == 0:
                raise ValueError("dp_replicate > 1 (hybrid sharding) needs zero_stage >= 1: "
                                 "with nothing sharded every rank is a replica (plain DP)")
            if self.dp // self.dp_replicate * self.cp == 1:
                raise ValueError(f"dp_replicate({self.dp_replicate}) = dp({self.dp}) with "
                                 "cp 1 leaves one rank per shard group: nothing is sharded "
                                 "(use zero_stage 0 for plain DP)")
        if self.mtp_standalone and self.vpp == 1:
            raise ValueError("mtp_standalone needs an interleaved schedule (vpp > 1): the last "
                             "stage's last chunk holds only the loss")
        return self

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> ParallelPlan:
        """The plan an estimate's fields name (a ``PlanEstimate`` dump or a validation's plan
        summary): degrees, knobs, stage split and interleaved micro-batch group, to estimate,
        trace or probe it again."""
        pp, vpp = fields["pp"], fields["vpp"]
        return cls(dp=fields["dp"], tp=fields["tp"], pp=pp, cp=fields["cp"], vpp=vpp,
                   micro_batch_size=fields["micro_batch_size"], recompute=fields["recompute"],
                   recompute_num_layers=fields.get("recompute_num_layers"),
                   cpu_offload_layers=fields.get("cpu_offload_layers") or 0,
                   zero_stage=fields["zero_stage"], ep=fields.get("ep", 1),
                   dp_replicate=fields.get("dp_replicate") or 1,
                   etp=fields.get("etp", 1),
                   sequence_parallel=fields["sequence_parallel"],
                   layers_per_stage=tuple(fields["layers_per_stage"]) if pp > 1 else None,
                   microbatch_group_size=fields.get("microbatch_group_size") if vpp > 1
                   else None, mtp_standalone=bool(fields.get("mtp_standalone", False)))

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def model_parallel_size(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def edp(self) -> int:
        """Expert data parallel degree: the ranks that hold the same experts."""
        return self.tp * self.cp * self.dp // (self.ep * self.etp)

    @property
    def dp_shard(self) -> int:
        """Data-parallel ranks of one replica, over which (times cp) ZeRO shards."""
        return self.dp // self.dp_replicate


def a2a_cp_violation(model: ModelSpec, training: TrainingSpec, tp: int, cp: int) -> str | None:
    """Why all-to-all context parallelism (``TrainingSpec.ring_attention`` 'a2a',
    ``planner.cost.ulysses``) cannot run ``cp`` ranks beside ``tp``, or None (also where the
    plan runs no such thing): it splits the heads of one tensor-parallel rank, query and K,V
    alike, over the cp ranks (Transformer Engine's ``AttnFuncWithCPAndQKVOA2A`` asserts
    ``num_heads % cp_size == 0`` for both), and runs only with fused attention. The hierarchy
    ('a2a+p2p') splits them over its cp_a2a_size ranks only, and needs cp a multiple of that
    size (Megatron-LM asserts cp = the product of the hierarchical sizes; at cp = cp_a2a_size
    Transformer Engine runs the all-to-all alone: ``planner.cost.ulysses.cp_split``)."""
    kind = training.ring_attention
    if cp == 1 or kind not in ("a2a", "a2a+p2p"):
        return None
    if not training.flash_attention:
        return (f"all-to-all context parallelism (ring_attention {kind!r}) runs with fused "
                "attention only (training.flash_attention false)")
    size, over = cp, f"cp({cp})"
    if kind == "a2a+p2p":
        size = training.cp_a2a_size or cp
        over = f"cp_a2a_size({size})"
        if cp % size:
            return (f"hierarchical context parallelism (ring_attention 'a2a+p2p') runs its "
                    f"all-to-alls over cp_a2a_size({size}) ranks and a ring over cp / "
                    f"cp_a2a_size groups of them: cp({cp}) must be a multiple of {size}")
    for what, heads in (("num_attention_heads", model.num_attention_heads),
                        ("K,V heads", model.attention_kv_heads)):
        if tp <= heads and heads // tp % size:
            return (f"all-to-all context parallelism (ring_attention {kind!r}) splits each "
                    f"tensor-parallel rank's heads over the {'cp' if size == cp else 'a2a'} "
                    f"ranks: {what}({heads}) / tp({tp}) = {heads // tp} is not divisible by "
                    f"{over}")
    return None


def plan_violations(
    plan: ParallelPlan,
    model: ModelSpec,
    cluster: ClusterSpec,
    training: TrainingSpec,
    *,
    allow_cross_node_tp: bool = True,
) -> list[tuple[str, str]]:
    """Every rule ``plan`` breaks, as (field, reason) pairs with the arithmetic spelled out."""
    out: list[tuple[str, str]] = []
    n = cluster.num_gpus
    if plan.world_size > n:
        out.append(("plan", f"dp({plan.dp}) * tp({plan.tp}) * pp({plan.pp}) * cp({plan.cp}) = "
                            f"{plan.world_size} > GPUs({n})"))
    b, gbs = plan.micro_batch_size, training.global_batch_size
    if plan.grad_accum_steps is not None:
        if plan.dp * b * plan.grad_accum_steps != gbs:
            out.append(("plan.grad_accum_steps",
                        f"dp({plan.dp}) * micro_batch_size({b}) * grad_accum_steps"
                        f"({plan.grad_accum_steps}) = {plan.dp * b * plan.grad_accum_steps} != "
                        f"global_batch_size({gbs})"))
    elif gbs % (plan.dp * b):
        out.append(("plan.micro_batch_size",
                    f"global_batch_size({gbs}) is not divisible by dp({plan.dp}) * "
                    f"micro_batch_size({b}) = {plan.dp * b}"))
    a, kv = model.num_attention_heads, model.kv_heads
    if a % plan.tp:
        out.append(("plan.tp", f"num_attention_heads({a}) is not divisible by tp({plan.tp})"))
    elif kv % plan.tp:
        out.append(("plan.tp", f"num_kv_heads({kv}) is not divisible by tp({plan.tp})"))
    if model.ffn % plan.tp:
        out.append(("plan.tp", f"ffn_hidden_size({model.ffn}) is not divisible by tp({plan.tp})"))
    if not allow_cross_node_tp and plan.tp > 1 and plan.world_size <= n:
        layout = launch_layout(plan.world_size, cluster.gpus_per_node)
        if layout.nproc_per_node % plan.tp:
            out.append(("plan.tp", f"tp({plan.tp}) groups would cross nodes: "
                                   f"{plan.world_size} ranks run {layout.nproc_per_node} per "
                                   f"node on {layout.nnodes} node(s), not a multiple of "
                                   f"tp({plan.tp})"))
    out.extend(moe_violations(plan, model))
    if plan.mtp_standalone and not model.mtp_num_layers:
        out.append(("plan.mtp_standalone", "mtp_standalone places multi-token prediction "
                    "modules; the model has none (model.mtp_num_layers is 0)"))
    if plan.cp > 1 and training.seq_length % (2 * plan.cp):
        out.append(("plan.cp", f"seq_length({training.seq_length}) is not divisible by "
                               f"2 * cp({plan.cp}) = {2 * plan.cp} (load-balanced causal chunks)"))
    if (reason := a2a_cp_violation(model, training, plan.tp, plan.cp)) is not None:
        out.append(("plan.cp", reason))
    L = model.num_layers
    if plan.cpu_offload_layers:
        if plan.cpu_offload_layers >= L:
            out.append(("plan.cpu_offload_layers",
                        f"cpu_offload_layers({plan.cpu_offload_layers}) must be below "
                        f"num_layers({L}) (Megatron-Core offloads fewer layers than it runs)"))
        if cluster.host_link_gb_per_s is None:
            out.append(("plan.cpu_offload_layers",
                        "CPU offloading needs the bandwidth between a GPU and host memory: set "
                        "cluster.host_link_gb_per_s (gb200-nvl72 has it: NVLink-C2C)"))
    chunks = plan.pp * plan.vpp
    if plan.layers_per_stage is not None:
        stages = plan.layers_per_stage
        if sum(stages) != L:
            out.append(("plan.layers_per_stage",
                        f"sum{list(stages)} = {sum(stages)} != num_layers({L})"))
        elif min(stages) < 0:
            out.append(("plan.layers_per_stage",
                        f"{list(stages)}: a stage cannot hold a negative number of layers"))
        elif min(stages[:-1], default=1) < 1 or (stages[-1] < 1 and plan.vpp > 1):
            out.append(("plan.layers_per_stage",
                        f"{list(stages)}: a stage has no layer; only the last stage of a plan "
                        "without virtual stages may hold none (the LM head and the loss alone, "
                        "Megatron-LM's layout '...|L')"))
    elif default_layout(L, plan.pp, plan.vpp) is None:
        out.append(("plan.vpp" if plan.vpp > 1 else "plan.pp",
                    f"pp({plan.pp}) * vpp({plan.vpp}) = {chunks} model chunks cannot be filled "
                    f"by num_layers({L}) (the embedding and the loss may stand in for one layer "
                    "each)"))
    m = grad_accum_steps(plan, training)
    if plan.vpp > 1 and m is not None:
        if m < plan.pp:
            out.append(("plan.grad_accum_steps",
                        f"interleaved 1F1B needs grad_accum_steps({m}) >= pp({plan.pp}) "
                        "(Megatron-LM: pp <= microbatch group <= micro-batches)"))
        elif plan.microbatch_group_size is not None:
            g = plan.microbatch_group_size
            if not valid_microbatch_group(g, m, plan.pp):
                out.append(("plan.microbatch_group_size",
                            f"microbatch_group_size({g}) must lie in [pp({plan.pp}), "
                            f"grad_accum_steps({m})] and leave a last group of 0 or >= pp "
                            f"micro-batches ({m} % {g} = {m % g})"))
    try:
        cluster.gpu.peak_flops(training.precision)
    except ValueError as exc:
        out.append(("training.precision", str(exc)))
    return out


def moe_violations(plan: ParallelPlan, model: ModelSpec) -> list[tuple[str, str]]:
    """Expert-parallel rules (Megatron-Core's parallel folding and argument checks)."""
    out: list[tuple[str, str]] = []
    if not model.is_moe:
        for name in ("ep", "etp"):
            if getattr(plan, name) > 1:
                out.append((f"plan.{name}", f"{name}({getattr(plan, name)}) needs a "
                            "mixture-of-experts model (num_experts > 1)"))
        return out
    E, fe = model.experts, model.expert_ffn
    if E % plan.ep:
        out.append(("plan.ep", f"num_experts({E}) is not divisible by ep({plan.ep})"))
    if fe % plan.etp:
        out.append(("plan.etp", f"moe_ffn_hidden_size({fe}) is not divisible by "
                                f"etp({plan.etp})"))
    fold = plan.tp * plan.cp * plan.dp
    if fold % (plan.ep * plan.etp):
        out.append(("plan.ep", f"ep({plan.ep}) * etp({plan.etp}) = {plan.ep * plan.etp} does "
                               f"not divide tp({plan.tp}) * cp({plan.cp}) * dp({plan.dp}) = "
                               f"{fold} (the expert groups fold into a stage's ranks)"))
    elif plan.dp_replicate > 1 and (fold // plan.dp_replicate) % (plan.ep * plan.etp):
        out.append(("plan.dp_replicate",
                    f"ep({plan.ep}) * etp({plan.etp}) = {plan.ep * plan.etp} does not divide "
                    f"one replica's tp({plan.tp}) * cp({plan.cp}) * dp({plan.dp}) / "
                    f"dp_replicate({plan.dp_replicate}) = {fold // plan.dp_replicate} ranks "
                    "(each replica holds whole expert groups)"))
    return out


def grad_accum_steps(plan: ParallelPlan, training: TrainingSpec) -> int | None:
    """Micro-batches per step per DP rank, or None when the batch does not divide."""
    if plan.grad_accum_steps is not None:
        return plan.grad_accum_steps
    per_rank = plan.dp * plan.micro_batch_size
    if training.global_batch_size % per_rank:
        return None
    return training.global_batch_size // per_rank


def valid_microbatch_group(g: int, m: int, pp: int) -> bool:
    """Megatron-LM's rule for interleaved schedules (``schedules.py``): pp <= g <= m and the
    last group (m mod g) is empty or holds at least pp micro-batches."""
    return pp <= g <= m and (m % g == 0 or m % g >= pp)


def microbatch_group(m: int, pp: int) -> int | None:
    """The smallest valid group: the fewest micro-batches in flight (pp when pp divides m)."""
    return next((g for g in range(pp, m + 1) if valid_microbatch_group(g, m, pp)), None)


def microbatch_groups(m, pp, vpp) -> np.ndarray:
    """``microbatch_group`` for arrays of plans (micro-batches, pp, vpp): each interleaved
    plan's smallest valid group, pp where there are no virtual stages (or no valid group).
    Each distinct (m, pp) of the interleaved plans is solved once."""
    pp = np.asarray(pp, dtype=np.int64)
    m = np.broadcast_to(np.asarray(m, dtype=np.int64), pp.shape)
    inter = np.broadcast_to(np.asarray(vpp) > 1, pp.shape)
    out = pp.copy()
    if not inter.any():
        return out
    mi, pi = m[inter], pp[inter]
    base = int(pi.max()) + 1
    keys, inverse = np.unique(mi * base + pi, return_inverse=True)
    groups = np.array([microbatch_group(int(k) // base, int(k) % base) or int(k) % base
                       for k in keys], dtype=np.int64)
    out[inter] = groups[inverse.reshape(-1)]
    return out


def plan_layout(plan: ParallelPlan, model: ModelSpec) -> Layout:
    """The plan's layers per rank and per chunk (``planner.specs.layout``)."""
    if plan.layers_per_stage is not None:
        return explicit_layout(plan.layers_per_stage, plan.vpp, plan.mtp_standalone,
                               model.mtp_num_layers)
    layout = default_layout(model.num_layers, plan.pp, plan.vpp)
    if layout is None:
        raise PlannerInputError("plan.pp", f"no layout of num_layers({model.num_layers}) over "
                                f"pp({plan.pp}) * vpp({plan.vpp}) chunks")
    return place_mtp(layout, model.mtp_num_layers, plan.mtp_standalone)


def stage_layers(plan: ParallelPlan, model: ModelSpec) -> tuple[int, ...]:
    """Layers held by each pipeline stage (rank)."""
    return plan_layout(plan, model).stages


def check_plan(
    plan: ParallelPlan, model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec
) -> None:
    """Raise PlannerInputError for the first rule ``plan`` breaks."""
    violations = plan_violations(plan, model, cluster, training)
    if violations:
        field, reason = violations[0]
        raise PlannerInputError(field, reason)


def plan_key(p: Any) -> tuple[int, ...]:
    """A plan's degrees and choices as integers, in the order of the search's plan columns
    (``planner.cost.batch.PLAN_FIELDS``): the tie-break order of every ranking. ``p`` is a
    ``ParallelPlan`` or a ``PlanEstimate`` (both carry these fields)."""
    return (p.dp, p.tp, p.pp, p.cp, p.vpp, p.micro_batch_size, RECOMPUTE.index(p.recompute),
            p.zero_stage, int(p.sequence_parallel), p.recompute_num_layers or 0, p.ep, p.etp,
            p.cpu_offload_layers, p.dp_replicate)
