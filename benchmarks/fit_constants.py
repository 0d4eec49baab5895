"""Fit the step model's sustained GEMM efficiencies, its per-micro-batch host overhead and its
GEMM prologue (``matmul_half_dim``) on the ``fit`` runs of ``data/published_runs.json`` (never
on ``held_out`` ones), and print them.

The one constant per GPU and precision that a micro-benchmark does not give is the fraction of
the dense peak that large GEMMs *sustain* through a training step: "maximum achievable matmul
FLOPS" (stas00/ml-engineering) measures short bursts of the best shape, above what a GPU at its
power limit keeps up for minutes. It is fitted here on a grid, bounded above by the burst
figure, for every pair of the two constants no micro-benchmark gives either (the host time per
micro-batch and the GEMM prologue in units of K), as the rates that minimise the median
absolute throughput error of each group of fit runs (GPU and precision), averaged over the
groups (``objective``); the pair with the lowest objective wins. The rates are searched
jointly, since an fp8 run's bf16 GEMMs tie the H100's two rates together: each group is first
fitted to its own runs' median, then coordinate descent moves one rate at a time over its
grid, re-costing every run on that GPU, while that lowers the objective, and stops where no
single rate's change lowers it. ``planner/specs/gpu.py``'s presets and
``EfficiencyModel.microbatch_overhead_us`` / ``matmul_half_dim`` carry the constants kept (A100
0.76, H100 0.61, H100 fp8 0.61, 100 us, 256), which this fit, searched jointly, no longer
returns (README, "The protocol's fit, searched jointly"); the script prints their figures
first. The Blackwell fp8 groups (B200, GB200, GB300) read only their own GPU's rates, so at
the kept pair each lands where its own grid does: the presets' 0.65, 0.65 and 0.74
(``tests/test_blackwell.py``).

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
from planner.specs import ClusterSpec  # noqa: E402
from planner.specs import gpu as gpu_specs  # noqa: E402

# (GPU preset, precisions, field of the preset, burst upper bound). A Blackwell GPU's fp8
# group is its fp8 fit runs (MXFP8, which reads the fp8 rate through
# ``gpu.block_scaled_rates``); its NVFP4 runs stay out, since NVFP4's share is solved from the
# NVFP4 / MXFP8 pairs given the fp8 rate (``tests/test_nvfp4.py``). GB300 has no burst figure
# of its own and is bounded by B300's share (the same die; ``planner/specs/gpu.py``).
GROUPS = [
    ("a100-80gb", ("fp16", "bf16"), "matmul_efficiency", 0.869),
    ("h100-sxm", ("bf16",), "matmul_efficiency", 0.803),
    ("h100-sxm", ("fp8",), "fp8_matmul_efficiency", 0.709),
    ("b200-sxm", ("fp8",), "fp8_matmul_efficiency", 0.763),
    ("gb200", ("fp8",), "fp8_matmul_efficiency", 0.723),
    ("gb300", ("fp8",), "fp8_matmul_efficiency", 0.745),
]
GRID = [round(0.50 + 0.01 * i, 2) for i in range(40)]


def _gpu_of(run: dict) -> str:
    """The preset whose rates the run's GPU reads (the A100 40 GB twin shares the 80 GB's)."""
    name = ClusterSpec.model_validate(run["cluster"]).gpu.name
    return "a100-80gb" if name == "a100-40gb" else name


OVERHEADS_US = [100, 300, 1000, 3000]
HALF_DIMS = [64, 128, 256, 512]


def fit(runs: list[dict], grid: list | None = None) -> dict:
    """Per micro-batch host overhead and the GEMM prologue ``matmul_half_dim`` (one value each
    for every run), and for each pair every group's GEMM efficiency, searched jointly
    (``_descend``); the pair whose rates give the lowest objective (``objective``: each
    group's median |error|, averaged over the groups) wins, and its rates are left in the
    presets. ``grid``, when given, receives one row per pair: (overhead, half_dim, median
    |error| of all the runs, mean |error|, fitted rates, objective)."""
    _ROWS.clear()       # rows costed by an earlier call may come from another model state
    best = None
    for overhead in OVERHEADS_US:
        for half_dim in HALF_DIMS:
            eff = {"microbatch_overhead_us": overhead, "matmul_half_dim": half_dim}
            _fit_groups(runs, eff)
            rows = _descend(runs, eff)
            groups = _group_summaries(runs, rows)
            errors = [abs(r["error_pct"]) for r in rows.values()]
            score = objective(runs, rows)
            if grid is not None:
                grid.append((overhead, half_dim, statistics.median(errors),
                             statistics.mean(errors),
                             {name: g["value"] for name, g in groups.items()}, score))
            if best is None or score < best[0]:
                best = (score, eff, groups, statistics.median(errors))
    for preset, precisions, field, _ in GROUPS:     # leave the winner in place
        name = f"{preset} {'/'.join(precisions)} {field}"
        if name in best[2]:
            _set(preset, field, best[2][name]["value"])
    return {**{name: {"value": value, "runs": len(runs), "median_abs_error_pct": round(best[3], 2),
                      "objective_pct": round(best[0], 2)}
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
    """Give the preset (and its 40 GB twin, which shares the A100's rates) ``value``, with a
    Blackwell GPU's block-scaled rates, which follow its fp8 rate, and drop the cost tables
    built with the previous one."""
    rates = gpu_specs._GPU_PRESETS[preset]
    if field == "fp8_matmul_efficiency" and "mxfp8_matmul_efficiency" in rates:
        rates.update(gpu_specs.block_scaled_rates(value))
    rates[field] = value
    if preset == "a100-80gb":
        gpu_specs._GPU_PRESETS["a100-40gb"][field] = value
    cost_tables.cache_clear()


_ROWS: dict[tuple, dict] = {}


def _costed(runs: list[dict], eff: dict) -> list[dict]:
    """``evaluate_runs`` through a cache keyed by the run, the discrete pair and its own GPU's
    rates (a run reads no other preset's; a GPU outside the groups keys on all of them), so
    the descent re-costs only what a move changes. ``fit`` empties it when it starts."""
    out = []
    for run in runs:
        preset = _gpu_of(run)
        mine = [(p, field) for p, _, field, _ in GROUPS if p == preset]
        rates = tuple(gpu_specs._GPU_PRESETS[p][field] for p, field in
                      (mine or [(p, field) for p, _, field, _ in GROUPS]))
        key = (run["id"], eff["microbatch_overhead_us"], eff["matmul_half_dim"], rates)
        if key not in _ROWS:
            (_ROWS[key],) = evaluate_runs([run], eff)
        out.append(_ROWS[key])
    return out


def _members(runs: list[dict], preset: str, precisions: tuple[str, ...]) -> list[dict]:
    return [r for r in runs if _gpu_of(r) == preset
            and r["training"].get("precision", "bf16") in precisions]


def _fit_groups(runs: list[dict], eff: dict) -> None:
    """Each group's rate at the grid value of least median over that group's own runs (the
    descent's starting point)."""
    for preset, precisions, field, bound in GROUPS:
        group = _members(runs, preset, precisions)
        if not group:
            continue
        best = None
        for value in (v for v in GRID if v <= bound):
            _set(preset, field, value)
            rows = _costed(group, eff)
            med = statistics.median(abs(r["error_pct"]) for r in rows)
            if best is None or med < best[0]:
                best = (med, value)
        _set(preset, field, best[1])


def objective(runs: list[dict], rows: dict[str, dict]) -> float:
    """What the fit minimises: each group's median |error| over its own runs, averaged over
    the groups (each group once, as the benchmark counts each source once). One median over
    all the runs would let the rates give up a whole group smaller than half the runs, whose
    errors it does not see (the nine H100 bf16 fit runs against 39)."""
    medians = [statistics.median(abs(rows[r["id"]]["error_pct"]) for r in group)
               for group in (_members(runs, p, precisions) for p, precisions, _, _ in GROUPS)
               if group]
    return statistics.mean(medians)


def _descend(runs: list[dict], eff: dict, max_rounds: int = 10) -> dict[str, dict]:
    """Coordinate descent on ``objective`` from the rates in the presets: one group's rate at
    a time takes the grid value (up to its burst bound) that lowers it most, re-costing all
    the runs on that group's GPU (an fp8 run's bf16 GEMMs read the bf16 rate), until a round
    changes nothing. Leaves the rates in the presets and returns the rows at them, by run
    id."""
    rows = {r["id"]: r for r in _costed(runs, eff)}
    for _ in range(max_rounds):
        moved = False
        for preset, precisions, field, bound in GROUPS:
            if not _members(runs, preset, precisions):
                continue
            on_gpu = [r for r in runs if _gpu_of(r) == preset]
            current = gpu_specs._GPU_PRESETS[preset][field]
            best = (objective(runs, rows), current, rows)
            for value in (v for v in GRID if v <= bound and v != current):
                _set(preset, field, value)
                trial = {**rows, **{r["id"]: r for r in _costed(on_gpu, eff)}}
                score = objective(runs, trial)
                if score < best[0] - 1e-9:
                    best = (score, value, trial)
            _set(preset, field, best[1])
            if best[1] != current:
                moved, rows = True, best[2]
        if not moved:
            break
    return rows


def _group_summaries(runs: list[dict], rows: dict[str, dict]) -> dict:
    """Each group's rate as the presets hold it, with its own runs' median errors there."""
    out = {}
    for preset, precisions, field, bound in GROUPS:
        group = _members(runs, preset, precisions)
        if not group:
            continue
        errors = [rows[r["id"]]["error_pct"] for r in group]
        out[f"{preset} {'/'.join(precisions)} {field}"] = {
            "value": gpu_specs._GPU_PRESETS[preset][field], "runs": len(group),
            "median_abs_error_pct": round(statistics.median(abs(e) for e in errors), 2),
            "median_signed_error_pct": round(statistics.median(errors), 2),
            "burst_bound": bound}
    return out


def kept(runs: list[dict]) -> dict:
    """The constants in the presets and the efficiency model's defaults, before any fit, on
    ``runs``: the objective, the median |error| over all of them and each group's."""
    rows = {r["id"]: r for r in evaluate_runs(runs)}
    groups = {f"{p} {'/'.join(precisions)}": statistics.median(
        abs(rows[r["id"]]["error_pct"]) for r in _members(runs, p, precisions))
        for p, precisions, _, _ in GROUPS if _members(runs, p, precisions)}
    return {"objective_pct": objective(runs, rows),
            "median_abs_error_pct": statistics.median(abs(r["error_pct"])
                                                      for r in rows.values()),
            "groups": groups}


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
    before = kept(runs)
    print(f"kept constants: each group once {before['objective_pct']:.2f}%, median |error| "
          f"{before['median_abs_error_pct']:.2f}% ("
          + ", ".join(f"{name} {med:.2f}%" for name, med in before["groups"].items()) + ")")
    grid: list = []
    result = fit(runs, grid)
    if args.grid:
        print(f"{'overhead us':>11} {'half_dim':>8} {'groups %':>8} {'median %':>8} "
              f"{'mean %':>7}  fitted rates")
        for overhead, half_dim, med, mean, rates, score in grid:
            print(f"{overhead:>11} {half_dim:>8} {score:>8.2f} {med:>8.2f} {mean:>7.2f}  "
                  + ", ".join(f"{name.split()[0]} {name.split()[1]} {v:g}"
                              for name, v in rates.items()))
        print()
    for name, x in result.items():
        extra = (f", signed {x['median_signed_error_pct']:+.1f}%; burst {x['burst_bound']}"
                 if "burst_bound" in x else "")
        score = (f", each group once {x['objective_pct']:.2f}%" if "objective_pct" in x else "")
        print(f"{name:<42} {x['value']:g}  ({x['runs']} fit runs, median |error| "
              f"{x['median_abs_error_pct']:.2f}%{score}{extra})")
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
