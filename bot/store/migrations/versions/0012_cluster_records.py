"""Each capability keeps its own record of a cluster: the spend ledger's open runs (with the
cluster's labels) and health's episode move out of the idle record into ``cluster_records``.

The idle records keep those keys until their next write, and this release ignores them. A
replica of the earlier release that sweeps during a rolling upgrade finds them gone once this
release has written a record: it starts that cluster's runs again (a sweep's spend is counted
from then) and may draw its health alert again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    records = op.create_table(
        "cluster_records",
        sa.Column("owner", sa.String(64), primary_key=True),
        sa.Column("cluster", sa.String(300), primary_key=True),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    idle = sa.table(
        "idle_records",
        sa.column("cluster", sa.String),
        sa.column("record", sa.Text),
        sa.column("updated_at", sa.Float),
    )
    rows = []
    for row in op.get_bind().execute(sa.select(idle)):
        document = json.loads(row.record)
        spend = {"runs": document.get("spending", []), "labels": document.get("labels", [])}
        health = {"episode": document.get("episode")}
        for owner, kept in (("spend", spend), ("health", health)):
            text = json.dumps(kept, separators=(",", ":"))
            rows.append(
                {
                    "owner": owner,
                    "cluster": row.cluster,
                    "record": text,
                    "version": 1,
                    "updated_at": row.updated_at,
                }
            )
    if rows:
        op.bulk_insert(records, rows)


def downgrade() -> None:
    op.drop_table("cluster_records")
