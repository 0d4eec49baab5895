"""Launch artifacts for a plan: torchrun argv, a Slurm sbatch script, a Kubernetes JobSet.

Shapes follow the conventions in ``research/ecosystem.md``: Slurm runs one task per node and
torchrun spawns the GPU workers, with a c10d rendezvous on the head node's address
(``scontrol show hostnames``, as in torchtitan's ``multinode_trainer.slurm``); the JobSet
(``jobset.x-k8s.io/v1alpha2``) runs one pod per node with a headless service, the first pod as
rendezvous endpoint and the node rank from the job-completion index. Single-shot:
``--max-restarts 0`` and ``backoffLimit: 0``.
"""

from __future__ import annotations

import shlex

import yaml

from planner.launch.context import LaunchContext


def torchrun_argv(ctx: LaunchContext, script_args: list[str],
                  endpoint: str = "$MASTER_ADDR") -> list[str]:
    """The command for every node (``endpoint`` is the head node's address)."""
    return ["torchrun", f"--nnodes={ctx.nnodes}", f"--nproc-per-node={ctx.nproc_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}:{ctx.rdzv_port}",
            f"--rdzv-id={ctx.job_name}", "--max-restarts=0", ctx.entrypoint, *script_args]


def sbatch_script(ctx: LaunchContext, script_args: list[str]) -> str:
    cmd = torchrun_argv(ctx, script_args, endpoint="__HEAD__")
    cmd = [c.replace("__HEAD__", "$head_node_ip") if "__HEAD__" in c else c for c in cmd]
    quoted = " ".join(shlex.quote(c) if "$head_node_ip" not in c else f'"{c}"' for c in cmd)
    quoted = quoted.replace(f"--rdzv-id={ctx.job_name}", '--rdzv-id="$SLURM_JOB_ID"')
    p = ctx.plan
    return f"""#!/bin/bash
# {ctx.model.name}: dp={p.dp} tp={p.tp} pp={p.pp} cp={p.cp} vpp={p.vpp} on {p.gpus_used} GPUs
# ({ctx.nnodes} nodes x {ctx.nproc_per_node}); predicted step {p.step_time_s:.3f} s, \
{p.memory_per_gpu_gib:.1f} GiB per GPU.
#SBATCH --job-name={shlex.quote(ctx.job_name)}
#SBATCH --nodes={ctx.nnodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={ctx.nproc_per_node}
#SBATCH --exclusive
#SBATCH --time={ctx.time_limit}
set -euo pipefail

head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')
export NCCL_DEBUG=WARN

srun {quoted}
"""


def kubernetes_manifest(ctx: LaunchContext, script_args: list[str]) -> str:
    name = ctx.job_name
    endpoint = f"{name}-workers-0-0.{name}"
    cmd = torchrun_argv(ctx, script_args, endpoint=endpoint)
    cmd.insert(3, "--node-rank=$(NODE_RANK)")
    p = ctx.plan
    manifest = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "planner"},
                     "annotations": {"planner/plan": f"dp={p.dp},tp={p.tp},pp={p.pp},"
                                                     f"cp={p.cp},vpp={p.vpp}"}},
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 1,
                "template": {"spec": {
                    "parallelism": ctx.nnodes, "completions": ctx.nnodes, "backoffLimit": 0,
                    "completionMode": "Indexed",
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "trainer",
                            "image": ctx.image,
                            "command": cmd,
                            "env": [{"name": "NODE_RANK", "valueFrom": {"fieldRef": {
                                "fieldPath": "metadata.annotations['batch.kubernetes.io/"
                                             "job-completion-index']"}}},
                                    {"name": "NCCL_DEBUG", "value": "WARN"}],
                            "ports": [{"containerPort": ctx.rdzv_port}],
                            "resources": {"limits": {"nvidia.com/gpu": ctx.nproc_per_node}},
                        }],
                    }},
                }},
            }],
        },
    }
    return yaml.safe_dump(manifest, sort_keys=False, width=100)
