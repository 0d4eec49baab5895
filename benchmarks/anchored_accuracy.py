"""How well one measured step of a stack predicts its other runs (``planner calibrate anchor``).

Every source of the published corpus (``data/published_runs.json``) is one stack: one
framework at one version with one team's settings. For each held-out source with two runs or
more, the run on the fewest GPUs (the first in the corpus among equals: what a team measures
before it scales out) anchors the model: ``planner.calibration.anchor.scale_for`` finds the
kernel speed (``efficiency.compute_scale``) at which the model predicts that run's measured
step, and every other run of the source is predicted at that speed and scored as
``published_accuracy.py`` scores it (measured / predicted - 1). The anchor run is never scored,
and nothing else is fitted: the corpus, the default constants and the other runs are as
``published_accuracy.py`` replays them. Sources of one run have nothing left to score and are
left out (listed). ``--every-anchor`` anchors each source on every one of its runs in turn
(interpolated on a grid of speeds); ``--two-anchors`` on two runs, its smallest and its largest,
fitting the network's speed too as ``planner calibrate anchor`` would (``fit_speeds``).
``--per-gpu`` anchors each source once per GPU it ran on, as the service keeps anchors: per
stored cluster (``POST /v1/clusters/{id}/calibrations``), so a team's H100 anchor never speaks
for its A100 or Blackwell runs; a source's runs on a GPU it ran only once on have nothing
left to score there and are left out (listed as ``source @ gpu``).

    python benchmarks/anchored_accuracy.py [--json results.json] [--source SOURCE ...]
        [--every-anchor] [--two-anchors] [--per-gpu]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import published_accuracy as pa  # noqa: E402

from planner.calibration.anchor import SCALE_HIGH, SCALE_LOW, fit_speeds, scale_for  # noqa: E402
from planner.specs import ClusterSpec  # noqa: E402
from planner.validation.compare import kendall_tau  # noqa: E402


def anchor_of(runs: list[dict], rows: list[dict], largest: bool = False) -> dict:
    """The anchor: the replayed run on the fewest GPUs, the first in corpus order among ties
    (with ``largest``, the run on the most GPUs, the last among ties)."""
    order = {r["id"]: i for i, r in enumerate(runs)}
    pick = max if largest else min
    chosen = pick(rows, key=lambda r: (r["gpus"], order[r["id"]]))
    return next(r for r in runs if r["id"] == chosen["id"])


def gpu_of(run: dict) -> str:
    """The GPU a run ran on (its cluster's, preset or spelled out)."""
    return ClusterSpec.model_validate(run["cluster"]).gpu.name


def held_out_sources(runs: list[dict], per_gpu: bool = False) -> dict[str, list[dict]]:
    """The held-out runs, by source (with ``per_gpu``, by source and GPU: 'source @ gpu')."""
    by_source: dict[str, list[dict]] = {}
    for run in runs:
        if run["split"] == "held_out":
            key = f"{run['source']} @ {gpu_of(run)}" if per_gpu else run["source"]
            by_source.setdefault(key, []).append(run)
    return by_source


def anchored_source(runs: list[dict]) -> dict | None:
    """One source's runs anchored on its smallest: the scale and each other run's error
    before and after; None when fewer than two runs replay."""
    rows, _ = pa.replay(runs)
    if len(rows) < 2:
        return None
    anchor = anchor_of(runs, rows)
    measured = next(r["measured_step_s"] for r in rows if r["id"] == anchor["id"])

    def step(scale: float) -> float:
        return pa.predict_run(anchor, {"compute_scale": scale})[0].step_time_s

    scale = round(scale_for(step, measured), 4)
    others = [r for r in runs if r["id"] != anchor["id"] and r["id"] in {x["id"] for x in rows}]
    after = {r["id"]: r for r in pa.replay(others, {"compute_scale": scale})[0]}
    scored = [{"id": r["id"], "source": r["source"], "split": r["split"], "gpus": r["gpus"],
               "sweep": r["sweep"], "measured_step_s": r["measured_step_s"],
               "error_pct": r["error_pct"], "anchored_error_pct": after[r["id"]]["error_pct"]}
              for r in rows if r["id"] in after]
    return {"source": runs[0]["source"], "gpu": gpu_of(anchor), "anchor": anchor["id"],
            "anchor_gpus": next(r["gpus"] for r in rows if r["id"] == anchor["id"]),
            "compute_scale": scale, "at_range_end": scale in (SCALE_LOW, SCALE_HIGH),
            "runs": scored}


def two_anchored_source(runs: list[dict]) -> dict | None:
    """One source anchored on two runs, its first on the fewest GPUs and its last on the most
    (``anchor_of``: a team measures a small run and then one at scale), fitted as ``planner
    calibrate anchor`` fits them (``fit_speeds``) with the network kept at the spec's
    ('kernels'), fitted ('kernels_and_network') and left to the default ('auto'), scored on
    its other runs; None when fewer than three runs replay."""
    rows, _ = pa.replay(runs)
    if len(rows) < 3:
        return None
    anchors = (anchor_of(runs, rows), anchor_of(runs, rows, largest=True))
    measured = {r["id"]: r["measured_step_s"] for r in rows}
    seen: dict[tuple[str, float, float | None], float] = {}

    def step(run: dict, compute: float, network: float | None) -> float:
        key = (run["id"], compute, network)
        if key not in seen:
            eff = {"compute_scale": compute}
            if network is not None:
                eff["network_scale"] = network
            seen[key] = pa.predict_run(run, eff)[0].step_time_s
        return seen[key]

    def residuals(a: float, b: float | None) -> list[float]:
        net = None if b is None else math.exp(b)
        return [math.log(step(x, math.exp(a), net) / measured[x["id"]]) for x in anchors]

    own = [scale_for(lambda c, x=x: step(x, c, None), measured[x["id"]]) for x in anchors]
    fits, note = {}, None
    for name, mode in (("kernels", "spec"), ("kernels_and_network", "fit"), ("auto", "auto")):
        speeds = fit_speeds(residuals, own, mode)
        fits[name] = {"compute_scale": round(speeds.compute, 4)}
        if speeds.network is not None:
            fits[name]["network_scale"] = round(speeds.network, 4)
        note = note or speeds.note
    ids = {x["id"] for x in anchors}
    others = [r for r in runs if r["id"] in measured and r["id"] not in ids]
    scored = {r["id"]: {"id": r["id"], "source": r["source"], "gpus": r["gpus"],
                        "sweep": r["sweep"], "measured_step_s": r["measured_step_s"],
                        "error_pct": r["error_pct"]} for r in rows if r["id"] not in ids}
    for name, eff in fits.items():
        for r in pa.replay(others, eff)[0]:
            scored[r["id"]][f"{name}_error_pct"] = r["error_pct"]
    return {"source": runs[0]["source"], "gpu": gpu_of(anchors[0]),
            "anchors": [x["id"] for x in anchors],
            "own_scales": [round(x, 4) for x in own], "fits": fits, "note": note,
            "runs": list(scored.values())}


def two_anchored(runs: list[dict], per_gpu: bool = False) -> dict:
    """Every held-out source (with ``per_gpu``, source and GPU) with three runs or more,
    anchored on two; the summaries."""
    sources = [s for s in (two_anchored_source(g)
                           for g in held_out_sources(runs, per_gpu).values()) if s]
    scored = [r for s in sources for r in s["runs"]]
    out = {}
    for key in ("model", "kernels", "kernels_and_network", "auto"):
        col = f"{key}_error_pct" if key != "model" else "error_pct"
        out[key] = {**summary(scored, col), **sweep_order(scored, col)}
    return {"summary": out, "per_gpu": per_gpu, "sources": sources}


def sweep_order(scored: list[dict], key: str) -> dict:
    """Kendall's tau between predicted and measured step times within each sweep of three
    scored runs or more (the prediction undone from the error under ``key``): how many sweeps
    and how many of them at 0.8 or more."""
    by_sweep: dict[str, list[dict]] = {}
    for r in scored:
        if r["sweep"]:
            by_sweep.setdefault(r["sweep"], []).append(r)
    taus = []
    for rows in by_sweep.values():
        if len(rows) >= 3:
            measured = [r["measured_step_s"] for r in rows]
            predicted = [m / (1 + r[key] / 100) for m, r in zip(measured, rows, strict=True)]
            taus.append(kendall_tau(predicted, measured))
    return {"sweeps": len(taus), "sweeps_tau_0_8": sum(t >= 0.8 for t in taus)}


# The scales at which ``every_anchor`` predicts each run; between them log(step time) is
# interpolated linearly in log(scale).
GRID = tuple(round(0.35 * (2.0 / 0.35) ** (i / 18), 4) for i in range(19))


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    """Piecewise-linear interpolation, extrapolated from the end segments."""
    i = max(1, min(len(xs) - 1, next((j for j, v in enumerate(xs) if v >= x), len(xs) - 1)))
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def every_anchor(runs: list[dict]) -> list[float]:
    """Each replayed run of one source as the anchor in turn: the median |error| of the
    others at its scale, one value per anchor (the rule-free spread of ``anchored_source``).
    Predictions come from a grid of scales (``GRID``), log-log interpolated."""
    rows, _ = pa.replay(runs)
    if len(rows) < 2:
        return []
    by_id = {r["id"]: r for r in runs}
    us = [math.log(g) for g in GRID]
    logs = {r["id"]: [math.log(pa.predict_run(by_id[r["id"]], {"compute_scale": g})[0]
                               .step_time_s) for g in GRID] for r in rows}
    measured = {r["id"]: r["measured_step_s"] for r in rows}
    out = []
    for a in rows:
        # log(pred) falls with the scale: interpolate the scale at which it meets the measure.
        ys = logs[a["id"]]
        target = math.log(measured[a["id"]])
        u = _interp(ys[::-1], us[::-1], target)
        errs = [100 * (measured[r["id"]] / math.exp(_interp(us, logs[r["id"]], u)) - 1)
                for r in rows if r["id"] != a["id"]]
        out.append(statistics.median(abs(e) for e in errs))
    return out


def summary(scored: list[dict], key: str) -> dict:
    """Median, each-source-once median, max and signed median of |error| under ``key``."""
    if not scored:
        return {"rows": 0}
    by_source: dict[str, list[float]] = {}
    for r in scored:
        by_source.setdefault(r["source"], []).append(abs(r[key]))
    errs = [abs(r[key]) for r in scored]
    return {"rows": len(scored), "sources": len(by_source),
            "median_abs_error_pct": round(statistics.median(errs), 2),
            "source_median_abs_error_pct": round(statistics.median(
                statistics.median(v) for v in by_source.values()), 2),
            "max_abs_error_pct": round(max(errs), 2),
            "within_5_pct": round(sum(e <= 5 for e in errs) / len(errs), 3),
            "within_10_pct": round(sum(e <= 10 for e in errs) / len(errs), 3),
            "median_signed_error_pct": round(statistics.median(r[key] for r in scored), 2)}


def anchored(runs: list[dict], every: bool = False, per_gpu: bool = False) -> dict:
    """Every held-out source (with ``per_gpu``, every source on each GPU it ran on) with two
    runs or more, anchored; the summaries before and after (each source once: a source
    anchored per GPU still counts once); with ``every``, each group's median |error| with every
    one of its runs as the anchor."""
    sources, single = [], []
    for name, group in held_out_sources(runs, per_gpu).items():
        result = anchored_source(group)
        if result is None:
            single.append(name)
            continue
        if every:
            per_anchor = every_anchor(group)
            result["every_anchor_median_abs_error_pct"] = round(statistics.median(per_anchor), 2)
            result["every_anchor_range_pct"] = (round(min(per_anchor), 2),
                                                round(max(per_anchor), 2))
        sources.append(result)
    scored = [r for s in sources for r in s["runs"]]
    out = {"summary": {"model": summary(scored, "error_pct"),
                       "anchored": summary(scored, "anchored_error_pct")},
           "per_gpu": per_gpu, "sources": sources, "left_out": sorted(single)}
    if every:
        out["summary"]["every_anchor_source_median_abs_error_pct"] = round(statistics.median(
            s["every_anchor_median_abs_error_pct"] for s in sources), 2)
    return out


def group_label(group: dict, per_gpu: bool) -> str:
    """A group's name in the tables: its source, and with ``per_gpu`` its GPU."""
    return f"{group['source']} @ {group['gpu']}" if per_gpu else group["source"]


def _median(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="Write the results here.")
    ap.add_argument("--source", action="append", help="Only these sources (repeatable).")
    ap.add_argument("--every-anchor", action="store_true", help="Also anchor each source on "
                    "every one of its runs in turn (about a minute).")
    ap.add_argument("--two-anchors", action="store_true", help="Also anchor each source on "
                    "two runs (its smallest and its largest), fitting the kernels' speed alone "
                    "and with the network's.")
    ap.add_argument("--per-gpu", action="store_true", help="Anchor each source once per GPU "
                    "it ran on, as the service keeps one anchor per stored cluster.")
    args = ap.parse_args(argv)
    runs = pa.load_runs()
    if args.source:
        runs = [r for r in runs if r["source"] in args.source]
    out = anchored(runs, args.every_anchor, args.per_gpu)

    def name_of(group: dict) -> str:
        return group_label(group, args.per_gpu)

    print(f"{'source':34} {'runs':>4} {'anchor GPUs':>11} {'scale':>7} "
          f"{'model |err|':>11} {'anchored':>9}" + ("  every anchor" if args.every_anchor else ""))
    for s in sorted(out["sources"], key=name_of):
        before = _median([r["error_pct"] for r in s["runs"]])
        after = _median([r["anchored_error_pct"] for r in s["runs"]])
        end = " (range end)" if s["at_range_end"] else ""
        every = ""
        if args.every_anchor:
            lo, hi = s["every_anchor_range_pct"]
            every = f"  {s['every_anchor_median_abs_error_pct']:5.1f}% ({lo:.1f}-{hi:.1f})"
        print(f"{name_of(s)[:34]:34} {len(s['runs']):4d} {s['anchor_gpus']:11d} "
              f"{s['compute_scale']:7.3f} {before:10.1f}% {after:8.1f}%{every}{end}")
    print()
    for label, key in (("model as it stands", "model"), ("anchored on one run", "anchored")):
        m = out["summary"][key]
        print(f"{label:20} {m['rows']} runs of {m['sources']} sources: median |error| "
              f"{m['median_abs_error_pct']}% (each source once {m['source_median_abs_error_pct']}%),"
              f" max {m['max_abs_error_pct']}%, within 5%: {100 * m['within_5_pct']:.0f}%, "
              f"within 10%: {100 * m['within_10_pct']:.0f}%, signed {m['median_signed_error_pct']}%")
    if args.every_anchor:
        print("every run as the anchor in turn: median over sources of each source's median "
              f"|error| {out['summary']['every_anchor_source_median_abs_error_pct']}%")
    if out["left_out"]:
        print(f"left out (one run, nothing to score): {', '.join(out['left_out'])}")
    if args.two_anchors:
        two = two_anchored(runs, args.per_gpu)
        out["two_anchors"] = two
        print()
        print(f"{'two anchors: source':34} {'runs':>4} {'kernels':>8} {'network':>8} "
              f"{'model':>7} {'kernels':>8} {'both':>7} {'auto':>7}")
        for s in sorted(two["sources"], key=name_of):
            both = {"network_scale": 1.0, **s["fits"]["kernels_and_network"]}
            cols = [_median([r[k] for r in s["runs"]]) for k in (
                "error_pct", "kernels_error_pct", "kernels_and_network_error_pct",
                "auto_error_pct")]
            picked = " (auto: network)" if "network_scale" in s["fits"]["auto"] else ""
            print(f"{name_of(s)[:34]:34} {len(s['runs']):4d} {both['compute_scale']:8.3f} "
                  f"{both['network_scale']:8.3f} {cols[0]:6.1f}% {cols[1]:7.1f}% "
                  f"{cols[2]:6.1f}% {cols[3]:6.1f}%"
                  + (" (network not fitted)" if s["note"] else picked))
        print()
        for label, key in (("model as it stands", "model"), ("kernels, two runs", "kernels"),
                           ("kernels and network", "kernels_and_network"),
                           ("auto (the default)", "auto")):
            m = two["summary"][key]
            print(f"{label:20} {m['rows']} runs of {m['sources']} sources: median |error| "
                  f"{m['median_abs_error_pct']}% (each source once "
                  f"{m['source_median_abs_error_pct']}%), max {m['max_abs_error_pct']}%, "
                  f"within 5%: {100 * m['within_5_pct']:.0f}%, "
                  f"within 10%: {100 * m['within_10_pct']:.0f}%, tau 0.8 or more in "
                  f"{m['sweeps_tau_0_8']} of {m['sweeps']} sweeps")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
