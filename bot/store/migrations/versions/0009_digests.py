"""The weekly cost digest's firings, each claimed once (handlers/spend/digest.py).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "digests",
        sa.Column("fired_at", sa.Float, primary_key=True),
        sa.Column("claimed_by", sa.String(200), nullable=False),
        sa.Column("claimed_at", sa.Float, nullable=False),
        sa.Column("message", sa.String(64)),
    )


def downgrade() -> None:
    op.drop_table("digests")
