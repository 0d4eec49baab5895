"""Values of a pure function of integer key rows, for arrays of plans: evaluated once per
distinct row (``gather_rows``), and, with a ``RowMemo``, once per distinct row for as long as
the memo lives, the lookups of rows seen before done without a Python call per row.

A search costs tens of thousands of plans whose components (a layer's work, a gradient
reduction, a send) depend on a few integer plan variables; the distinct rows are a few
thousand, the same from one request to the next on the same tables. ``RowMemo`` keeps them as
sorted arrays: a row's 64-bit hash (a multiply-add over its columns, wrapping), the row itself
(hash collisions are told apart by comparing it) and its values. A lookup hashes every row,
binary-searches the hashes and compares the rows it lands on; only the rows not found call the
function. The arrays are replaced whole, never changed in place, so a reader (another thread
answering another request on the same tables) always sees one consistent version; two
writers racing may lose one's additions, which only costs them again later.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_MUL = np.uint64(0x9E3779B97F4A7C15)     # odd 64-bit multiplier (the golden-ratio constant)


def gather_rows(keys: np.ndarray, fn: Callable[..., tuple], width: int,
                memo: RowMemo | None = None) -> np.ndarray:
    """fn(*key row) -> ``width`` floats, for every row of ``keys`` (n, k): (n, width). With
    ``memo``, rows it holds are not evaluated again."""
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) == 1:                          # one plan (estimate): no grouping to do
        return np.array([fn(*map(int, keys[0]))], dtype=float).reshape(1, width)
    if len(keys) == 0:
        return np.zeros((0, width))
    rows, inv = unique_rows(keys)
    if memo is not None:
        return memo.values(rows, fn, width)[inv]
    vals = np.array([fn(*r) for r in rows.tolist()], dtype=float).reshape(len(rows), width)
    return vals[inv]


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows of ``keys`` (n, k) int64, each row's index among them)."""
    # Each column as dense indices into its distinct values, then one mixed-radix code per row.
    values, dense = [], []
    for j in range(keys.shape[1]):
        col = keys[:, j]
        top = int(col.max(initial=0))
        low = int(col.min(initial=0))
        if 0 <= low and top < 64:                 # small values index themselves
            values.append(np.arange(top + 1))
            dense.append(col)
            continue
        if 0 <= low and top < 4 * len(col) + 100_000:
            v = np.flatnonzero(np.bincount(col, minlength=top + 1))
            dense.append(np.searchsorted(v, col))
        else:
            v, d = np.unique(col, return_inverse=True)
            dense.append(d.reshape(-1))
        values.append(v)
    radix = [len(v) for v in values]
    size = np.prod(radix, dtype=float)
    if size >= 2**62:                           # would overflow int64: unique over rows
        rows, inv = np.unique(keys, axis=0, return_inverse=True)
        return rows, inv.reshape(-1)
    code = np.zeros(len(keys), dtype=np.int64)
    for d, r in zip(dense, radix, strict=True):
        code = code * r + d
    if size <= 4 * len(keys) + 1_000_000:       # small code space: count, no sort
        uniq = np.flatnonzero(np.bincount(code, minlength=int(size)))
        inv = np.searchsorted(uniq, code)
    else:
        uniq, inv = np.unique(code, return_inverse=True)
    rows = np.empty((len(uniq), len(radix)), dtype=np.int64)
    rest = uniq.copy()
    for j in range(len(radix) - 1, -1, -1):
        rest, idx = np.divmod(rest, radix[j])
        rows[:, j] = values[j][idx]
    return rows, inv.reshape(-1)


def row_hash(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every row of ``keys`` (n, k) int64 (wrapping multiply-add)."""
    h = np.zeros(len(keys), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(keys.shape[1]):
            h = (h ^ keys[:, j].astype(np.uint64)) * _MUL
    return h


class RowMemo:
    """The values of one pure function of key rows of one width, kept across calls (module
    docstring). Not tied to the function: each memo is used with one function only."""

    def __init__(self) -> None:
        # (sorted hashes (m,), their rows (m, k), their values (m, width)), or None.
        self._state: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        state = self._state
        return 0 if state is None else len(state[0])

    def values(self, keys: np.ndarray, fn: Callable[..., tuple], width: int) -> np.ndarray:
        """fn(*row) for every row of ``keys`` (distinct rows: ``unique_rows``), (n, width)."""
        state = self._state                      # one consistent version for this call
        out = np.empty((len(keys), width))
        h = row_hash(keys)
        if state is None:
            miss = np.arange(len(keys))
        else:
            codes, rows, vals = state
            if rows.shape[1] != keys.shape[1] or vals.shape[1] != width:
                raise ValueError("a RowMemo serves one function of one key shape")
            pos = np.minimum(np.searchsorted(codes, h), len(codes) - 1)
            hit = (codes[pos] == h) & (rows[pos] == keys).all(axis=1)
            out[hit] = vals[pos[hit]]
            miss = np.flatnonzero(~hit)
        if not len(miss):
            return out
        new_vals = np.array([fn(*r) for r in keys[miss].tolist()],
                            dtype=float).reshape(len(miss), width)
        out[miss] = new_vals
        self._insert(state, h[miss], keys[miss], new_vals)
        return out

    def _insert(self, state, h: np.ndarray, rows: np.ndarray, vals: np.ndarray) -> None:
        if state is not None:
            codes, old_rows, old_vals = state
            # A new row whose hash an old row holds (a collision) is not kept: it is simply
            # evaluated again whenever asked for.
            fresh = ~np.isin(h, codes)
            h, rows, vals = h[fresh], rows[fresh], vals[fresh]
            h = np.concatenate([codes, h])
            rows = np.concatenate([old_rows, rows])
            vals = np.concatenate([old_vals, vals])
        # The rows of one call are distinct; two may still share a hash: keep the first.
        order = np.argsort(h, kind="stable")
        h, rows, vals = h[order], rows[order], vals[order]
        first = np.r_[True, h[1:] != h[:-1]]
        self._state = (h[first], rows[first], vals[first])
