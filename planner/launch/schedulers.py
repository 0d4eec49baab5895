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

On a fragmented allocation (``LaunchShape.hosts``) the artifacts follow the placement: one
torchrun command per node with its ``--node-rank`` and ``CUDA_VISIBLE_DEVICES`` (the node's
chosen GPUs), a hostfile (``name slots=g``, DeepSpeed's and MPI's format), Slurm's
``--nodelist`` with ``--gpus-per-node`` (Slurm binds the GPUs itself: it cannot be told which
indices), and a Kubernetes node affinity on the chosen host names.
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


def host_name(shape: LaunchShape, i: int) -> str:
    """The host name of the i-th node used, or a placeholder when the allocation named none."""
    return shape.hosts[i][0] or f"node{i}"


def node_commands(shape: LaunchShape, program: list[str]) -> list[str]:
    """One shell line per node of a fragmented allocation, run on that node (the first node's
    address is the rendezvous endpoint)."""
    head = shape.hosts[0][0] or "$MASTER_ADDR"
    lines = []
    for i, (_, gpus) in enumerate(shape.hosts):
        argv = torchrun_argv(shape, program, endpoint=head)
        argv.insert(3, f"--node-rank={i}")
        words = [a if a.startswith("--rdzv-endpoint=$") else shlex.quote(a) for a in argv]
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in shape.plan_env)
        lines.append(f"# node {i}: {host_name(shape, i)}\n"
                     f"CUDA_VISIBLE_DEVICES={','.join(map(str, gpus))} {env}" + " ".join(words))
    return lines


def hostfile(shape: LaunchShape) -> str:
    """``name slots=g`` per node (DeepSpeed's and Open MPI's hostfile)."""
    return "".join(f"{host_name(shape, i)} slots={len(g)}\n"
                   for i, (_, g) in enumerate(shape.hosts))


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
    names = [name for name, _ in shape.hosts if name]
    nodelist = ("\n#SBATCH --nodelist=" + ",".join(names)
                if shape.hosts and len(names) == len(shape.hosts) else "")
    # Whole nodes, unless the job takes part of an allocation other jobs share.
    exclusive = "" if shape.hosts else "\n#SBATCH --exclusive"
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in shape.env)
    return f"""#!/bin/bash
{comment}#SBATCH --job-name={shlex.quote(shape.job_name)}
#SBATCH --nodes={shape.nnodes}{nodelist}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={shape.nproc_per_node}{exclusive}
#SBATCH --time={shape.time_limit}
set -euo pipefail

head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')
{exports}

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
                                    *_env(shape)],
                            "ports": [{"containerPort": shape.rdzv_port}],
                            "resources": {"limits": {"nvidia.com/gpu": shape.nproc_per_node}},
                        }],
                        **_node_affinity(shape),
                    }},
                }},
            }],
        },
    }
    return yaml.safe_dump(manifest, sort_keys=False, width=100)


def _env(shape: LaunchShape) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in shape.env]


def _node_affinity(shape: LaunchShape) -> dict:
    """Pods only on the allocation's chosen nodes (when it named them)."""
    names = [name for name, _ in shape.hosts]
    if not names or not all(names):
        return {}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{
            "key": "kubernetes.io/hostname", "operator": "In", "values": names}]}]}}}}


def pytorchjob_manifest(shape: LaunchShape, program: list[str]) -> str:
    """A Kubeflow Training Operator PyTorchJob: the operator sets MASTER_ADDR, RANK and
    WORLD_SIZE; torchrun reads the node rank from RANK (one pod per node)."""
    cmd = ["torchrun", f"--nnodes={shape.nnodes}", f"--nproc-per-node={shape.nproc_per_node}",
           "--node-rank=$(RANK)", "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)",
           "--max-restarts=0", *program]

    def replica(count: int) -> dict:
        return {"replicas": count, "restartPolicy": "Never", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": shape.image, "command": list(cmd),
                            "env": _env(shape),
                            "resources": {"limits": {"nvidia.com/gpu": shape.nproc_per_node}}}]}}}

    specs = {"Master": replica(1)}
    if shape.nnodes > 1:
        specs["Worker"] = replica(shape.nnodes - 1)
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": shape.job_name,
                             "labels": {"app.kubernetes.io/managed-by": "planner"}},
                "spec": {"runPolicy": {"backoffLimit": 0}, "pytorchReplicaSpecs": specs}}
    return yaml.safe_dump(manifest, sort_keys=False, width=100)
