"""The roll-up of each place's days is indexed by place too, so that a few clusters' days
(the ones the weekly digest compares with the week before) are read by their places instead
of every place's days of the period.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_spend_place_days_place", "spend_place_days", ["place", "day"])


def downgrade() -> None:
    op.drop_index("ix_spend_place_days_place", "spend_place_days")
