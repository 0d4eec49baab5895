"""Run the service as a child process on a free loopback port (tests, benchmarks)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


class LiveServer:
    def __init__(self, database_url: str, env: dict | None = None, log: Path | None = None,
                 command: str = "serve"):
        self.database_url = database_url
        self.command = command          # "serve" (an API replica) or "worker"
        self.env = env or {}
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> LiveServer:
        # The port is bound here and the listening socket handed to the child (``--fd``): no
        # other process can take the port between choosing it and serving on it, so the
        # server answering below is this one.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        # argv only (no shell); the process group is ours to kill.
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "api.cli", self.command, "--fd", str(listener.fileno()),
                 "--database-url", self.database_url, "--log-level", "warning"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(listener.fileno(),))
        finally:
            listener.close()            # the child holds its own copies of both
            if not isinstance(out, int):
                out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not start in time")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=15)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kw)


@contextmanager
def live_server(database_url: str, **kw):
    server = LiveServer(database_url, **kw).start()
    try:
        yield server
    finally:
        server.stop()
