"""The code type-checks: mypy (with the pydantic plugin, settings in pyproject.toml) finds no
error in planner/ and api/. Part of the suite so that CI runs it."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_no_error():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def test_the_core_never_imports_the_service():
    """planner/ is pure (no HTTP, no database): no module of it imports api/."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "planner").rglob("*.py")
                 if any(line.strip().startswith(("import api", "from api"))
                        for line in p.read_text().splitlines())]
    assert offenders == []


def test_every_planner_module_imports_first():
    """Each module of planner/ imports in a fresh interpreter before any other: no import
    cycle hides behind the order the service happens to import them in (``import
    planner.launch`` once failed on frameworks -> cost -> step -> frameworks)."""
    names = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                   for p in (ROOT / "planner").rglob("*.py"))
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    for key in [k for k in sys.modules if k == 'planner' or k.startswith('planner.')]:\n"
            "        del sys.modules[key]\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        print(name, type(exc).__name__, exc)\n")
    proc = subprocess.run([sys.executable, "-c", code, *names], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "", proc.stdout[-4000:]
