"""Job attempts: how many times a replica started the job (retries after a lapsed lease).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("attempts", sa.Integer, nullable=False,
                                    server_default="0"))


def downgrade() -> None:
    op.drop_column("jobs", "attempts")
