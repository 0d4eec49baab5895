"""Predicted vs measured on this machine: every feasible plan of a small model, 4 gloo ranks.

Calibrates the collectives with a sweep on this machine first (4 gloo ranks, groups of 4 and
2), then validates every plan of the space that runs on 4 ranks (A) and prints per plan the
predicted and measured step time and communication time, the median absolute errors, and
Kendall's tau between the predicted and measured rankings. Then feeds A's measured transfers
back as a calibration and validates every plan again (B). Communication is the transfer time
of the plan's collectives (waits for peers excluded); with more ranks than cores the probe
emulates compute (``--compute``), so ranks do not slow each other's collectives down.

    python benchmarks/validation_accuracy.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from planner.calibration.model import CalibrationIn
from planner.probe.sweep import run_sweep
from planner.probe.validate import validate
from planner.search import PlanRequest
from planner.validation.evaluate import as_calibration

REQUEST = {
    "model": {"name": "tiny-gpt", "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8,
              "vocab_size": 4096, "ffn_type": "gelu"},
    "cluster": {"preset": "local-cpu"},
    "training": {"global_batch_size": 8, "seq_length": 256, "precision": "fp32"},
    "search": {"cp": [1, 2], "vpp": 1, "recompute": "none", "micro_batch_size": {"max": 2},
               "zero_stage": [0, 1, 3]},
}


# The plans' messages run from 64 KiB (activations) to ~30 MB (the gradient bucket): the sweep
# covers them, so no prediction extrapolates the fit.
SIZES = (16384, 65536, 262144, 1048576, 4194304, 16777216, 33554432)


def report(title: str, result) -> dict:
    rows = [p for p in result.plans if p.measured]
    print(f"\n{title}")
    head = (f"{'#':>3} {'dp':>3}{'tp':>3}{'pp':>3}{'cp':>3}{'mbs':>4}{'zero':>5}  {'pred step':>10}"
            f"{'meas step':>10}{'err':>7}  {'pred comm':>10}{'meas comm':>10}{'err':>7}")
    print(head)
    print("-" * len(head))
    for i, p in enumerate(rows):
        pl, pr, me = p.plan, p.predicted["breakdown"], p.measured["breakdown"]
        print(f"{i + 1:>3} {pl['dp']:>3}{pl['tp']:>3}{pl['pp']:>3}{pl['cp']:>3}"
              f"{pl['micro_batch_size']:>4}"
              f"{pl['zero_stage']:>5}  {pr['step_time_s'] * 1e3:>8.1f}ms"
              f"{me['step_time_s'] * 1e3:>8.1f}ms{100 * p.rel_err.get('step_time_s', 0):>+6.0f}%"
              f"  {pr['communication'] * 1e3:>8.1f}ms{me['communication'] * 1e3:>8.1f}ms"
              f"{100 * p.rel_err.get('communication', 0):>+6.0f}%")
    comm = [abs(p.rel_err["communication"]) for p in rows if "communication" in p.rel_err]
    step = [abs(p.rel_err["step_time_s"]) for p in rows if "step_time_s" in p.rel_err]
    summary = {"plans": len(rows), "compute": result.compute,
               "median_abs_comm_err": statistics.median(comm) if comm else None,
               "median_abs_step_err": statistics.median(step) if step else None,
               "kendall_tau": result.kendall_tau}
    print(f"{len(rows)} plans (compute: {result.compute}); median |error| communication "
          f"{100 * (summary['median_abs_comm_err'] or 0):.0f}%, step "
          f"{100 * (summary['median_abs_step_err'] or 0):.0f}%; Kendall tau "
          f"{result.kendall_tau if result.kendall_tau is None else round(result.kendall_tau, 2)}")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--max-plans", type=int, default=24)
    ap.add_argument("--compute", choices=["auto", "gemm", "emulate"], default="auto")
    args = ap.parse_args(argv)
    sweep = run_sweep(4, backend="gloo", group_sizes=[4, 2],
                      ops=["all_reduce", "all_gather", "reduce_scatter", "send_recv"],
                      sizes=SIZES, repeats=9, timeout_s=600)
    req = PlanRequest.model_validate({**REQUEST, "calibration": CalibrationIn(
        id="local-sweep", fits=tuple(sweep.fits))})
    first = validate(req, nproc=4, top_k=args.max_plans, steps=3, timeout_s=120,
                     compute=args.compute)
    a = report("A. calibrated by a sweep on this machine (4 gloo ranks, groups of 4 and 2)",
               first)
    # Feed the first validation's transfers back as a calibration (sweep fits fill in the
    # collectives it did not see) and validate again: new runs, so the measurements that are
    # predicted are not the ones the calibration was fitted to.
    fed = as_calibration(first)
    seen = {(f.op, f.tier, f.group_size) for f in fed.fits}
    fits = tuple(fed.fits) + tuple(f for f in sweep.fits
                                   if (f.op, f.tier, f.group_size) not in seen)
    req_b = req.model_copy(update={"calibration": CalibrationIn(id="validation-fed",
                                                                fits=fits)})
    second = validate(req_b, nproc=4, top_k=args.max_plans, steps=3, timeout_s=120,
                      compute=args.compute)
    b = report("B. calibrated by run A's measured transfers (fed back), fresh runs", second)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "sweep_calibrated": {"summary": a, "plans": [p.model_dump() for p in first.plans]},
            "validation_calibrated": {"summary": b,
                                      "plans": [p.model_dump() for p in second.plans]}},
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
