"""Sweeps on a cluster: a Slurm sbatch script or a Kubeflow PyTorchJob running the sweep
worker on every node, written to a folder and submitted when ``sbatch`` / ``kubectl`` exist.
The worker writes its raw result to ``result_path`` (a path on the cluster's shared file
system); ``planner calibrate import-sweep`` turns it into a calibration."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from planner.launch.context import LaunchShape
from planner.launch.schedulers import pytorchjob_manifest, sbatch_script

LAUNCHERS = ("slurm", "kubernetes")


def sweep_program(worker_args: list[str], result_path: str) -> list[str]:
    return ["-m", "planner.probe.sweep_worker", *worker_args, "--out", result_path]


def write_job(launcher: str, shape: LaunchShape, program: list[str], stem: Path) -> Path:
    """The job artifact of ``launcher`` running ``program`` (``python`` arguments) on ``shape``:
    ``STEM.sbatch`` or ``STEM-pytorchjob.yaml``; returns its path."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; choose one of {', '.join(LAUNCHERS)}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    if launcher == "slurm":
        path = stem.with_name(stem.name + ".sbatch")
        path.write_text(sbatch_script(shape, program))
    else:
        path = stem.with_name(stem.name + "-pytorchjob.yaml")
        path.write_text(pytorchjob_manifest(shape, program))
    return path


def write_sweep_job(launcher: str, shape: LaunchShape, worker_args: list[str],
                    result_path: str, out_dir: Path) -> Path:
    """Write the sweep's job artifact for ``launcher``; returns its path."""
    return write_job(launcher, shape, sweep_program(worker_args, result_path), out_dir / "sweep")


def submit(launcher: str, artifact: Path, timeout_s: float = 60) -> str:
    """Submit with sbatch or kubectl when installed (argv only, bounded in time); otherwise say
    how to submit it."""
    tool = "sbatch" if launcher == "slurm" else "kubectl"
    exe = shutil.which(tool)
    if exe is None:
        how = (f"sbatch {artifact}" if launcher == "slurm" else f"kubectl apply -f {artifact}")
        return f"{tool} is not installed here; submit it with: {how}"
    argv = [exe, "--parsable", str(artifact)] if launcher == "slurm" else \
        [exe, "apply", "-f", str(artifact)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return f"submitted: {done.stdout.strip()}"
