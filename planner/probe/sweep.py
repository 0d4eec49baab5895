"""Calibration sweeps: run the sweep worker, fit what it measured."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from planner.calibration.fit import fit_samples
from planner.calibration.model import Calibration, Sample
from planner.probe.local import run_module

DEFAULT_SIZES = (4096, 16384, 65536, 262144, 1048576, 4194304)


def sweep_args(*, backend: str, sizes=DEFAULT_SIZES, ops: Sequence[str] | None = None,
               group_sizes: list[int] | None = None, repeats: int = 5,
               budget_s: float = 0.0, min_batch_ms: float = 2.0) -> list[str]:
    """The worker's arguments: ``repeats`` batches per size per pass; with ``budget_s``, more
    passes until every median's 95% interval is within 5% or the budget is spent."""
    args = ["--backend", backend, "--sizes", ",".join(str(int(s)) for s in sizes),
            "--repeats", str(repeats), "--budget-s", f"{budget_s:g}",
            "--min-batch-ms", f"{min_batch_ms:g}"]
    if ops:
        args += ["--ops", ",".join(ops)]
    if group_sizes:
        args += ["--group-sizes", ",".join(str(g) for g in group_sizes)]
    return args


def run_sweep(nproc: int, *, backend: str = "gloo", sizes=DEFAULT_SIZES,
              ops: Sequence[str] | None = None, group_sizes: list[int] | None = None,
              repeats: int = 5, budget_s: float = 0.0, min_batch_ms: float = 2.0,
              timeout_s: float = 600,
              on_progress: Callable[[int, int], None] | None = None) -> Calibration:
    raw = run_module(nproc, "planner.probe.sweep_worker",
                     sweep_args(backend=backend, sizes=sizes, ops=ops, group_sizes=group_sizes,
                                repeats=repeats, budget_s=budget_s,
                                min_batch_ms=min_batch_ms),
                     timeout_s=max(timeout_s, budget_s * 1.5 + 60), on_progress=on_progress)
    return calibration_from_sweep(raw)


def calibration_from_sweep(raw: dict) -> Calibration:
    samples = [Sample(**s) for s in raw["samples"]]
    fits, fitted, notes = fit_samples(samples)
    notes.append(f"sweep of {raw['world_size']} ranks on {', '.join(raw['hosts'])} took "
                 f"{raw['seconds']:.1f} s")
    return Calibration(source="sweep", backend=raw["backend"], fits=fits,
                       unsupported=raw["unsupported"], samples=fitted, notes=notes)
