"""A kept change says when its saving ended: the time of its cluster's next kept change
(None while it is the newest), so that a period's savings are read by a range of rows instead
of ordering every change of every cluster on each report.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("changes_done", sa.Column("ended", sa.Float))
    op.create_index("ix_changes_done_cluster_finished", "changes_done", ["cluster", "finished_at"])
    op.execute(
        "UPDATE changes_done SET ended = (SELECT min(n.finished_at) FROM changes_done AS n"
        " WHERE n.cluster = changes_done.cluster AND n.finished_at >= changes_done.finished_at"
        " AND (n.finished_at > changes_done.finished_at"
        " OR n.request_id > changes_done.request_id))"
    )


def downgrade() -> None:
    op.drop_index("ix_changes_done_cluster_finished", "changes_done")
    with op.batch_alter_table("changes_done") as batch:
        batch.drop_column("ended")
