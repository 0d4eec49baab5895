"""List every pinned figure a change moves, in one run.

The accuracy tests pin the README's figures with plain asserts, so a change to the step model
fails them one assert at a time: each round of the suite shows the first figure of each test
that moved, and a test with six figures takes six rounds. This rewrites the named test modules'
asserts into checks that record what they found and go on, runs the named tests once, and
prints every assert that did not hold: the test (and the helper the assert sits in, where it is
not the test itself), the line, the assert, and for an equality the value got beside the value
pinned.

    python tests/moved_figures.py tests/test_anchor.py \\
        tests/test_published_accuracy.py::test_the_headline_figures_are_the_readmes [-- -n 2]

Arguments after ``--`` go to pytest. The rewritten copies live beside the originals as
``tests/_moved_<module>.py`` (so their imports of ``tests.*`` resolve) for the run only; the
exit status is 0 when every assert held, 1 when some did not, and pytest's own where it failed
otherwise (an error the rewritten asserts do not catch).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 3600
ENV_OUT = "MOVED_FIGURES_OUT"

_RECORDER = '''
def _moved_check(ok, test, line, text, got=None, want=None):
    if ok:
        return
    import json as _json, os as _os
    running = _os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0].split("::")[-1]
    with open(_os.environ["MOVED_FIGURES_OUT"], "a") as _f:
        _f.write(_json.dumps({"test": running or test, "function": test, "line": line,
                              "assert": text, "got": repr(got)[:2000],
                              "want": repr(want)[:2000]}) + "\\n")
'''


class _Soften(ast.NodeTransformer):
    """Each ``assert a == b`` becomes: evaluate both sides once, record them when they differ;
    any other ``assert x``: record when x is false or raises. The enclosing function's name
    and the original line go with each record, and the running test's name
    (``PYTEST_CURRENT_TEST``) where pytest runs it."""

    def __init__(self) -> None:
        self.function = "<module>"

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer
        return node

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        test, text = node.test, ast.unparse(node.test)[:500]
        where = f"{self.function!r}, {node.lineno}, {text!r}"
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                test.ops[0], ast.Eq):
            pair = ast.parse("_moved_got, _moved_want = 0, 0").body[0]
            pair.value = ast.Tuple([test.left, test.comparators[0]], ast.Load())  # type: ignore[attr-defined]
            check = ast.parse(f"_moved_check(_moved_got == _moved_want, {where}, "
                              "_moved_got, _moved_want)").body[0]
            body: list[ast.stmt] = [pair, check]
        else:
            value = ast.parse("_moved_ok = 0").body[0]
            value.value = test  # type: ignore[attr-defined]
            body = [value, ast.parse(f"_moved_check(bool(_moved_ok), {where})").body[0]]
        guard = ast.parse(f"try:\n    pass\nexcept Exception as _moved_error:\n"
                          f"    _moved_check(False, {where}, _moved_error)").body[0]
        guard.body = body  # type: ignore[attr-defined]
        return [guard]


def soften(source: str) -> str:
    """The module's source with its asserts turned into recording checks (module docstring)."""
    tree = _Soften().visit(ast.parse(source))
    ast.fix_missing_locations(tree)
    recorder = ast.parse(_RECORDER).body
    body = tree.body
    at = next((i + 1 for i, s in enumerate(body) if isinstance(s, ast.ImportFrom)
               and s.module == "__future__"), 0)
    tree.body = body[:at] + recorder + body[at:]
    return ast.unparse(tree)


def run(specs: list[str], pytest_args: list[str], out: Path) -> int:
    """Rewrite the modules ``specs`` name, run their tests into ``out`` (JSON lines), remove the
    copies, and return pytest's exit status (2 where a spec names no test module, 124 where
    the run outlasts ``TIMEOUT_S``, its process group then killed)."""
    sources = {}
    for spec in specs:
        src = (ROOT / spec.partition("::")[0]).resolve()
        if not src.is_file() or src.suffix != ".py":
            print(f"moved_figures: {spec}: no such test module", file=sys.stderr)
            return 2
        sources[spec] = src
    copies: dict[Path, Path] = {}
    proc = None
    try:
        targets = []
        for spec, src in sources.items():
            if src not in copies:
                copies[src] = src.with_name(f"_moved_{src.stem}.py")
                copies[src].write_text(soften(src.read_text()))
            rest = spec.partition("::")[2]
            targets.append(str(copies[src]) + (f"::{rest}" if rest else ""))
        env = {**os.environ, ENV_OUT: str(out)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets,
               *pytest_args]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
        try:
            return proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"moved_figures: the run outlasted {TIMEOUT_S} s", file=sys.stderr)
            return 124
    finally:
        if proc is not None and proc.poll() is None:     # timed out or interrupted
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for copy in copies.values():
            copy.unlink(missing_ok=True)


def report(out: Path) -> list[dict]:
    """The recorded mismatches, each once, in file order."""
    if not out.exists():
        return []
    seen, rows = set(), []
    for line in out.read_text().splitlines():
        row = json.loads(line)
        key = (row["test"], row["line"], row["got"])
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    specs, pytest_args = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args \
        else (args, [])
    if not specs:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "moved.jsonl"
        status = run(specs, pytest_args, out)
        if status != 0 and not out.exists():     # refused, timed out, or pytest's own error
            return status
        rows = report(out)
    for row in rows:
        where = row["test"] if row["function"] == row["test"] else (
            f"{row['test']} ({row['function']})")
        print(f"{where} line {row['line']}: {row['assert']}")
        if row["got"] != "None" or row["want"] != "None":
            print(f"    got  {row['got']}\n    pinned {row['want']}")
    print(f"{len(rows)} assert(s) did not hold")
    return 1 if rows else status


if __name__ == "__main__":
    raise SystemExit(main())
