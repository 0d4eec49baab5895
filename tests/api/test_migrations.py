"""Schema migrations on PostgreSQL: the job queue's schema comes and goes with revision 0005."""

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
