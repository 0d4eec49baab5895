"""Alembic environment: runs on the connection the service hands over (api.db.migrate)."""

from alembic import context

from api.db import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
