"""Launch artifacts: torchrun argv, a Slurm sbatch script, a Kubernetes JobSet or Kubeflow
PyTorchJob manifest, for a plan's training job or a probe.

Shapes follow the conventions in ``research/ecosystem.md``: Slurm runs one task per node and
torchrun spawns the GPU workers, with a c10d rendezvous on the head node's address
(``scontrol show hostnames``, as in torchtitan's ``multinode_trainer.slurm``); the JobSet
(``jobset.x-k8s.io/v1alpha2``) runs one pod per node with a headless service, the first pod as
rendezvous endpoint and the node rank from the job-completion index; the PyTorchJob
(``kubeflow.org/v1``) has a Master and Workers whose container is named ``pytorch``.
Single-shot: ``--max-restarts 0``, ``backoffLimit: 0``. ``program`` is the argv after
torchrun's own options: a script and its arguments, or ``-m module ...``.
"""

from __future__ import annotations

import shlex

import yaml

from planner.launch.context import LaunchShape


def torchrun_argv(shape: LaunchShape, program: list[str],
                  endpoint: str = "$MASTER_ADDR") -> list[str]:
    """The command for every node (``endpoint`` is the head node's address)."""
    return ["torchrun", f"--nnodes={shape.nnodes}", f"--nproc-per-node={shape.nproc_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}:{shape.rdzv_port}",
            f"--rdzv-id={shape.job_name}", "--max-restarts=0", *program]


def sbatch_script(shape: LaunchShape, program: list[str]) -> str:
    cmd = torchrun_argv(shape, program, endpoint="__HEAD__")
    words = []
    for c in cmd:
        if "__HEAD__" in c:
            words.append('"' + c.replace("__HEAD__", "$head_node_ip") + '"')
        elif c == f"--rdzv-id={shape.job_name}":
            words.append('--rdzv-id="$SLURM_JOB_ID"')
        else:
            words.append(shlex.quote(c))
    comment = "".join(f"# {line}\n" for line in shape.comment.splitlines() if line)
    return f"""#!/bin/bash
{comment}#SBATCH --job-name={shlex.quote(shape.job_name)}
#SBATCH --nodes={shape.nnodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={shape.nproc_per_node}
#SBATCH --exclusive
#SBATCH --time={shape.time_limit}
set -euo pipefail

head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')
export NCCL_DEBUG=WARN

srun {" ".join(words)}
"""


def kubernetes_manifest(shape: LaunchShape, program: list[str],
                        annotations: dict[str, str] | None = None) -> str:
    """A JobSet: one pod per node, the first pod the rendezvous endpoint."""
    name = shape.job_name
    cmd = torchrun_argv(shape, program, endpoint=f"{name}-workers-0-0.{name}")
    cmd.insert(3, "--node-rank=$(NODE_RANK)")
    manifest = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "planner"},
                     "annotations": annotations or {}},
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 1,
                "template": {"spec": {
                    "parallelism": shape.nnodes, "completions": shape.nnodes,
                    "backoffLimit": 0, "completionMode": "Indexed",
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "trainer",
                            "image": shape.image,
                            "command": cmd,
                            "env": [{"name": "NODE_RANK", "valueFrom": {"fieldRef": {
                                "fieldPath": "metadata.annotations['batch.kubernetes.io/"
                                             "job-completion-index']"}}},
                                    {"name": "NCCL_DEBUG", "value": "WARN"}],
                            "ports": [{"containerPort": shape.rdzv_port}],
                            "resources": {"limits": {"nvidia.com/gpu": shape.nproc_per_node}},
                        }],
                    }},
                }},
            }],
        },
    }
    return yaml.safe_dump(manifest, sort_keys=False, width=100)


def pytorchjob_manifest(shape: LaunchShape, program: list[str]) -> str:
    """A Kubeflow Training Operator PyTorchJob: the operator sets MASTER_ADDR, RANK and
    WORLD_SIZE; torchrun reads the node rank from RANK (one pod per node)."""
    cmd = ["torchrun", f"--nnodes={shape.nnodes}", f"--nproc-per-node={shape.nproc_per_node}",
           "--node-rank=$(RANK)", "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)",
           "--max-restarts=0", *program]

    def replica(count: int) -> dict:
        return {"replicas": count, "restartPolicy": "Never", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": shape.image, "command": list(cmd),
                            "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
                            "resources": {"limits": {"nvidia.com/gpu": shape.nproc_per_node}}}]}}}

    specs = {"Master": replica(1)}
    if shape.nnodes > 1:
        specs["Worker"] = replica(shape.nnodes - 1)
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": shape.job_name,
                             "labels": {"app.kubernetes.io/managed-by": "planner"}},
                "spec": {"runPolicy": {"backoffLimit": 0}, "pytorchReplicaSpecs": specs}}
    return yaml.safe_dump(manifest, sort_keys=False, width=100)
