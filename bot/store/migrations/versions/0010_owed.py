"""What the bot owes the world, each item recorded before it is done (handlers/owed).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "owed",
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("due_at", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("owner", sa.String(128)),
        sa.Column("lease_until", sa.Float, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("in_flight_until", sa.Float, nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("done_at", sa.Float),
        sa.Column("result", sa.Text, nullable=False),
    )
    op.create_index("owed_due", "owed", ["state", "due_at"])


def downgrade() -> None:
    op.drop_index("owed_due", "owed")
    op.drop_table("owed")
