"""The ``launch`` object of a plan, and one artifact by format (for files and --emit)."""

from __future__ import annotations

import json
import re
import shlex

from planner.launch.context import LaunchContext
from planner.launch.deepspeed import deepspeed_config
from planner.launch.megatron import megatron_args
from planner.launch.schedulers import kubernetes_manifest, sbatch_script, torchrun_argv
from planner.launch.torchtitan import torchtitan_toml
from planner.result import LaunchSpec, PlanEstimate
from planner.specs import ClusterSpec, ModelSpec, TrainingSpec

# format -> (media type, file extension)
FORMATS: dict[str, tuple[str, str]] = {
    "megatron": ("text/plain", "args"),
    "torchtitan": ("application/toml", "toml"),
    "deepspeed": ("application/json", "json"),
    "torchrun": ("text/plain", "sh"),
    "sbatch": ("text/x-shellscript", "sbatch"),
    "kubernetes": ("application/yaml", "yaml"),
}


def job_name_for(model: ModelSpec, plan: PlanEstimate) -> str:
    """A DNS-1123 label (Kubernetes, Slurm): lowercase letters, digits and dashes."""
    base = re.sub(r"[^a-z0-9]+", "-", model.name.lower()).strip("-")[:40] or "model"
    return f"{base}-tp{plan.tp}-pp{plan.pp}-dp{plan.dp}"[:63].strip("-")


def build_launch(plan: PlanEstimate, model: ModelSpec, cluster: ClusterSpec,
                 training: TrainingSpec, *, job_name: str | None = None) -> LaunchSpec:
    ctx = LaunchContext(plan=plan, model=model, cluster=cluster, training=training,
                        job_name=job_name or job_name_for(model, plan))
    margs, n1 = megatron_args(ctx)
    toml, n2 = torchtitan_toml(ctx)
    ds, n3 = deepspeed_config(ctx)
    program = [ctx.entrypoint, *margs]
    p = plan
    annotations = {"planner/plan": f"dp={p.dp},tp={p.tp},pp={p.pp},cp={p.cp},vpp={p.vpp}"}
    return LaunchSpec(
        nnodes=ctx.nnodes, nproc_per_node=ctx.nproc_per_node, megatron_args=margs,
        torchtitan_toml=toml, deepspeed_config=ds, torchrun=torchrun_argv(ctx.shape, program),
        slurm_sbatch=sbatch_script(ctx.shape, program),
        kubernetes=kubernetes_manifest(ctx.shape, program, annotations),
        notes=n1 + n2 + n3,
    )


def render(launch: LaunchSpec, fmt: str) -> str:
    """One artifact as the text of a file."""
    if fmt == "megatron":   # one flag (and its value) per line, ready for a launch script
        lines: list[str] = []
        for arg in launch.megatron_args:
            if arg.startswith("--") or not lines:
                lines.append(shlex.quote(arg))
            else:
                lines[-1] += " " + shlex.quote(arg)
        return " \\\n".join(lines) + "\n"
    if fmt == "torchtitan":
        return launch.torchtitan_toml
    if fmt == "deepspeed":
        if launch.deepspeed_config is None:
            raise ValueError(next((n for n in launch.notes if n.startswith("DeepSpeed")),
                                  "no DeepSpeed config for this plan"))
        return json.dumps(launch.deepspeed_config, indent=2) + "\n"
    if fmt == "torchrun":
        return " ".join(shlex.quote(a) if not a.startswith("--rdzv-endpoint=$") else a
                        for a in launch.torchrun) + "\n"
    if fmt == "sbatch":
        return launch.slurm_sbatch
    if fmt == "kubernetes":
        return launch.kubernetes
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
