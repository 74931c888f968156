"""Savings kept as rows: ``changes_done`` holds what each succeeded change did to its cluster's
cost an hour, and ``approval_requests.finished_at`` is indexed, so that the rows are kept up
from the requests that ended since the last one.

The table starts empty: the first report after the upgrade fills it from the succeeded
requests (as every report read them before), and each one after reads only what ended since.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "changes_done",
        sa.Column("request_id", sa.String(40), primary_key=True),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("finished_at", sa.Float, nullable=False),
        sa.Column("cause", sa.String(32)),
        sa.Column("per_hour", sa.Float),
    )
    op.create_index("ix_changes_done_cluster", "changes_done", ["cluster"])
    op.create_index("ix_changes_done_finished_at", "changes_done", ["finished_at"])
    op.create_index("ix_approval_requests_finished_at", "approval_requests", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_approval_requests_finished_at", "approval_requests")
    op.drop_table("changes_done")
