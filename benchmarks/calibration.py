"""Calibration on this machine: a gloo sweep's time, its fits, and cross-group-size prediction.

Runs the sweep worker on 4 local gloo ranks (groups of 4 and of 2), fits every collective, and
prints per (collective, group size) the whole-collective latency (alpha), bandwidth (1/beta),
R^2 and maximum relative error, then how well the fit at one group size predicts the measured
times at the other (ring scaling of steps and bus factor). Gloo on a 2-core VM is noisy
(research/collectives.md section 5: 30-60% rep-to-rep): these numbers prove the pipeline, not
GPU costs.

Then the steadiness of a 2-rank all_reduce fit, three runs each: one pass of 5 batches per
size (2 ms batches), against passes over the sizes in shuffled order with 20 ms batches until
every median's 95% interval is within 5% or a 40 s budget is spent (target: R^2 >= 0.95
within 60 s).

    python benchmarks/calibration.py [--nproc 4] [--runs 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from planner.calibration.fit import predict
from planner.probe.sweep import run_sweep


def steadiness(runs: int) -> list[dict]:
    """R^2, quality and wall time of 2-rank all_reduce fits, one pass against adaptive."""
    print("\n2-rank all_reduce fit, one pass vs adaptive passes (40 s budget):")
    out = []
    for name, kw in (("one pass", {"repeats": 5, "budget_s": 0, "min_batch_ms": 2}),
                     ("adaptive", {"repeats": 3, "budget_s": 40, "min_batch_ms": 20})):
        for _ in range(runs):
            t0 = time.perf_counter()
            cal = run_sweep(2, ops=["all_reduce"], group_sizes=[2], timeout_s=300, **kw)
            wall = time.perf_counter() - t0
            (f,) = cal.fits
            widest = max((s.ci_high_us - s.ci_low_us) / s.time_us for s in cal.samples)
            row = {"mode": name, "r2": f.r2, "quality": f.quality,
                   "median_rel_err": f.median_rel_err, "max_rel_err": f.max_rel_err,
                   "widest_interval": widest, "seconds": wall}
            out.append(row)
            print(f"  {name:<9} R^2 {f.r2:6.3f}  {f.quality:<5} median err "
                  f"{100 * f.median_rel_err:4.1f}%  widest 95% interval "
                  f"{100 * widest:5.1f}% of its median  {wall:5.1f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cal = run_sweep(args.nproc, backend="gloo", group_sizes=[args.nproc, 2], timeout_s=600,
                    repeats=5, budget_s=0, min_batch_ms=2)
    wall = time.perf_counter() - t0
    print(f"sweep of {args.nproc} gloo ranks: {wall:.1f} s wall ({cal.notes[-1]})\n")
    head = (f"{'op':<16}{'ranks':>6}{'alpha us':>10}{'GB/s':>8}{'bus GB/s':>9}{'R^2':>7}"
            f"{'median':>8}{'max err':>8}{'LOO max':>8}  quality")
    print(head)
    print("-" * len(head))
    rows = []
    for f in cal.fits:
        print(f"{f.op:<16}{f.group_size:>6}{f.latency_us:>10.1f}{f.bandwidth_gb_per_s:>8.3f}"
              f"{f.bus_bandwidth_gb_per_s:>9.3f}{f.r2:>7.3f}{100 * f.median_rel_err:>7.1f}%"
              f"{100 * f.max_rel_err:>7.1f}%{100 * f.loo_max_rel_err:>7.1f}%  {f.quality}")
        rows.append(f.model_dump(mode="json"))
    print("\nfit at one group size predicting the measured times at another:")
    cross = []
    by = {(f.op, f.group_size): f for f in cal.fits}
    for (op, p), fit in sorted(by.items()):
        for q in sorted({g for o, g in by if o == op and g != p}):
            meas = [s for s in cal.samples if s.op == op and s.group_size == q]
            rel = [abs(predict(fit, s.message_bytes, q) - s.time_us) / s.time_us for s in meas]
            item = {"op": op, "fit_ranks": p, "predicted_ranks": q,
                    "median_rel_err": float(np.median(rel)), "max_rel_err": float(max(rel))}
            cross.append(item)
            print(f"  {op:<16} fit p={p} -> p={q}: median {100 * item['median_rel_err']:.0f}%,"
                  f" max {100 * item['max_rel_err']:.0f}%")
    if cal.unsupported:
        print("\nunsupported:", "; ".join(cal.unsupported))
    steady = steadiness(args.runs)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"sweep_seconds": wall, "fits": rows, "cross": cross,
                                         "unsupported": cal.unsupported, "steady": steady},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
