"""A throw-away PostgreSQL database for the API tests."""

import os
import uuid


def postgres_database():
    """A fresh database on the server of PLANNER_TEST_DATABASE_URL, or None; dropped by the
    caller with ``drop_postgres_database``."""
    base = os.environ.get("PLANNER_TEST_DATABASE_URL")
    if not base:
        return None
    import psycopg

    name = "planner_test_" + uuid.uuid4().hex[:10]
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}", name


def drop_postgres_database(name: str) -> None:
    import psycopg

    plain = os.environ["PLANNER_TEST_DATABASE_URL"].replace("postgresql+psycopg://",
                                                            "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
