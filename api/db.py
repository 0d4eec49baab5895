"""Database: the engine, the tables, and schema migrations (Alembic) run at start-up."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

metadata = sa.MetaData()

plans = sa.Table(
    "plans", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("model_name", sa.String(200), nullable=False, index=True),
    sa.Column("cluster_name", sa.String(200), nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("request", sa.JSON, nullable=False),
    sa.Column("result", sa.JSON, nullable=False),
)

clusters = sa.Table(
    "clusters", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("spec", sa.JSON, nullable=False),
)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("progress", sa.Float, nullable=False, default=0.0),
    sa.Column("request", sa.JSON, nullable=False),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("error", sa.JSON, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    # The replica running the job and until when its lease holds (renewed by heartbeats).
    sa.Column("owner", sa.String(128), nullable=True),
    sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0", default=0),
)


calibrations = sa.Table(
    "calibrations", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("cluster_id", sa.String(64), nullable=True, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("body", sa.JSON, nullable=False),
    # An anchor's software stack, where it was named (the newest anchor per stack applies).
    sa.Column("stack", sa.String(64), nullable=True),
)


def normalise_url(url: str) -> str:
    """postgres:// and postgresql:// (as Heroku-style URLs write it) use psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        if url in ("sqlite://", "sqlite:///:memory:"):
            return sa.create_engine(url, connect_args={"check_same_thread": False},
                                    poolclass=StaticPool)
        path = url.split("///", 1)[-1]
        if path:
            Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # durable and concurrent enough for one service
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


MIGRATION_LOCK = 0x706C616E6E6572   # "planner": the advisory lock key of schema migrations


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (alembic upgrade head)."""
    from alembic import command

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Replicas that start together migrate one after the other (released at commit).
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        command.upgrade(alembic_config(conn), "head")


def alembic_config(conn: sa.Connection):
    """Alembic's configuration for this package's migrations, on an open connection."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    cfg.attributes["connection"] = conn
    return cfg
