"""Off-hours schedules: one row for each, its phase moved by conditional updates
(handlers/schedules/).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("pool", sa.String(64)),
        sa.Column("off", sa.String(64), nullable=False),
        sa.Column("on", sa.String(64), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("requested_by", sa.String(320), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("request_id", sa.String(40), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("approved_by", sa.String(320)),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("next_off", sa.Float),
        sa.Column("next_on", sa.Float),
        sa.Column("due_at", sa.Float),
        sa.Column("tries", sa.Integer, nullable=False),
        sa.Column("firing_request", sa.String(40)),
        sa.Column("kept", sa.Text, nullable=False),
        sa.Column("slept_at", sa.Float),
        sa.Column("noticed_for", sa.Float),
        sa.Column("thread", sa.String(64)),
        sa.Column("freed_hour", sa.Float),
        sa.Column("saved", sa.Float, nullable=False),
        sa.Column("saved_hours", sa.Float, nullable=False),
        sa.Column("label", sa.String(63)),
    )
    op.create_index("ix_schedules_cluster", "schedules", ["cluster"])
    op.create_index("ix_schedules_state", "schedules", ["state"])


def downgrade() -> None:
    op.drop_index("ix_schedules_state", "schedules")
    op.drop_index("ix_schedules_cluster", "schedules")
    op.drop_table("schedules")
