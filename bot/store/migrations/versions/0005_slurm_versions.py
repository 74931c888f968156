"""Slurm versions: the slurmrestd data parser each cluster answered, so every replica and
every ``sweep --once`` asks it at once instead of finding it again.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slurm_versions",
        sa.Column("cluster", sa.String(300), primary_key=True),
        sa.Column("version", sa.String(16), nullable=False),
        sa.Column("learned_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slurm_versions")
