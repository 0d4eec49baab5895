"""The ``launch`` object of a plan, and one artifact by format (for files and --emit).

A framework's artifact exists only when that framework runs the plan as predicted
(``planner.frameworks``); asking for another one is refused with what the framework lacks
(``NotRunnable``), never rendered as a different plan. The scheduler artifacts (torchrun,
sbatch, Kubernetes) start the first framework that runs the plan: Megatron-LM's
``pretrain_gpt.py``, torchtitan's ``torchtitan.train`` with the TOML, or a training script with
the DeepSpeed config.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Literal, TypeVar, get_args

from planner.cost.efficiency import EfficiencyModel
from planner.frameworks import FRAMEWORKS, model_rule_args, reasons_by_framework
from planner.launch.context import LaunchContext
from planner.launch.deepspeed import deepspeed_config
from planner.launch.megatron import megatron_args
from planner.launch.schedulers import (
    hostfile,
    kubernetes_manifest,
    node_commands,
    sbatch_script,
    torchrun_argv,
)
from planner.launch.torchtitan import torchtitan_toml
from planner.result import LaunchSpec, PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

LaunchFormat = Literal["megatron", "torchtitan", "deepspeed", "torchrun", "sbatch", "kubernetes",
                       "hostfile"]
# format -> (media type, file extension)
FORMATS: dict[str, tuple[str, str]] = {
    "megatron": ("text/plain", "args"),
    "torchtitan": ("application/toml", "toml"),
    "deepspeed": ("application/json", "json"),
    "torchrun": ("text/plain", "sh"),
    "sbatch": ("text/x-shellscript", "sbatch"),
    "kubernetes": ("application/yaml", "yaml"),
    "hostfile": ("text/plain", "hostfile"),
}
SCHEDULER_FORMATS = ("torchrun", "sbatch", "kubernetes", "hostfile")
assert set(FORMATS) == set(get_args(LaunchFormat))


T = TypeVar("T")


class NotRunnable(ValueError):
    """A framework cannot run the plan as predicted; ``reasons`` say what it lacks."""

    def __init__(self, framework: str, reasons: list[str]):
        self.framework, self.reasons = framework, reasons
        super().__init__(f"{framework} cannot run this plan as predicted: " + "; ".join(reasons))


def job_name_for(model: ModelSpec, plan: PlanEstimate) -> str:
    """A DNS-1123 label (Kubernetes, Slurm): lowercase letters, digits and dashes."""
    base = re.sub(r"[^a-z0-9]+", "-", model.name.lower()).strip("-")[:40] or "model"
    return f"{base}-tp{plan.tp}-pp{plan.pp}-dp{plan.dp}"[:63].strip("-")


def build_launch(plan: PlanEstimate, model: ModelSpec, cluster: ClusterSpec,
                 training: TrainingSpec, *, job_name: str | None = None,
                 efficiency: EfficiencyModel | None = None) -> LaunchSpec:
    ctx = LaunchContext(plan=plan, model=model, cluster=cluster, training=training,
                        job_name=job_name or job_name_for(model, plan), efficiency=efficiency)
    reasons = reasons_by_framework(plan, plan.grad_accum_steps, ctx.layout.kind == "even",
                                   training, plan.microbatch_group_size,
                                   *model_rule_args(model))
    runs = [f for f in FRAMEWORKS if not reasons[f]]
    notes: list[str] = []
    if ctx.unlaunched_overlap:
        notes.append(f"the prediction hides {ctx.unlaunched_overlap:.0%} of TP's blocking "
                     "collectives (efficiency.tp_comm_overlap), which these launch files do not "
                     "turn on: set training.tp_comm_overlap ('te' for Megatron-LM, 'async_tp' "
                     "for torchtitan) to run the overlap and cost it where it runs")
    margs = toml = ds = None
    if "megatron" in runs:
        margs, n = megatron_args(ctx)
        notes += n
    if "torchtitan" in runs:
        toml, n = torchtitan_toml(ctx)
        notes += n
    if "deepspeed" in runs:
        ds, n = deepspeed_config(ctx)
        notes += n
    withheld: dict[str, str] = {}
    if cluster.pools is not None:
        # Node rank r must run on the cluster node the placement names (its pool's GPUs):
        # the per-node torchrun commands say where; Slurm and a JobSet would pick any nodes.
        nodes = plan.placement.nodes if plan.placement and plan.placement.nodes else []
        notes.append(f"stages on pools ({plan.stage_runs()}): start node rank r on cluster "
                     "node " + ", ".join(f"{r}: {n.index}" for r, n in enumerate(nodes))
                     + " (the per-node torchrun commands; the same arguments on every node)")
        why = ("a cluster of pools: Slurm or Kubernetes would put the node ranks on nodes of "
               "any pool, so stages could run on other GPUs than predicted; run the per-node "
               "torchrun commands on the cluster nodes the placement names")
        withheld = {"sbatch": why, "kubernetes": why}
    launcher = next((f for f in FRAMEWORKS if f in runs), None)
    programs = {"megatron": ["pretrain_gpt.py", *(margs or [])],
                "torchtitan": ["-m", "torchtitan.train", "--job.config_file", "plan.toml"],
                "deepspeed": ["train.py", "--deepspeed_config", "ds_config.json"]}
    program = programs[launcher] if launcher else None
    p = plan
    annotations = {"planner/plan": f"dp={p.dp},tp={p.tp},pp={p.pp},cp={p.cp},vpp={p.vpp}"}
    return LaunchSpec(
        nnodes=ctx.nnodes, nproc_per_node=ctx.nproc_per_node, frameworks=runs,
        not_runnable={f: r for f, r in reasons.items() if r},
        megatron_args=margs, torchtitan_toml=toml, deepspeed_config=ds,
        launcher_framework=launcher,
        torchrun=torchrun_argv(ctx.shape, program) if program else None,
        env=dict((*ctx.nccl_env, *ctx.overlap_env)),
        slurm_sbatch=(sbatch_script(ctx.shape, program)
                      if program and "sbatch" not in withheld else None),
        kubernetes=(kubernetes_manifest(ctx.shape, program, annotations)
                    if program and "kubernetes" not in withheld else None),
        withheld=withheld,
        node_commands=node_commands(ctx.shape, program) if program and ctx.hosts else None,
        hostfile=hostfile(ctx.shape) if ctx.hosts else None,
        notes=notes,
    )


def with_launch(est: PlanEstimate, model: ModelSpec, cluster: ClusterSpec,
                training: TrainingSpec, efficiency: EfficiencyModel | None = None
                ) -> PlanEstimate:
    """The plan with its ``launch`` object (built at the edge: the cost model does not)."""
    return est.model_copy(update={"launch": build_launch(est, model, cluster, training,
                                                         efficiency=efficiency)})


def render(launch: LaunchSpec, fmt: str) -> str:
    """One artifact as the text of a file; ``NotRunnable`` when its framework (or, for the
    scheduler formats, every framework) cannot run the plan as predicted."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt in FRAMEWORKS and fmt not in launch.frameworks:
        raise NotRunnable(fmt, launch.not_runnable.get(fmt) or ["not among the plan's frameworks"])
    if fmt in SCHEDULER_FORMATS and launch.launcher_framework is None:
        raise NotRunnable(fmt, ["no framework runs this plan as predicted: " + "; ".join(
            f"{f}: {', '.join(r)}" for f, r in launch.not_runnable.items())])
    if fmt == "megatron":   # one flag (and its value) per line, ready for a launch script
        lines: list[str] = []
        for arg in _built(launch.megatron_args, fmt):
            if arg.startswith("--") or not lines:
                lines.append(shlex.quote(arg))
            else:
                lines[-1] += " " + shlex.quote(arg)
        return " \\\n".join(lines) + "\n"
    if fmt == "torchtitan":
        return _built(launch.torchtitan_toml, fmt)
    if fmt == "deepspeed":
        return json.dumps(launch.deepspeed_config, indent=2) + "\n"
    if fmt == "hostfile":
        if launch.hostfile is None:
            raise NotRunnable(fmt, ["the plan is not on a fragmented allocation: every node "
                                    "runs the same command (torchrun)"])
        return launch.hostfile
    if fmt == "torchrun" and launch.node_commands:
        return "\n".join(launch.node_commands) + "\n"
    if fmt == "torchrun":
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in launch.env.items())
        return env + " ".join(shlex.quote(a) if not a.startswith("--rdzv-endpoint=$") else a
                              for a in _built(launch.torchrun, fmt)) + "\n"
    if fmt == "sbatch":
        return _built(launch.slurm_sbatch, fmt, launch)
    return _built(launch.kubernetes, fmt, launch)


def _built(value: T | None, fmt: str, launch: LaunchSpec | None = None) -> T:
    """An artifact the launch object holds for a plan its framework runs (None when it was
    withheld, and then the reason)."""
    if value is None:
        why = launch.withheld.get(fmt) if launch else None
        raise NotRunnable(fmt, [why or "no such artifact was built for this plan"])
    return value
