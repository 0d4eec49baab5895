"""Validation: run the top plans as short probe jobs, compare with the prediction, re-rank.

Each plan's step pattern (``pattern.py``) runs on local ranks with ``planner.probe.step_worker``
(torchrun, hard timeout, whole process group killed on failure). The probe also measures the
achieved matmul rate of the plan's GEMM shapes; the prediction is recomputed with that rate
(so compute predictions rest on a measured rate, on a CPU as on a GPU) before the comparison.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from planner.cost import estimate
from planner.cost.tables import cost_tables
from planner.probe.local import run_module
from planner.search import PlanRequest, plan
from planner.validation.compare import (
    kendall_tau,
    measured_components,
    predicted_components,
    relative_errors,
)
from planner.validation.pattern import NotProbeable, step_pattern


class ValidatedPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    plan: dict
    predicted: dict
    measured: dict | None
    rel_err: dict[str, float] = Field(default_factory=dict)
    flagged: bool = False
    trace: str | None = None
    note: str | None = None


class ValidationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str | None = None
    status: str
    mode: str = "full"
    backend: str = "gloo"
    plans: list[ValidatedPlan]
    reranked: list[int]
    kendall_tau: float | None
    tolerance: float


def validate(req: PlanRequest, *, nproc: int, top_k: int = 3, steps: int = 2,
             timeout_s: float = 300, tolerance: float = 0.5, trace_dir: Path | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> ValidationResult:
    """Validate the ``top_k`` best plans of ``req`` whose world size is ``nproc``."""
    req = req.model_copy(update={"search": req.search.model_copy(update={"top_k": top_k})})
    result = plan(req)
    out: list[ValidatedPlan] = []
    for j, est in enumerate(result.plans):
        if on_progress:
            on_progress(j, len(result.plans))
        keys = ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "grad_accum_steps",
                "recompute", "zero_stage", "sequence_parallel", "layers_per_stage")
        summary = {k: getattr(est, k) for k in keys}
        if est.gpus_used != nproc:
            out.append(ValidatedPlan(plan=summary, predicted={}, measured=None,
                                     note=f"needs {est.gpus_used} ranks; {nproc} were given "
                                          "(sampled mode is not implemented yet)"))
            continue
        tables = cost_tables(req.model, req.cluster, req.training, req.efficiency,
                             req.calibration)
        try:
            pattern = step_pattern(est, tables)
        except NotProbeable as exc:
            out.append(ValidatedPlan(plan=summary, predicted={}, measured=None, note=str(exc)))
            continue
        with tempfile.TemporaryDirectory(prefix="planner-validate-") as tmp:
            pfile = Path(tmp, "pattern.json")
            pfile.write_text(json.dumps(pattern))
            trace = str(trace_dir / f"plan{j + 1}-measured.json") if trace_dir else ""
            raw = run_module(nproc, "planner.probe.step_worker",
                             ["--pattern", str(pfile), "--steps", str(steps),
                              *(["--trace", trace] if trace else [])], timeout_s=timeout_s)
        meas = measured_components(raw["ranks"])
        # Re-predict compute with the matmul rate the probe achieved on these shapes.
        rate = min(r["matmul_flops_per_s"] for r in raw["ranks"])
        peak = req.cluster.gpu.peak_flops(req.training.precision)
        eff = req.efficiency.model_copy(update={"matmul_peak_fraction":
                                                min(1.0, max(1e-3, rate / peak)),
                                                "matmul_half_dim": 0.0})
        est2 = estimate(req.model, req.cluster, req.training,
                        _plan_of(est), eff, calibration=req.calibration)
        pred = predicted_components(est2.breakdown, est2.communication)
        rel = relative_errors(pred, meas)
        out.append(ValidatedPlan(
            plan=summary, predicted={"step_time_s": pred["step_time_s"], "breakdown": pred},
            measured={"step_time_s": meas["step_time_s"], "breakdown": meas, "steps": raw["steps"],
                      "matmul_tflops": rate / 1e12},
            rel_err=rel, flagged=abs(rel.get("step_time_s", 0.0)) > tolerance,
            trace=trace or None))
    measured = [(i, p.measured["step_time_s"]) for i, p in enumerate(out) if p.measured]
    reranked = [i for i, _ in sorted(measured, key=lambda x: x[1])]
    tau = None
    if len(measured) >= 2:
        tau = kendall_tau([out[i].predicted["step_time_s"] for i, _ in measured],
                          [t for _, t in measured])
    return ValidationResult(status="succeeded" if measured else "nothing-validated",
                            plans=out, reranked=reranked, kendall_tau=tau, tolerance=tolerance)


def _plan_of(est):
    from planner.specs import ParallelPlan

    return ParallelPlan(dp=est.dp, tp=est.tp, pp=est.pp, cp=est.cp, vpp=est.vpp,
                        micro_batch_size=est.micro_batch_size, recompute=est.recompute,
                        zero_stage=est.zero_stage, sequence_parallel=est.sequence_parallel,
                        layers_per_stage=tuple(est.layers_per_stage) if est.pp > 1 else None)

