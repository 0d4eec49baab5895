"""What every renderer reads: the plan, the model, the cluster and the training shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.result import PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16", "fp32": "float32",
               "tf32": "float32"}


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

    @property
    def nproc_per_node(self) -> int:
        return min(self.cluster.gpus_per_node, self.plan.gpus_used)

    @property
    def nnodes(self) -> int:
        return math.ceil(self.plan.gpus_used / self.nproc_per_node)

    @property
    def shape(self) -> LaunchShape:
        p = self.plan
        comment = (f"{self.model.name}: dp={p.dp} tp={p.tp} pp={p.pp} cp={p.cp} vpp={p.vpp} on "
                   f"{p.gpus_used} GPUs ({self.nnodes} nodes x {self.nproc_per_node}); predicted "
                   f"step {p.step_time_s:.3f} s, {p.memory_per_gpu_gib:.1f} GiB per GPU.")
        return LaunchShape(self.nnodes, self.nproc_per_node, self.job_name, self.time_limit,
                           self.image, self.rdzv_port, comment)

    @property
    def uneven_stages(self) -> tuple[int, int] | None:
        """(first, last) stage layer counts when they differ from the middle ones."""
        lay = self.plan.layers_per_stage
        if len(lay) < 2:
            return None
        middle = lay[1:-1]
        even = self.model.num_layers // len(lay)
        if len(set(lay)) == 1 or (not middle and lay[0] == lay[-1] == even):
            return None
        return lay[0], lay[-1]
