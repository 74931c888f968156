"""Kept specs: a deleted cluster's last spec, so that /cluster restore can create it again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kept_specs",
        sa.Column("cluster", sa.String(300), primary_key=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("kept_at", sa.Float, nullable=False),
        sa.Column("request_id", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("kept_specs")
