"""A sample of the searched space for a step-time/memory plot: the Pareto frontier of the plans
that fit (no other fitting plan is both faster and lighter), then evenly spaced others, so a
user sees where the chosen plans sit among everything the search costed."""

from __future__ import annotations

import numpy as np


def pareto_frontier(step: np.ndarray, memory: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both step and memory (ties on both kept
    once), ordered by step time."""
    order = np.lexsort((memory, step))
    keep, best = [], np.inf
    for i in order:
        if memory[i] < best:
            keep.append(int(i))
            best = memory[i]
    return np.array(keep, dtype=np.int64)


def space_sample(step: np.ndarray, memory: np.ndarray, fits: np.ndarray, n: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``n`` plan indices: the frontier of the fitting plans first (cut to ``n``), then
    plans evenly spaced in step-time order; and which of them are on the frontier."""
    none = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    if n <= 0:
        return none
    ok = np.flatnonzero(np.isfinite(step) & np.isfinite(memory))   # the plans costed
    if len(ok) == 0:
        return none
    good = ok[fits[ok]]
    front = good[pareto_frontier(step[good], memory[good])] if len(good) else ok[:0]
    front = front[:n]
    rest = np.setdiff1d(ok, front, assume_unique=True)
    rest = rest[np.argsort(step[rest], kind="stable")]
    room = n - len(front)
    if room > 0 and len(rest):
        pick = np.unique(np.linspace(0, len(rest) - 1, min(room, len(rest))).round().astype(int))
        rest = rest[pick]
    else:
        rest = rest[:0]
    idx = np.concatenate([front, rest])
    return idx, np.arange(len(idx)) < len(front)
