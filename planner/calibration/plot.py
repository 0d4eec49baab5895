"""A log-log SVG of measured points and fitted lines, one panel per fit (no plotting library)."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from planner.calibration.fit import predict
from planner.calibration.model import Calibration

W, H, PAD = 360, 240, 42
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _panel(fit, samples, ox: float, oy: float) -> list[str]:
    pts = [(s.message_bytes, s.time_us) for s in samples]
    xs = [math.log10(x) for x, _ in pts]
    ys = [math.log10(y) for _, y in pts]
    x0, x1 = min(xs), max(xs) + 1e-9
    grid = [10 ** (x0 + (x1 - x0) * i / 60) for i in range(61)]
    pred = [predict(fit, m) for m in grid]
    ys_all = ys + [math.log10(max(v, 1e-9)) for v in pred]
    y0, y1 = min(ys_all), max(ys_all) + 1e-9

    def X(v):
        return ox + PAD + (math.log10(v) - x0) / (x1 - x0) * (W - 2 * PAD)

    def Y(v):
        return oy + H - PAD - (math.log10(max(v, 1e-9)) - y0) / (y1 - y0) * (H - 2 * PAD)

    color = COLORS[hash(fit.op) % len(COLORS)]
    out = [f'<rect x="{ox}" y="{oy}" width="{W}" height="{H}" fill="white" stroke="#ccc"/>',
           f'<text x="{ox + PAD}" y="{oy + 16}" font-size="12">{escape(fit.op)} p={fit.group_size}'
           f' ({fit.tier}): {fit.latency_us:.1f} us, {fit.bandwidth_gb_per_s:.3g} GB/s, '
           f'max err {100 * fit.max_rel_err:.0f}% [{fit.quality}]</text>',
           f'<text x="{ox + W / 2}" y="{oy + H - 8}" font-size="10" text-anchor="middle">'
           f'message bytes (log)</text>',
           f'<text x="{ox + 10}" y="{oy + H / 2}" font-size="10" transform="rotate(-90 '
           f'{ox + 10} {oy + H / 2})" text-anchor="middle">time us (log)</text>']
    path = " ".join(f"{'M' if i == 0 else 'L'}{X(m):.1f},{Y(v):.1f}"
                    for i, (m, v) in enumerate(zip(grid, pred, strict=True)))
    out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    out += [f'<circle cx="{X(m):.1f}" cy="{Y(t):.1f}" r="2.5" fill="{color}"/>' for m, t in pts]
    return out


def svg(cal: Calibration, columns: int = 3) -> str:
    panels = []
    for i, fit in enumerate(cal.fits):
        series = [s for s in cal.samples if (s.op, s.tier, s.group_size) ==
                  (fit.op, fit.tier, fit.group_size)]
        panels += _panel(fit, series, (i % columns) * W, (i // columns) * H)
    rows = max(1, math.ceil(len(cal.fits) / columns))
    width, height = columns * W, rows * H
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
            + "".join(panels) + "</svg>\n")
