import os

import pytest

from api.live import live_server
from tests.api.postgres import drop_postgres_database, postgres_database


def _backends():
    yield "sqlite"
    if os.environ.get("PLANNER_TEST_DATABASE_URL"):
        yield "postgresql"


@pytest.fixture(params=list(_backends()))
def database_url(request, tmp_path):
    """Each API test runs on SQLite, and on PostgreSQL when PLANNER_TEST_DATABASE_URL is set
    (.ci/run sets it to the server every development and CI machine runs)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'planner.db'}"
        return
    url, name = postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(name)


@pytest.fixture(params=["postgresql"] if os.environ.get("PLANNER_TEST_DATABASE_URL") else [])
def postgres_url():
    """A fresh PostgreSQL database on the server of PLANNER_TEST_DATABASE_URL, for what only
    PostgreSQL serves (the job queue, several replicas); no test without it."""
    url, name = postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(name)


@pytest.fixture
def server(database_url, tmp_path):
    with live_server(database_url, log=tmp_path / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for the read-mostly suites (bad input, schemathesis)."""
    path = tmp_path_factory.mktemp("shared") / "planner.db"
    # Fuzzing must not start torchrun sweeps: the 403 path is what it exercises.
    with live_server(f"sqlite:///{path}", env={"PLANNER_ALLOW_LOCAL_SWEEPS": "false"}) as srv:
        yield srv
