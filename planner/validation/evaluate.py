"""Validation without the running: which probe runs validate the top plans (``prepare``), and
what their measurements say (``evaluate``). ``planner.probe.validate`` runs them on local
ranks, ``planner.probe.validation_jobs`` writes them as cluster jobs and reads them back.

A plan runs in full mode on all of its ranks, or in sampled mode (``sampled.py``) as one
representative group per strategy when it needs more ranks than there are. The probe also
measures the achieved matmul rate and streaming bandwidth of the plan's kernels; the prediction
is recomputed with those rates (so compute predictions rest on measured rates, on a CPU as on a
GPU) before the comparison. Every collective the probes ran is kept as a calibration sample
(its mean transfer time), so a validation can be fed back as a calibration.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.calibration.fit import fit_samples
from planner.calibration.model import Calibration, Sample
from planner.cost import estimate
from planner.cost.tables import cost_tables
from planner.errors import PlannerInputError
from planner.search import PlanRequest, plan
from planner.specs import ParallelPlan
from planner.validation.compare import (
    kendall_tau,
    measured_components,
    predicted_components,
    relative_errors,
)
from planner.validation.pattern import NotProbeable, step_pattern
from planner.validation.predicted_trace import stage_times
from planner.validation.sampled import experts_inside, measured_step, sampled_runs, stage_to_sample
from planner.vocabulary import ProbeCompute, ValidationMode, ValidationModeChoice

Mode = ValidationModeChoice
Compute = ProbeCompute
PLAN_KEYS = ("dp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "grad_accum_steps",
             "recompute", "recompute_num_layers", "zero_stage", "dp_replicate",
             "sequence_parallel", "layers_per_stage", "microbatch_group_size")


class ValidatedPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    plan: dict
    mode: ValidationMode | None = None
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
    mode: ValidationMode = "full"
    backend: str = "gloo"
    compute: str = Field("gemm", description="gemm: the probe ran the GEMMs; emulate: it slept "
                         "for their benchmarked time (more ranks than cores on one host).")
    plans: list[ValidatedPlan]
    reranked: list[int]
    kendall_tau: float | None
    tolerance: float
    samples: list[Sample] = Field(default_factory=list, description="Every collective the "
                                  "probes ran: its mean transfer time (waits excluded).")
    matmul_tflops: float | None = Field(None, description="Slowest rank's achieved matmul "
                                        "rate on the validated plans' GEMM shapes.")
    missing: list[str] = Field(default_factory=list, description="Probe results a cluster "
                               "job has not written (an imported validation).")


class PlanProbe(BaseModel):
    """What validating one plan runs: its probe runs ({name: pattern}) or why it cannot."""

    model_config = ConfigDict(frozen=True)

    index: int
    plan: dict
    mode: ValidationMode | None = None
    runs: dict[str, dict] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    skipped: str | None = None

    @staticmethod
    def world(pattern: dict) -> int:
        return pattern["tp"] * pattern.get("cp", 1) * pattern["dp"] * pattern["pp"]


def prepare(req: PlanRequest, *, nproc: int, top_k: int = 3, mode: Mode = "auto"
            ) -> list[PlanProbe]:
    """The top ``top_k`` plans of ``req`` and the probe runs that validate each on ``nproc``
    ranks. ``mode``: full runs a plan of at most ``nproc`` ranks whole; sampled runs one group
    per strategy; auto picks full when the plan fits."""
    if req.cluster.pools is not None:
        raise PlannerInputError(
            "cluster.pools", "validation probes one cluster's GPUs: validate on one pool's "
            "cluster (a pipeline over pools is not probed)")
    req = req.model_copy(update={"search": req.search.model_copy(update={"top_k": top_k})})
    result = plan(req)
    tables = cost_tables(req.model, req.cluster, req.training, req.efficiency, req.calibration)
    probes = []
    for j, est in enumerate(result.plans):
        summary = {k: getattr(est, k) for k in PLAN_KEYS}
        how = mode if mode != "auto" else ("full" if est.gpus_used <= nproc else "sampled")
        if how == "full" and est.gpus_used > nproc:
            probes.append(PlanProbe(index=j, plan=summary, skipped=(
                f"needs {est.gpus_used} ranks; {nproc} were given (use sampled mode)")))
            continue
        try:
            pattern = step_pattern(est, tables)
        except NotProbeable as exc:
            probes.append(PlanProbe(index=j, plan=summary, skipped=str(exc)))
            continue
        if how == "full":
            probes.append(PlanProbe(index=j, plan=summary, mode=how, runs={"full": pattern}))
            continue
        stage = stage_to_sample(pattern["layers"], [f + b for f, b in stage_times(est, tables)])
        runs, notes = sampled_runs(pattern, stage, nproc)
        notes.insert(0, "sampled: " + ", ".join(f"{name} on {PlanProbe.world(p)} ranks"
                                                for name, p in runs.items()))
        probes.append(PlanProbe(index=j, plan=summary, mode=how, runs=runs, notes=notes))
    return probes


def evaluate(req: PlanRequest, probes: list[PlanProbe], raws: dict[int, dict[str, dict]], *,
             tolerance: float = 0.5, traces: dict[int, str] | None = None) -> ValidationResult:
    """Compare what the probe runs measured (``raws[plan index][run name]``, the worker's JSON)
    with the prediction, plan by plan; re-rank by the measured step."""
    out: list[ValidatedPlan] = []
    samples: list[dict] = []
    rates: list[float] = []
    for probe in probes:
        got = raws.get(probe.index, {})
        if probe.skipped or not got:
            out.append(ValidatedPlan(plan=probe.plan, predicted={}, measured=None,
                                     note=probe.skipped or "not measured"))
            continue
        for raw in got.values():
            samples.extend(raw["samples"])
        timed = got.get("full") or got.get("stage")
        plan_rate = min(r["matmul_flops_per_s"] for r in timed["ranks"]) if timed else None
        if plan_rate:
            rates.append(plan_rate)
        cluster, eff = measured_device(req, timed["ranks"] if timed else [])
        est = estimate(req.model, cluster, req.training, ParallelPlan.of(probe.plan), eff,
                       calibration=req.calibration)
        pred = predicted_components(est.breakdown, est.communication)
        notes = list(probe.notes)
        if probe.mode == "full":
            meas, kept = measured_components(got["full"]), list[str]()
        else:
            pl = probe.plan
            meas, kept = measured_step(got, pred, pl["grad_accum_steps"], pl["pp"],
                                 experts_inside(pl["tp"], pl["cp"], pl.get("ep", 1),
                                                pl.get("etp", 1)))
            if kept:
                notes.append(f"kept from the prediction: {', '.join(kept)}")
        rel = {k: v for k, v in relative_errors(pred, meas).items() if k not in kept}
        first = next(iter(got.values()))
        out.append(ValidatedPlan(
            plan=probe.plan, mode=probe.mode,
            predicted={"step_time_s": pred["step_time_s"], "breakdown": pred},
            measured={"step_time_s": meas["step_time_s"], "breakdown": meas,
                      "steps": first["steps"], "compute": first["compute_mode"],
                      "matmul_tflops": plan_rate / 1e12 if plan_rate else None},
            rel_err=rel, flagged=abs(rel.get("step_time_s", 0.0)) > tolerance,
            trace=(traces or {}).get(probe.index), note="; ".join(notes) or None))
    measured = [(i, p.measured["step_time_s"]) for i, p in enumerate(out) if p.measured]
    reranked = [i for i, _ in sorted(measured, key=lambda x: x[1])]
    tau = None
    if len(measured) >= 2:
        tau = kendall_tau([out[i].predicted["step_time_s"] for i, _ in measured],
                          [t for _, t in measured])
    computes = {p.measured["compute"] for p in out if p.measured}
    return ValidationResult(
        status="succeeded" if measured else "nothing-validated",
        mode="sampled" if any(p.mode == "sampled" for p in out) else "full",
        compute=computes.pop() if len(computes) == 1 else ("mixed" if computes else "gemm"),
        plans=out, reranked=reranked, kendall_tau=tau, tolerance=tolerance,
        samples=[Sample(op=s["op"], group_size=s["group_size"], message_bytes=s["message_bytes"],
                        time_us=s["time_us"]) for s in samples],
        matmul_tflops=min(rates) / 1e12 if rates else None)


def measured_device(req: PlanRequest, ranks: list[dict]):
    """The request's cluster and efficiency model with the device's rates replaced by what the
    probe measured on the plan's kernels (slowest rank): the matmul rate becomes the peak
    (reached by every GEMM) and the streaming rate the memory bandwidth, so compute is
    predicted from measured rates, on a CPU as on a GPU."""
    cluster, eff = req.cluster, req.efficiency
    flops = [r["matmul_flops_per_s"] for r in ranks if r.get("matmul_flops_per_s")]
    stream = [r["memory_bytes_per_s"] for r in ranks if r.get("memory_bytes_per_s")]
    gpu = cluster.gpu
    if flops:
        peaks = gpu.peak_tflops.model_copy(update={
            k: min(flops) / 1e12 for k, v in gpu.peak_tflops.model_dump().items()
            if v is not None})
        gpu = gpu.model_copy(update={"peak_tflops": peaks})
        eff = eff.model_copy(update={"matmul_peak_fraction": 1.0, "matmul_half_dim": 0.0})
    if stream:
        gpu = gpu.model_copy(update={"memory_bandwidth_gb_per_s": min(stream) / 1e9})
        eff = eff.model_copy(update={"hbm_efficiency": 1.0})
    return cluster.model_copy(update={"gpu": gpu}), eff


def as_calibration(result: ValidationResult) -> Calibration:
    """The validation's measured collectives (and matmul rate) as a calibration, fitted like a
    sweep's, to cost later requests with what the plans' own steps achieved."""
    if not result.samples:
        raise ValueError("the validation measured no collective to calibrate with")
    # Each sample is the median of many calls inside real steps, so two sizes make a line.
    fits, fitted, notes = fit_samples(list(result.samples), min_sizes=2)
    notes.append(f"from validation {result.id or ''} of {len(result.plans)} plans "
                 f"({result.mode} mode): transfer times inside real training steps".strip())
    return Calibration(source="validation", backend=result.backend, fits=fits,
                       samples=fitted, notes=notes, matmul_tflops=result.matmul_tflops)

