"""Following a change is owed work: each operation still followed gets its owed item, and
an operation keeps no lease of its own.

Before this revision the tracker claimed operations itself; now the engine does
(``handlers/changes/tracking.py``). An operation whose end is not told yet is owed under
``follow:REQUEST``, due at its next poll, so that an upgrade mid-change loses none.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    connection = op.get_bind()
    operations = sa.table(
        "tracked_operations",
        sa.column("name", sa.String),
        sa.column("request_id", sa.String),
        sa.column("started_at", sa.Float),
        sa.column("next_poll_at", sa.Float),
        sa.column("final", sa.String),
    )
    owed = sa.table(
        "owed",
        sa.column("key", sa.String),
        sa.column("kind", sa.String),
        sa.column("subject", sa.Text),
        sa.column("state", sa.String),
        sa.column("due_at", sa.Float),
        sa.column("created_at", sa.Float),
        sa.column("owner", sa.String),
        sa.column("lease_until", sa.Float),
        sa.column("attempts", sa.Integer),
        sa.column("in_flight_until", sa.Float),
        sa.column("note", sa.Text),
        sa.column("done_at", sa.Float),
        sa.column("result", sa.Text),
    )
    followed = connection.execute(
        sa.select(operations).where(
            sa.or_(operations.c.final.is_(None), operations.c.final != "posted")
        )
    ).all()
    taken = {row.key for row in connection.execute(sa.select(owed.c.key))}
    rows = [
        {
            "key": f"follow:{o.request_id}",
            "kind": "follow",
            "subject": json.dumps({"operation": o.name}, sort_keys=True),
            "state": "due",
            "due_at": o.next_poll_at,
            "created_at": o.started_at,
            "owner": None,
            "lease_until": 0.0,
            "attempts": 0,
            "in_flight_until": 0.0,
            "note": None,
            "done_at": None,
            "result": "{}",
        }
        for o in followed
        if f"follow:{o.request_id}" not in taken
    ]
    if rows:
        op.bulk_insert(owed, rows)
    # who polls an operation, and until when, is its owed item's now
    with op.batch_alter_table("tracked_operations") as batch:
        batch.drop_column("owner")
        batch.drop_column("lease_until")


def downgrade() -> None:
    with op.batch_alter_table("tracked_operations") as batch:
        batch.add_column(sa.Column("owner", sa.String(128)))
        batch.add_column(
            sa.Column("lease_until", sa.Float, nullable=False, server_default=sa.text("0"))
        )
    op.execute("DELETE FROM owed WHERE kind = 'follow'")
