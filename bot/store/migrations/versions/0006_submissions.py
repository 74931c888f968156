"""Submissions: a form submission is kept from its first byte until its card is posted or
its sender is told it was not, and a replay of one is known.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "submissions",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("what", sa.String(200), nullable=False),
        sa.Column("received_at", sa.Float, nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("made", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_submissions_received_at", "submissions", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_submissions_received_at", "submissions")
    op.drop_table("submissions")
