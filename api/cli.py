"""The ``planner`` command as installed: the core CLI (``planner.cli.main``), ``planner serve``,
which starts the REST service, and ``planner worker``, which runs its queued jobs. They live
here so that ``planner/`` never imports the service."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.errors import fail
from planner.cli.main import app


def _shown(url: str) -> str:
    """A database URL fit for a terminal: its password masked."""
    from sqlalchemy.engine import make_url

    try:
        return repr(make_url(url).render_as_string(hide_password=True))
    except Exception:           # not a URL at all: nothing in it to mask
        return repr(url) if "@" not in url else "(the URL given)"


def _settings(database_url: str | None):
    """The service settings, with a database that answers, or one ``error:`` line and exit 2
    (a mistyped URL or a server that is down is the caller's to fix, not a traceback)."""
    from pydantic import ValidationError

    from api.db import make_engine
    from api.settings import Settings

    try:
        settings = Settings(database_url=database_url) if database_url else Settings()
    except ValidationError as exc:
        fail(f"settings: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
    try:
        engine = make_engine(settings.database_url)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()
    except Exception as exc:     # any driver or URL error: the database is unusable
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(f"database {_shown(settings.database_url)} cannot be used: {reason}")
    return settings


FdOption = Annotated[int | None, typer.Option(
    min=0, help="Serve on this already listening socket, inherited from the parent process "
    "(socket activation; the tests' way to a port no other process can take), instead of "
    "binding host:port.")]


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0 picks a free one).")] = 8000,
    database_url: Annotated[str | None, typer.Option(
        help="SQLAlchemy URL (default: PLANNER_DATABASE_URL or sqlite:///./planner.db).")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    fd: FdOption = None,
) -> None:
    """Run the REST service (FastAPI + uvicorn); OpenAPI docs at /docs."""
    from api.main import create_app

    _run(create_app(_settings(database_url)), host, port, fd, log_level)


@app.command("worker")
def worker_cmd(
    host: Annotated[str, typer.Option(help="Address of its health and metrics endpoints.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port of /healthz, /readyz and "
                                      "/metrics (0 picks a free one).")] = 8001,
    database_url: Annotated[str | None, typer.Option(
        help="SQLAlchemy URL of the database the API replicas queue jobs in (default: "
        "PLANNER_DATABASE_URL).")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    fd: FdOption = None,
) -> None:
    """Run queued jobs (plans, calibration sweeps, validations) from the shared database,
    apart from the API replicas (start those with PLANNER_RUN_JOBS=false)."""
    from api.main import create_worker_app

    _run(create_worker_app(_settings(database_url)), host, port, fd, log_level)


def _run(asgi_app, host: str, port: int, fd: int | None, log_level: str) -> None:
    """uvicorn on host:port, or on the listening socket ``fd`` handed over by the parent."""
    import socket

    import uvicorn

    if fd is None:
        uvicorn.run(asgi_app, host=host, port=port, log_level=log_level)
        return
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        fail(f"--fd {fd}: not an open socket ({exc.strerror or exc})")
    config = uvicorn.Config(asgi_app, log_level=log_level)
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    app()


if __name__ == "__main__":
    main()
