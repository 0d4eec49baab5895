"""Fit the step model's sustained GEMM efficiencies, its per-micro-batch host overhead and its
GEMM prologue (``matmul_half_dim``) on the ``fit`` runs of ``data/published_runs.json`` (never
on ``held_out`` ones), and print them.

The one constant per GPU and precision that a micro-benchmark does not give is the fraction of
the dense peak that large GEMMs *sustain* through a training step: "maximum achievable matmul
FLOPS" (stas00/ml-engineering) measures short bursts of the best shape, above what a GPU at its
power limit keeps up for minutes. It is fitted here as the value that minimises the median
absolute throughput error over the fit runs of that GPU and precision, on a grid, bounded above
by the burst figure, for every pair of the two constants no micro-benchmark gives either (the
host time per micro-batch and the GEMM prologue in units of K); the pair whose fitted rates
fit best wins. The result is what ``planner/specs/gpu.py``'s presets and
``EfficiencyModel.microbatch_overhead_us`` / ``matmul_half_dim`` carry (today: A100 0.76, H100
0.61, H100 fp8 0.61, 100 us, 256).

    python benchmarks/fit_constants.py [--json fitted.json] [--grid] [--held-out]

``--grid`` also prints, for every pair of the two discrete constants, the fit runs' median and
mean absolute error with that pair's fitted rates (how well the fit tells the pairs apart).
``--held-out`` then replays every run of the corpus with the fitted constants and prints the
held-out split's summary (what adopting them would do; the presets are not edited).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published_accuracy import evaluate_runs, load_runs, summarize  # noqa: E402

from planner.cost.tables import cost_tables  # noqa: E402
from planner.specs import gpu as gpu_specs  # noqa: E402

# (GPU preset, precisions, field of the preset, burst upper bound)
GROUPS = [
    ("a100-80gb", ("fp16", "bf16"), "matmul_efficiency", 0.869),
    ("h100-sxm", ("bf16",), "matmul_efficiency", 0.803),
    ("h100-sxm", ("fp8",), "fp8_matmul_efficiency", 0.709),
]
GRID = [round(0.50 + 0.01 * i, 2) for i in range(40)]


def _gpu_of(run: dict) -> str:
    return run["cluster"].get("gpu") or {"dgx-a100": "a100-80gb", "dgx-h100": "h100-sxm",
                                         "dgx-h200": "h200-sxm"}[run["cluster"]["preset"]]


OVERHEADS_US = [100, 300, 1000, 3000]
HALF_DIMS = [64, 128, 256, 512]


def fit(runs: list[dict], grid: list | None = None) -> dict:
    """Per micro-batch host overhead and the GEMM prologue ``matmul_half_dim`` (one value each
    for every run), and for each pair every group's GEMM efficiency; the pair whose fitted
    groups give the lowest median error wins. ``grid``, when given, receives one row per pair:
    (overhead, half_dim, median |error|, mean |error|, fitted rates)."""
    best = None
    for overhead in OVERHEADS_US:
        for half_dim in HALF_DIMS:
            eff = {"microbatch_overhead_us": overhead, "matmul_half_dim": half_dim}
            groups = _fit_groups(runs, eff)
            rows = evaluate_runs(runs, eff)
            errors = [abs(r["error_pct"]) for r in rows]
            med = statistics.median(errors)
            if grid is not None:
                grid.append((overhead, half_dim, med, statistics.mean(errors),
                             {name: g["value"] for name, g in groups.items()}))
            if best is None or med < best[0]:
                best = (med, eff, groups)
    _fit_groups(runs, best[1])      # leave the winner in place
    return {**{name: {"value": value, "runs": len(runs), "median_abs_error_pct": round(best[0], 2)}
               for name, value in best[1].items()},
            **best[2]}


def replay(runs: list[dict], result: dict) -> dict[str, dict]:
    """Each split's summary of ``runs`` replayed with the constants ``fit`` returned and left in
    place (its rates in the presets, the discrete pair passed as efficiency overrides), and
    each held-out source's."""
    eff = {name: result[name]["value"] for name in ("microbatch_overhead_us", "matmul_half_dim")}
    rows = evaluate_runs(runs, eff)
    out = {split: summarize([r for r in rows if r["split"] == split])
           for split in ("fit", "held_out")}
    out["held_out_by_source"] = {source: summarize([r for r in rows if r["source"] == source
                                                    and r["split"] == "held_out"])
                                 for source in sorted({r["source"] for r in rows
                                                       if r["split"] == "held_out"})}
    return out


def _set(preset: str, field: str, value: float) -> None:
    """Give the preset (and its 40 GB twin, which shares the A100's rates) ``value`` and drop
    the cost tables built with the previous one."""
    gpu_specs._GPU_PRESETS[preset][field] = value
    if preset == "a100-80gb":
        gpu_specs._GPU_PRESETS["a100-40gb"][field] = value
    cost_tables.cache_clear()


def _fit_groups(runs: list[dict], eff: dict) -> dict:
    out = {}
    for preset, precisions, field, bound in GROUPS:
        group = [r for r in runs if _gpu_of(r) == preset
                 and r["training"].get("precision", "bf16") in precisions]
        if not group:
            continue
        best = None
        for value in (v for v in GRID if v <= bound):
            _set(preset, field, value)
            rows = evaluate_runs(group, eff)
            med = statistics.median(abs(r["error_pct"]) for r in rows)
            if best is None or med < best[0]:
                best = (med, value, statistics.median(r["error_pct"] for r in rows))
        _set(preset, field, best[1])
        out[f"{preset} {'/'.join(precisions)} {field}"] = {
            "value": best[1], "runs": len(group), "median_abs_error_pct": round(best[0], 2),
            "median_signed_error_pct": round(best[2], 2), "burst_bound": bound}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--grid", action="store_true",
                    help="print every pair of the discrete constants with its fit errors")
    ap.add_argument("--held-out", action="store_true",
                    help="replay the whole corpus with the fitted constants, print held_out")
    args = ap.parse_args(argv)
    corpus = load_runs()
    runs = [r for r in corpus if r["split"] == "fit"]
    grid: list = []
    result = fit(runs, grid)
    if args.grid:
        print(f"{'overhead us':>11} {'half_dim':>8} {'median %':>8} {'mean %':>7}  fitted rates")
        for overhead, half_dim, med, mean, rates in grid:
            print(f"{overhead:>11} {half_dim:>8} {med:>8.2f} {mean:>7.2f}  "
                  + ", ".join(f"{name.split()[0]} {name.split()[1]} {v:g}"
                              for name, v in rates.items()))
        print()
    for name, x in result.items():
        extra = (f", signed {x['median_signed_error_pct']:+.1f}%; burst {x['burst_bound']}"
                 if "burst_bound" in x else "")
        print(f"{name:<42} {x['value']:g}  ({x['runs']} fit runs, median |error| "
              f"{x['median_abs_error_pct']:.1f}%{extra})")
    if args.held_out:
        replayed = replay(corpus, result)
        held = replayed["held_out"]
        print(f"held_out with these constants: {held['rows']} runs, median |error| "
              f"{held['median_abs_error_pct']:.1f}%, each source once "
              f"{held['source_median_abs_error_pct']:.1f}%, max {held['max_abs_error_pct']:.1f}%")
        for source, x in replayed["held_out_by_source"].items():
            print(f"  {source:<34} {x['rows']:>4} runs  median |error| "
                  f"{x['median_abs_error_pct']:5.1f}%  signed {x['median_signed_error_pct']:+6.1f}%")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
