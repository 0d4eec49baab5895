"""Specs: immutable descriptions of the model, the GPUs, the cluster, training and a plan."""

from planner.specs.cluster import ClusterSpec, LinkSpec
from planner.specs.gpu import GPUSpec, PeakTflops
from planner.specs.model import ModelSpec
from planner.specs.plan import ParallelPlan, check_plan, plan_violations, stage_layers
from planner.specs.training import TrainingSpec

__all__ = [
    "ClusterSpec", "GPUSpec", "LinkSpec", "ModelSpec", "ParallelPlan", "PeakTflops",
    "TrainingSpec", "check_plan", "plan_violations", "stage_layers",
]
