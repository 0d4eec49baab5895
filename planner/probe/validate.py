"""Validation on this machine's ranks: each probe run of ``planner.validation.evaluate.prepare``
runs ``planner.probe.step_worker`` under local torchrun (hard timeout, whole process group
killed on failure or timeout, the failing rank's stderr in the error), then ``evaluate``
compares."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from planner.probe.local import run_module
from planner.search import PlanRequest
from planner.validation.evaluate import Compute, Mode, PlanProbe, ValidationResult, evaluate, prepare


def run_pattern(pattern: dict, nproc: int, *, steps: int, timeout_s: float, compute: str,
                trace: str = "") -> dict:
    with tempfile.TemporaryDirectory(prefix="planner-validate-") as tmp:
        pfile = Path(tmp, "pattern.json")
        pfile.write_text(json.dumps(pattern))
        return run_module(nproc, "planner.probe.step_worker",
                          ["--pattern", str(pfile), "--steps", str(steps), "--compute", compute,
                           *(["--trace", trace] if trace else [])], timeout_s=timeout_s)


class Measured(NamedTuple):
    """What the probes of one validation measured: the probe runs, the workers' JSON per plan
    index and run name, and the measured traces written."""

    probes: list[PlanProbe]
    raws: dict[int, dict[str, dict]]
    traces: dict[int, str]


def measure(req: PlanRequest, *, nproc: int, top_k: int = 3, steps: int = 2,
            timeout_s: float = 300, trace_dir: Path | None = None,
            on_progress: Callable[[int, int], None] | None = None, mode: Mode = "auto",
            compute: Compute = "auto") -> Measured:
    """Run the probes of the ``top_k`` best plans of ``req`` on ``nproc`` local ranks (see
    ``prepare``); ``evaluate`` compares them with a prediction."""
    probes = prepare(req, nproc=nproc, top_k=top_k, mode=mode)
    raws: dict[int, dict[str, dict]] = {}
    traces: dict[int, str] = {}
    for k, probe in enumerate(probes):
        if on_progress:
            on_progress(k, len(probes))
        trace = str(trace_dir / f"plan{probe.index + 1}-measured.json") if trace_dir else ""
        raws[probe.index] = {}
        for name, pattern in probe.runs.items():
            traced = trace if name in ("full", "stage") else ""
            raws[probe.index][name] = run_pattern(pattern, PlanProbe.world(pattern), steps=steps,
                                                  timeout_s=timeout_s, compute=compute,
                                                  trace=traced)
        if trace and Path(trace).is_file():
            traces[probe.index] = trace
    return Measured(probes, raws, traces)


def validate(req: PlanRequest, *, nproc: int, top_k: int = 3, steps: int = 2,
             timeout_s: float = 300, tolerance: float = 0.5, trace_dir: Path | None = None,
             on_progress: Callable[[int, int], None] | None = None, mode: Mode = "auto",
             compute: Compute = "auto") -> ValidationResult:
    """Validate the ``top_k`` best plans of ``req`` on ``nproc`` local ranks: measure, then
    compare with the prediction."""
    got = measure(req, nproc=nproc, top_k=top_k, steps=steps, timeout_s=timeout_s,
                  trace_dir=trace_dir, on_progress=on_progress, mode=mode, compute=compute)
    return evaluate(req, got.probes, got.raws, tolerance=tolerance, traces=got.traces)
