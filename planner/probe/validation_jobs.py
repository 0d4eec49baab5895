"""Validation on a cluster: the probe runs of the top plans written as Slurm sbatch scripts or
Kubeflow PyTorchJobs (nccl on the GPUs), a manifest beside them, and, once the jobs have
written their results on the cluster's shared file system, the comparison read back from
that folder (``planner validate-import``). (File I/O and submission: kept in ``probe`` so that
``planner.validation`` stays pure.)

The job folder holds ``validation.json`` (the request, every plan's probe runs), one
``planN-RUN.pattern.json`` per run and its job artifact; the workers write
``RESULTS/planN-RUN.json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from planner.launch.context import LaunchShape
from planner.probe.remote import LAUNCHERS, write_job
from planner.search import PlanRequest
from planner.validation.evaluate import PlanProbe, ValidationResult, evaluate

MANIFEST = "validation.json"


def run_shape(world: int, gpus_per_node: int, name: str) -> LaunchShape:
    """Nodes and ranks per node for a probe run of ``world`` ranks."""
    per_node = min(world, gpus_per_node)
    if world % per_node:
        raise ValueError(f"a probe run of {world} ranks does not fill nodes of "
                         f"{gpus_per_node} GPUs")
    return LaunchShape(nnodes=math.ceil(world / per_node), nproc_per_node=per_node,
                       job_name=name, time_limit="00:30:00",
                       comment="planner validation probe (planner.probe.step_worker)")


def write_validation_job(launcher: str, req: PlanRequest, probes: list[PlanProbe],
                         job_dir: Path, *, gpus_per_node: int, steps: int = 3,
                         result_dir: str | None = None, backend: str = "nccl") -> list[Path]:
    """Write the job folder; returns the job artifacts (one per probe run) to submit."""
    if launcher not in LAUNCHERS:    # before anything is written
        raise ValueError(f"unknown launcher {launcher!r}; choose one of {', '.join(LAUNCHERS)}")
    job_dir.mkdir(parents=True, exist_ok=True)
    results = result_dir or str((job_dir / "results").resolve())
    artifacts = []
    for probe in probes:
        for name, pattern in probe.runs.items():
            stem = f"plan{probe.index + 1}-{name}"
            pfile = (job_dir / f"{stem}.pattern.json").resolve()
            pfile.write_text(json.dumps(pattern))
            program = ["-m", "planner.probe.step_worker", "--backend", backend,
                       "--pattern", str(pfile), "--steps", str(steps),
                       "--out", f"{results}/{stem}.json"]
            shape = run_shape(PlanProbe.world(pattern), gpus_per_node, f"validate-{stem}")
            artifacts.append(write_job(launcher, shape, program, job_dir / stem))
    (job_dir / MANIFEST).write_text(json.dumps({
        "request": req.model_dump(mode="json"), "launcher": launcher, "backend": backend,
        "result_dir": results, "probes": [p.model_dump(mode="json") for p in probes]},
        indent=1))
    return artifacts


def import_validation(job_dir: Path, tolerance: float = 0.5) -> ValidationResult:
    """Compare what the cluster's probe runs wrote with the prediction; runs without a result
    leave their plan unmeasured (with a note)."""
    manifest = json.loads((job_dir / MANIFEST).read_text())
    req = PlanRequest.model_validate(manifest["request"])
    probes = [PlanProbe.model_validate(p) for p in manifest["probes"]]
    results = Path(manifest["result_dir"])
    raws: dict[int, dict[str, dict]] = {}
    missing = []
    for probe in probes:
        got = {}
        for name in probe.runs:
            path = results / f"plan{probe.index + 1}-{name}.json"
            if path.is_file():
                got[name] = json.loads(path.read_text())
            else:
                missing.append(path.name)
        if len(got) == len(probe.runs):
            raws[probe.index] = got
    result = evaluate(req, probes, raws, tolerance=tolerance)
    return result.model_copy(update={"backend": manifest["backend"], "missing": missing})
