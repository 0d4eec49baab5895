"""Anchors per software stack: the stack an anchor's runs measured, where it was named.
Anchors stored before keep no stack and serve requests that name none, as they did.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calibrations", sa.Column("stack", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("calibrations") as batch:   # SQLite rebuilds the table
        batch.drop_column("stack")
