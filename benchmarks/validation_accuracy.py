"""Predicted vs measured on this machine: every feasible plan of a small model, 4 gloo ranks.

Calibrates the collectives with a sweep on this machine first (4 gloo ranks, groups of 4 and
2), then measures every plan of the space that runs on 4 ranks and scores two predictions of
each plan against its measurement:

- S, the sweep's: the calibration never saw these plans;
- H, held-out feedback: the plans' own measured transfers fed back as a calibration, fitted on
  half of the plans and scored on the other half, both ways (``planner.validation.held_out``),
  so no plan is predicted from its own measurement.

It prints per plan the predicted and measured step and communication time, the median absolute
errors, and Kendall's tau between the predicted and measured rankings. The whole measurement
is repeated (``--repeats``, fresh probe runs and a fresh sweep) and the spread of each figure
over the repeats is reported. Communication is the transfer time of the plan's collectives
(waits for peers excluded); with more ranks than cores the probe emulates compute
(``--compute``), so ranks do not slow each other's collectives down.

    python benchmarks/validation_accuracy.py [--repeats 2] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from planner.calibration.model import CalibrationIn
from planner.probe.sweep import run_sweep
from planner.probe.validate import measure
from planner.search import PlanRequest
from planner.validation.compare import kendall_tau
from planner.validation.evaluate import evaluate
from planner.validation.held_out import held_out

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


def report(title: str, plans: list) -> dict:
    rows = [p for p in plans if p.measured]
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
    tau = (kendall_tau([p.predicted["step_time_s"] for p in rows],
                       [p.measured["step_time_s"] for p in rows]) if len(rows) >= 2 else None)
    summary = {"plans": len(rows),
               "median_abs_comm_err": statistics.median(comm) if comm else None,
               "median_abs_step_err": statistics.median(step) if step else None,
               "kendall_tau": tau}
    print(f"{len(rows)} plans; median |error| communication "
          f"{100 * (summary['median_abs_comm_err'] or 0):.0f}%, step "
          f"{100 * (summary['median_abs_step_err'] or 0):.0f}%; Kendall tau "
          f"{tau if tau is None else round(tau, 2)}")
    return summary


def spread(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if r[key] is not None]
    if not values:
        return "-"
    scale = 1 if key == "kendall_tau" else 100
    lo, hi = min(values) * scale, max(values) * scale
    fmt = "{:.2f}" if key == "kendall_tau" else "{:.0f}%"
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else \
        f"{fmt.format(lo)}-{fmt.format(hi)}"


def one_run(args, repeat: int) -> dict:
    sweep = run_sweep(4, backend="gloo", group_sizes=[4, 2],
                      ops=["all_reduce", "all_gather", "reduce_scatter", "send_recv"],
                      sizes=SIZES, repeats=9, timeout_s=600)
    req = PlanRequest.model_validate({**REQUEST, "calibration": CalibrationIn(
        id="local-sweep", fits=tuple(sweep.fits))})
    got = measure(req, nproc=4, top_k=args.max_plans, steps=3, timeout_s=120,
                  compute=args.compute)
    swept = evaluate(req, got.probes, got.raws)
    s = report(f"run {repeat + 1}, S: calibrated by a sweep on this machine (4 gloo ranks, "
               f"groups of 4 and 2)", swept.plans)
    fed = held_out(req, got.probes, got.raws, folds=2)
    h = report(f"run {repeat + 1}, H: the other half's measured transfers fed back (held out)",
               fed.plans)
    return {"sweep": s, "held_out": h, "compute": swept.compute,
            "plans": {"sweep": [p.model_dump() for p in swept.plans],
                      "held_out": [p.model_dump() for p in fed.plans]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--max-plans", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--compute", choices=["auto", "gemm", "emulate"], default="auto")
    args = ap.parse_args(argv)
    runs = [one_run(args, r) for r in range(args.repeats)]
    print(f"\nover {len(runs)} runs (min-max):")
    print(f"{'prediction':<34}{'plans':>6}{'comm':>10}{'step':>10}{'tau':>12}")
    for key, name in (("held_out", "H. held-out feedback"), ("sweep", "S. sweep")):
        rs = [r[key] for r in runs]
        print(f"{name:<34}{rs[0]['plans']:>6}{spread(rs, 'median_abs_comm_err'):>10}"
              f"{spread(rs, 'median_abs_step_err'):>10}{spread(rs, 'kendall_tau'):>12}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
