"""Cards in a thread: a request's card may be posted as a reply in a thread (a schedule's
night, in its schedule's thread), and its lines then go to that thread. Requests are indexed
by when they were asked: a minute's nights are read together, for their channel's roll-up.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("approval_requests", sa.Column("card_thread_ts", sa.String(32)))
    op.create_index("ix_approval_requests_created_at", "approval_requests", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_approval_requests_created_at", "approval_requests")
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("card_thread_ts")
