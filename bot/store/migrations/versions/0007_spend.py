"""Spend: the ledger of what each pool cost while the bot watched it, one row for each run of
time at one node count, price and idleness (handlers/spend/).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spend_runs",
        sa.Column("cluster", sa.String(300), primary_key=True),
        sa.Column("pool", sa.String(64), primary_key=True),
        sa.Column("start", sa.Float, primary_key=True),
        sa.Column("end", sa.Float, nullable=False),
        sa.Column("nodes", sa.Integer, nullable=False),
        sa.Column("node_hour", sa.Float),
        sa.Column("idle", sa.Boolean, nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
    )
    op.create_index("ix_spend_runs_end", "spend_runs", ["end"])


def downgrade() -> None:
    op.drop_index("ix_spend_runs_end", "spend_runs")
    op.drop_table("spend_runs")
