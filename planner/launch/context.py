"""What every renderer reads: the plan, the model, the cluster and the training shape."""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.efficiency import EfficiencyModel
from planner.cost.tp_overlap import overlap_runs
from planner.result import PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec
from planner.specs.layout import Layout, explicit_layout
from planner.specs.placement import launch_layout

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16", "fp4": "bfloat16",
               "fp32": "float32", "tf32": "float32"}


# What every launch file sets for every rank.
DEFAULT_ENV: tuple[tuple[str, str], ...] = (("NCCL_DEBUG", "WARN"),)


@dataclass(frozen=True)
class LaunchShape:
    """What a scheduler artifact needs: how many nodes and ranks, a name, limits, an image."""

    nnodes: int
    nproc_per_node: int
    job_name: str = "planner-job"
    time_limit: str = "24:00:00"
    image: str = "nvcr.io/nvidia/pytorch:24.12-py3"
    rdzv_port: int = 29500
    comment: str = ""
    # A fragmented allocation: per node (node rank order) its host name and the GPUs used.
    hosts: tuple[tuple[str | None, tuple[int, ...]], ...] = ()
    # Environment of every rank (name, value), in order: the defaults, then what the plan needs.
    env: tuple[tuple[str, str], ...] = DEFAULT_ENV

    @property
    def plan_env(self) -> tuple[tuple[str, str], ...]:
        """The environment beyond the defaults (what the per-node commands spell out)."""
        return tuple(e for e in self.env if e not in DEFAULT_ENV)


@dataclass(frozen=True)
class LaunchContext:
    plan: PlanEstimate
    model: ModelSpec
    cluster: ClusterSpec
    training: TrainingSpec
    job_name: str = "planner-job"
    entrypoint: str = "pretrain_gpt.py"
    image: str = "nvcr.io/nvidia/pytorch:24.12-py3"
    time_limit: str = "24:00:00"
    rdzv_port: int = 29500
    # The efficiency model the prediction used, where the caller has it (what it costed that
    # the launch files cannot turn on: ``unlaunched_overlap``).
    efficiency: EfficiencyModel | None = None

    @property
    def nproc_per_node(self) -> int:
        if self.hosts:
            return len(self.hosts[0][1])
        return launch_layout(self.plan.gpus_used, self.cluster.host_gpus).nproc_per_node

    @property
    def nnodes(self) -> int:
        if self.hosts:
            return len(self.hosts)
        return launch_layout(self.plan.gpus_used, self.cluster.host_gpus).nnodes

    @property
    def hosts(self) -> tuple[tuple[str | None, tuple[int, ...]], ...]:
        """The nodes and GPUs of a plan on a fragmented allocation (empty otherwise)."""
        pl = self.plan.placement
        if pl is None or not pl.nodes:
            return ()
        return tuple((n.name, tuple(n.local_gpus)) for n in pl.nodes)

    @property
    def layout(self) -> Layout:
        return explicit_layout(tuple(self.plan.layers_per_stage), self.plan.vpp,
                               self.plan.mtp_standalone, self.model.mtp_num_layers)

    @property
    def shape(self) -> LaunchShape:
        p = self.plan
        comment = (f"{self.model.name}: dp={p.dp} tp={p.tp} pp={p.pp} cp={p.cp} vpp={p.vpp} on "
                   f"{p.gpus_used} GPUs ({self.nnodes} nodes x {self.nproc_per_node}); predicted "
                   f"step {p.step_time_s:.3f} s, {p.memory_per_gpu_gib:.1f} GiB per GPU.")
        return LaunchShape(self.nnodes, self.nproc_per_node, self.job_name, self.time_limit,
                           self.image, self.rdzv_port, comment, self.hosts,
                           (*DEFAULT_ENV, *self.nccl_env, *self.overlap_env))

    @property
    def nccl_env(self) -> tuple[tuple[str, str], ...]:
        """NCCL settings the prediction assumed where NCCL's default differs: on NVSwitch nodes
        of Hopper or newer GPUs NCCL runs all_reduce with NVLink SHARP unless told not to, so a
        cluster costed without it (``intra_node.nvls_busbw_ratio`` null) launches with
        ``NCCL_NVLS_ENABLE=0``."""
        c = self.cluster
        if c.nvls_capable and c.nvls_ratio is None:
            return (("NCCL_NVLS_ENABLE", "0"),)
        return ()

    @property
    def nvlink_ranks(self) -> int:
        """Ranks a node's NVLink domain holds, as the step model places them
        (``CostTables.npn``: the node's GPUs, a rack's on NVL72), or on a fragmented
        allocation the ranks each node runs."""
        if self.hosts:
            return self.nproc_per_node
        return launch_layout(self.plan.gpus_used, self.cluster.gpus_per_node).nproc_per_node

    @property
    def tp_overlap(self) -> str:
        """The TP communication overlap the prediction costed (``tp_overlap.overlap_runs``):
        ``training.tp_comm_overlap`` where the plan runs it, else 'none' (a TP group across
        NVLink domains, or no sequence parallelism)."""
        t, p = self.training, self.plan
        runs = overlap_runs(t, p.tp, p.sequence_parallel, self.nvlink_ranks)
        return t.tp_comm_overlap if runs else "none"

    @property
    def unlaunched_overlap(self) -> float:
        """The share of TP's blocking collectives the prediction hid that the launch files do
        not overlap: an explicit ``efficiency.tp_comm_overlap``, which the step model costs on
        every TP plan, where ``tp_overlap`` runs none (no ``training.tp_comm_overlap``, or a
        plan it does not run on); else 0."""
        share = self.efficiency.tp_comm_overlap if self.efficiency is not None else None
        if share and self.plan.tp > 1 and self.tp_overlap == "none":
            return share
        return 0.0

    @property
    def overlap_env(self) -> tuple[tuple[str, str], ...]:
        """Transformer Engine's userbuffers (``training.tp_comm_overlap`` 'te') bind the TP
        ranks' buffers with CUDA multicast, which needs an NVSwitch of Hopper or later
        (``ClusterSpec.nvls_capable``); elsewhere ``initialize_ub`` asserts ``UB_SKIPMC=1``
        ("Launch app with UB_SKIPMC=1 to try CUDA IPC instead",
        transformer_engine/pytorch/module/base.py), which the launch sets."""
        if self.tp_overlap == "te" and not self.cluster.nvls_capable:
            return (("UB_SKIPMC", "1"),)
        return ()

