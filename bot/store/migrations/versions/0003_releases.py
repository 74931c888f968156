"""Pipeline releases: the queue-drained hook's state, so a restart loses none.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "releases",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("caller", sa.String(320), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("deadline", sa.Float, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("drained_at", sa.Float),
        sa.Column("request_id", sa.String(40)),
        sa.Column("outcome", sa.Text),
    )
    op.create_index("ix_releases_state", "releases", ["state"])


def downgrade() -> None:
    op.drop_index("ix_releases_state", "releases")
    op.drop_table("releases")
