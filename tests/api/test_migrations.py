"""Schema migrations: the job queue's schema comes and goes with revision 0005 (PostgreSQL),
anchors gain their stack with 0006 (SQLite and PostgreSQL)."""

import sqlalchemy as sa
from alembic import command

from api.db import alembic_config, make_engine, migrate


def queue_objects(conn) -> dict[str, int]:
    """How many procrastinate tables, functions and types (enums, composites, rows of its
    tables) the database holds."""
    q = {"tables": "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'procrastinate%'",
         "functions": "SELECT count(*) FROM pg_proc WHERE proname LIKE 'procrastinate%'",
         "types": "SELECT count(*) FROM pg_type WHERE typname LIKE 'procrastinate%' "
                  "AND typtype IN ('e', 'c')"}
    return {k: conn.execute(sa.text(v)).scalar_one() for k, v in q.items()}


def test_queue_schema_upgrades_and_downgrades_cleanly(postgres_url):
    engine = make_engine(postgres_url)
    try:
        migrate(engine)
        migrate(engine)                      # a second replica's start-up changes nothing
        with engine.connect() as conn:
            created = queue_objects(conn)
        assert created["tables"] >= 4 and created["functions"] >= 10 and created["types"] >= 1
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0004")
        with engine.connect() as conn:
            assert queue_objects(conn) == {"tables": 0, "functions": 0, "types": 0}
            assert sa.inspect(conn).has_table("jobs")        # the service's own tables stay
        migrate(engine)
        with engine.connect() as conn:
            assert queue_objects(conn) == created
    finally:
        engine.dispose()


def test_anchors_stored_before_stacks_keep_serving_requests_naming_none(database_url):
    """Revision 0006 adds the anchor's stack: an anchor stored at 0005 comes through the
    upgrade without one (so it still serves requests that name no stack), and the
    downgrade drops the column and keeps the rows."""
    from api import store

    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0005")
            conn.execute(sa.text(
                "INSERT INTO calibrations (id, cluster_id, created_at, source, body) VALUES "
                "('cal-old', 'clu-1', '2026-01-01 00:00:00+00:00', 'anchor', :body)"),
                {"body": '{"source": "anchor", "compute_scale": 0.9}'})
        migrate(engine)
        row = store.latest_calibration(engine=engine, cluster_id="clu-1", anchor=True)
        assert row["id"] == "cal-old" and row["stack"] is None
        assert store.latest_calibration(engine=engine, cluster_id="clu-1", anchor=True,
                                        stack="torchtitan") is None
        store.save_calibration(engine=engine, cluster_id="clu-1", body={
            "source": "anchor", "compute_scale": 0.8, "stack": "torchtitan"})
        assert store.anchor_stacks(engine=engine, cluster_id="clu-1") == ["torchtitan"]
        assert store.latest_calibration(engine=engine, cluster_id="clu-1",
                                        anchor=True)["id"] == "cal-old"
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0005")
        with engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("calibrations")}
            assert "stack" not in columns
            assert conn.execute(sa.text("SELECT count(*) FROM calibrations")).scalar_one() == 2
    finally:
        engine.dispose()
