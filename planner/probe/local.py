"""The local launcher: torchrun on this machine, with a hard timeout and full clean-up.

``torchrun --standalone`` picks a free rendezvous port; each rank's stderr goes to its own log
file (``--redirects 2``) so a failing rank's message can be shown; the launcher runs in its own
process session and the whole group is killed on timeout, failure or interruption.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


class ProbeError(RuntimeError):
    """A probe job failed or timed out; the message carries the failing rank's stderr."""


def torchrun_local_argv(nproc: int, module: str, args: list[str], log_dir: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--max-restarts=0", f"--log-dir={log_dir}",
            "--redirects=2", "-m", module, *args]


def _rank_stderr(log_dir: Path, limit: int = 2000) -> str:
    parts = []
    for path in sorted(log_dir.rglob("stderr.log")):
        text = path.read_text(errors="replace").strip()
        if text:
            parts.append(f"[{path.parent.name}] {text[-limit:]}")
    return "\n".join(parts)


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)
    except ProcessLookupError:
        pass


def run_module(nproc: int, module: str, args: list[str], *, timeout_s: float,
               on_progress: Callable[[int, int], None] | None = None,
               env: dict[str, str] | None = None) -> dict:
    """Run ``module`` on ``nproc`` local ranks; it must write JSON to the ``--out`` path this
    function appends (and may report progress to ``--progress``). Returns that JSON."""
    with tempfile.TemporaryDirectory(prefix="planner-probe-") as tmp:
        out, prog, logs = Path(tmp, "result.json"), Path(tmp, "progress.json"), Path(tmp, "logs")
        argv = torchrun_local_argv(nproc, module, [*args, "--out", str(out),
                                                   "--progress", str(prog)], str(logs))
        full_env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1",
                    "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=full_env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        last = None
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    kill_group(proc)
                    raise ProbeError(f"probe timed out after {timeout_s:.0f} s; ranks said:\n"
                                     + _rank_stderr(logs))
                if on_progress and prog.exists():
                    try:
                        p = json.loads(prog.read_text())
                        if (p["done"], p["total"]) != last:
                            last = (p["done"], p["total"])
                            on_progress(*last)
                    except (ValueError, KeyError, OSError):
                        pass
                time.sleep(0.2)
        except BaseException:
            kill_group(proc)
            raise
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0 or not out.exists():
            raise ProbeError(f"probe failed (exit {proc.returncode}); ranks said:\n"
                             f"{_rank_stderr(logs) or stderr[-3000:]}")
        return json.loads(out.read_text())
