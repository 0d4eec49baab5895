"""``tests/moved_figures.py``: every assert of the named tests checked in one run, each one
that does not hold recorded with what it got and what it pinned."""

import json

from tests import moved_figures

SAMPLE = '''"""A module whose asserts pin figures."""
from __future__ import annotations


def figures():
    return {"held out": 8.2, "each source once": 9.2}


def test_pinned():
    got = figures()
    assert got["held out"] == 8.1
    assert got["each source once"] == 9.2
    assert got["held out"] < 8.0, "the target"
    assert 1 / 0 == 1
    assert (got["held out"], 743) == (8.1, 743)


def _shared(value):
    assert value == 743


def test_through_a_helper():
    _shared(744)
'''


def test_the_rewritten_asserts_record_and_go_on(tmp_path, monkeypatch):
    out = tmp_path / "moved.jsonl"
    monkeypatch.setenv(moved_figures.ENV_OUT, str(out))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")   # run outside pytest: named by the function
    namespace: dict = {}
    exec(compile(moved_figures.soften(SAMPLE), "sample", "exec"), namespace)
    namespace["test_pinned"]()          # no assert stops it
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["test"], r["line"]) for r in rows] == [
        ("test_pinned", 11), ("test_pinned", 13), ("test_pinned", 14), ("test_pinned", 15)]
    first, below, error, pair = rows
    assert (first["got"], first["want"]) == ("8.2", "8.1")
    assert below["assert"] == "got['held out'] < 8.0" and below["got"] == "None"
    assert "ZeroDivisionError" in error["got"]
    assert (pair["got"], pair["want"]) == ("(8.2, 743)", "(8.1, 743)")
    # The equality that holds (line 12) is not recorded.


def test_one_run_lists_every_moved_figure_and_removes_its_copies(tmp_path, capsys):
    module = tmp_path / "test_sample_figures.py"
    module.write_text(SAMPLE)
    status = moved_figures.main([f"{module}::test_pinned"])
    printed = capsys.readouterr().out
    assert status == 1
    assert "test_pinned line 11: got['held out'] == 8.1" in printed
    assert "got  8.2\n    pinned 8.1" in printed and "4 assert(s) did not hold" in printed
    # An assert in a helper is listed under the test that ran it.
    assert moved_figures.main([str(module)]) == 1
    assert "test_through_a_helper (_shared) line 19: value == 743" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_sample_figures.py"]
    # A module whose asserts all hold: nothing listed, pytest's status.
    held = tmp_path / "test_held_figures.py"
    held.write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    assert moved_figures.main([str(held)]) == 0
    assert "0 assert(s) did not hold" in capsys.readouterr().out


def test_a_spec_that_names_no_test_module_is_refused(tmp_path, capsys):
    missing = tmp_path / "test_missing.py"
    assert moved_figures.main([f"{missing}::test_x"]) == 2
    assert "no such test module" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_run_past_its_timeout_is_killed_with_its_children(tmp_path, monkeypatch, capsys):
    module = tmp_path / "test_slow_figures.py"
    module.write_text("import time\n\n\ndef test_slow():\n    time.sleep(60)\n")
    monkeypatch.setattr(moved_figures, "TIMEOUT_S", 3)
    assert moved_figures.main([str(module)]) == 124
    assert "outlasted 3 s" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_slow_figures.py"]
