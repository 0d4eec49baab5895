"""The small least-recently-used store behind the kept plan spaces and estimate answers."""

from planner.kept import Kept


def test_the_least_recently_used_value_goes_first():
    kept: Kept[int] = Kept(2)
    assert kept.put("a", 1) == 1 and kept.put("b", 2) == 2
    assert kept.get("a") == 1                 # "a" is now the most recently used
    kept.put("c", 3)                          # so "b" goes
    assert kept.get("b") is None and kept.get("a") == 1 and kept.get("c") == 3
    kept.put("a", 4)                          # a new value for a kept key replaces it
    kept.put("d", 5)                          # and "c", least recently used, goes
    assert kept.get("a") == 4 and kept.get("c") is None and kept.get("d") == 5
