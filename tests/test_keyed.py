"""Component lookups over arrays of plans (``planner.cost.keyed``): the same values as
evaluating the function row by row, each distinct row evaluated once while a memo lives, and
right even when every row's hash collides."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cost import keyed
from planner.cost.keyed import RowMemo, gather_rows, unique_rows


def _fn(calls: list):
    def fn(a, b, c):
        calls.append((a, b, c))
        return (a * 1000.0 + b * 10.0 + c, float(a - c))
    return fn


def _keys(seed: int, n: int = 500) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Small values, values past 64 and values too sparse for a dense code (np.unique path).
    return np.stack([rng.integers(0, 8, n), rng.integers(0, 200, n),
                     rng.choice([3, 10**9, 5 * 10**12], n)], 1).astype(np.int64)


def _direct(keys: np.ndarray) -> np.ndarray:
    return np.array([(a * 1000.0 + b * 10.0 + c, float(a - c)) for a, b, c in keys.tolist()])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unique_rows_inverts_to_the_keys(seed):
    keys = _keys(seed)
    rows, inv = unique_rows(keys)
    assert len({tuple(r) for r in rows.tolist()}) == len(rows)
    assert np.array_equal(rows[inv], keys)


def test_gather_rows_equals_row_by_row_evaluation_with_and_without_a_memo():
    memo = RowMemo()
    for seed in range(4):
        keys = _keys(seed)
        plain = gather_rows(keys, _fn([]), 2)
        kept = gather_rows(keys, _fn([]), 2, memo)
        assert np.array_equal(plain, _direct(keys))
        assert np.array_equal(kept, plain)


def test_a_memo_evaluates_each_distinct_row_once_across_calls():
    memo, calls = RowMemo(), []
    first, second = _keys(0), _keys(1)
    gather_rows(first, _fn(calls), 2, memo)
    assert len(calls) == len(unique_rows(first)[0])
    calls.clear()
    gather_rows(first, _fn(calls), 2, memo)
    assert calls == []                                   # all seen before
    gather_rows(second, _fn(calls), 2, memo)
    seen = {tuple(r) for r in first.tolist()}
    assert sorted(calls) == sorted({tuple(r) for r in second.tolist()} - seen)
    assert len(memo) == len(seen | {tuple(r) for r in second.tolist()})


def test_colliding_hashes_still_give_each_row_its_own_values(monkeypatch):
    monkeypatch.setattr(keyed, "row_hash", lambda keys: np.zeros(len(keys), dtype=np.uint64))
    memo = RowMemo()
    for seed in range(3):
        keys = _keys(seed, 200)
        assert np.array_equal(gather_rows(keys, _fn([]), 2, memo), _direct(keys))
    assert len(memo) == 1                 # only one row per hash is kept; the rest re-evaluate


def test_a_memo_refuses_another_key_shape():
    memo = RowMemo()
    gather_rows(_keys(0), _fn([]), 2, memo)
    with pytest.raises(ValueError, match="one function"):
        gather_rows(_keys(0)[:, :2], lambda a, b: (1.0, 2.0), 2, memo)
