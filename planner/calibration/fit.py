"""Fitting alpha-beta models to measured collective times.

Per (op, tier, group size) the model is t(M) = a + M / b (alpha-beta; Thakur et al. 2005),
fitted by weighted least squares with weights 1/t^2, so every point counts by its *relative*
error (ordinary least squares lets the largest sizes dominate and often returns a negative
alpha: research/collectives.md section 6), re-weighted twice with Huber weights so that a few
noisy points do not drag the line. alpha is kept >= 0.

One line does not fit a real NCCL sweep from bytes to GiB: NCCL picks the fastest of several
protocol/algorithm lines (LL, LL128, Simple; NCCL src/graph/tuning.cc). When one line leaves
more than ``PIECEWISE_TRIGGER`` relative error, the fit becomes the minimum of up to three
lines, each fitted on a contiguous range of sizes, with the ranges chosen to minimise the
maximum relative error. Quality is judged on relative errors (median, maximum, leave-one-out),
not R^2, which the largest sizes dominate; R^2 is reported for reference.

Scaling to other group sizes uses the ring algorithm's structure: the latency is
``steps(p) * alpha_step`` and the bandwidth term ``bus_factor(p) * M / bus_bandwidth``
(nccl-tests doc/PERFORMANCE.md), so one fit predicts another p (``predict``).
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

from planner.calibration.model import Fit, Sample, Segment
from planner.collectives import bus_factor

PIECEWISE_TRIGGER = 0.10     # max relative error of one line above which we try 2-3 lines
GOOD_MEDIAN, GOOD_MAX = 0.10, 0.30
MIN_POINTS_PER_SEGMENT = 3


def ring_steps(op: str, p: int) -> int:
    """Latency steps of the ring (or pipelined chain) algorithm of ``op`` over p ranks."""
    if op == "all_reduce":
        return 2 * (p - 1)
    if op == "send_recv":
        return 1
    return p - 1


def _wls(m: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(a, s) of t = a + s m minimising sum(((a + s m - t) / t)^2), robustly, with a >= 0."""
    w = 1.0 / t**2
    for _ in range(3):
        X = np.stack([np.ones_like(m), m], 1)
        sw = np.sqrt(w)
        a, s = np.linalg.lstsq(X * sw[:, None], t * sw, rcond=None)[0]
        if a < 0:   # the intercept would be negative: refit through the origin
            a, s = 0.0, float(np.sum(w * m * t) / np.sum(w * m * m))
        r = np.abs((a + s * m - t) / t)
        k = 1.345 * max(np.median(r), 1e-6) / 0.6745           # Huber on relative residuals
        w = (1.0 / t**2) * np.where(r <= k, 1.0, k / np.maximum(r, 1e-12))
    return float(a), float(max(s, 1e-30))


def _predict_lines(lines: list[tuple[float, float]], m: np.ndarray) -> np.ndarray:
    return np.min([a + s * m for a, s in lines], axis=0)


def _fit_lines(m: np.ndarray, t: np.ndarray, k: int):
    """The best min-of-k-lines model over contiguous size ranges:
    (lines, max relative error, the ranges' first indices)."""
    n = len(m)
    best: tuple[list[tuple[float, float]], float, tuple] = ([], np.inf, ())
    for cuts in itertools.combinations(range(MIN_POINTS_PER_SEGMENT, n - 1), k - 1):
        bounds = (0, *cuts, n)
        if k > 1 and any(b - a < MIN_POINTS_PER_SEGMENT
                         for a, b in zip(bounds, bounds[1:], strict=False)):
            continue
        lines = [_wls(m[a:b], t[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        err = float(np.max(np.abs(_predict_lines(lines, m) - t) / t))
        if err < best[1]:
            best = (lines, err, bounds)
    return best


def fit_series(op: str, tier: str, p: int, m: np.ndarray, t_us: np.ndarray) -> Fit:
    order = np.argsort(m)
    m, t = m[order].astype(float), t_us[order].astype(float) * 1e-6
    lines, err, bounds = _fit_lines(m, t, 1)
    for k in (2, 3):
        if err <= PIECEWISE_TRIGGER or len(m) < k * MIN_POINTS_PER_SEGMENT:
            break
        more, more_err, more_bounds = _fit_lines(m, t, k)
        if more and more_err < 0.8 * err:
            lines, err, bounds = more, more_err, more_bounds
    pred = _predict_lines(lines, m)
    rel = np.abs(pred - t) / t
    # Leave-one-out: each point predicted by the lines refitted on the same ranges without it.
    loo = []
    for i in range(len(m)):
        sub: list[tuple[float, float]] = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            idx = [j for j in range(a, b) if j != i]
            if len(idx) < 2:
                sub = []
                break
            sub.append(_wls(m[idx], t[idx]))
        if sub:
            loo.append(abs(_predict_lines(sub, m[i:i + 1])[0] - t[i]) / t[i])
    ss_res = float(np.sum((pred - t) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2)) or 1.0
    # The summary line: latency of the fastest line for tiny messages, bandwidth of the line
    # that serves the largest ones.
    small = min(lines, key=lambda ln: ln[0] + ln[1] * m[0])
    large = min(lines, key=lambda ln: ln[0] + ln[1] * m[-1])
    latency, bw = small[0], 1.0 / large[1]
    median_err, max_err = float(np.median(rel)), float(np.max(rel))
    segments = []
    if len(lines) > 1:
        for a, s in lines:
            served = m[np.isclose(a + s * m, pred)]
            segments.append(Segment(latency_us=a * 1e6, bandwidth_gb_per_s=1 / s / 1e9,
                                    min_bytes=float(served.min()) if len(served) else 0.0,
                                    max_bytes=float(served.max()) if len(served) else 0.0))
    steps = ring_steps(op, p)
    return Fit(
        op=op, algorithm="ring", tier=tier, group_size=p, latency_us=latency * 1e6,
        bandwidth_gb_per_s=bw / 1e9, bus_bandwidth_gb_per_s=bw * bus_factor(op, p) / 1e9,
        alpha_step_us=latency * 1e6 / steps, r2=1 - ss_res / ss_tot, median_rel_err=median_err,
        max_rel_err=max_err, loo_max_rel_err=float(max(loo)) if loo else float("nan"),
        samples=len(m),
        quality="good" if median_err <= GOOD_MEDIAN and max_err <= GOOD_MAX else "poor",
        segments=tuple(segments),
    )


def predict(fit: Fit, message_bytes: float, group_size: int | None = None) -> float:
    """Predicted microseconds; another group size scales latency by the ring's step count and
    bandwidth by its bus factor."""
    p = group_size or fit.group_size
    lines = ([(s.latency_us * 1e-6, 1 / (s.bandwidth_gb_per_s * 1e9)) for s in fit.segments]
             or [(fit.latency_us * 1e-6, 1 / (fit.bandwidth_gb_per_s * 1e9))])
    if p != fit.group_size:
        lat_scale = ring_steps(fit.op, p) / ring_steps(fit.op, fit.group_size)
        bw_scale = bus_factor(fit.op, p) / bus_factor(fit.op, fit.group_size)
        lines = [(a * lat_scale, s * bw_scale) for a, s in lines]
    return float(_predict_lines(lines, np.array([float(message_bytes)]))[0]) * 1e6


def fit_samples(samples: list[Sample], min_sizes: int = 3
                ) -> tuple[list[Fit], list[Sample], list[str]]:
    """Fits per (op, tier, group size) with at least ``min_sizes`` distinct sizes (a series of
    two fits its line exactly, so it is marked poor: nothing checks it); the samples with their
    predictions; notes on series too short to fit."""
    groups: dict[tuple, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.op, s.tier, s.group_size].append(s)
    fits, out, notes = [], [], []
    for (op, tier, p), series in sorted(groups.items()):
        m = np.array([s.message_bytes for s in series])
        t = np.array([s.time_us for s in series])
        if len(np.unique(m)) < max(2, min_sizes):
            notes.append(f"{op} over {p} ranks ({tier}): {len(np.unique(m))} distinct sizes, "
                         f"need {max(2, min_sizes)} to fit")
            out += series
            continue
        fit = fit_series(op, tier, p, m, t)
        if len(np.unique(m)) < 3:
            fit = fit.model_copy(update={"quality": "poor"})
        fits.append(fit)
        out += [s.model_copy(update={"predicted_us": predict(fit, s.message_bytes)})
                for s in series]
    return fits, out, notes
