"""The database schema, and the migrations that bring an older database up to it."""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 2

metadata = sa.MetaData()

meta = sa.Table(
    "clusterbot_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

requests = sa.Table(
    "approval_requests",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("plan", sa.Text, nullable=False),
    sa.Column("requester", sa.String(64), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("card_ts", sa.String(32)),
    sa.Column("decided_by", sa.String(64)),
    sa.Column("decided_at", sa.Float),
    sa.Column("operation", sa.String(300)),
    sa.Column("outcome", sa.Text),
    sa.Column("finished_at", sa.Float),
    sa.Column("origin", sa.String(32), nullable=False, server_default="command"),
)

operations = sa.Table(
    "tracked_operations",
    metadata,
    sa.Column("name", sa.String(300), primary_key=True),
    sa.Column("request_id", sa.String(40), nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("thread_ts", sa.String(32)),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("next_poll_at", sa.Float, nullable=False, index=True),
    sa.Column("interval", sa.Float, nullable=False),
    sa.Column("progress", sa.Text),
    sa.Column("shown_progress", sa.Text),
    sa.Column("progress_ts", sa.String(32)),
    sa.Column("last_edit_at", sa.Float, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("final", sa.String(16)),
    sa.Column("owner", sa.String(64)),
    sa.Column("lease_until", sa.Float, nullable=False),
)

audit = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("actor", sa.String(64), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("request_id", sa.String(40)),
    sa.Column("details", sa.Text, nullable=False),
)

idle_records = sa.Table(
    "idle_records",
    metadata,
    sa.Column("cluster", sa.String(300), primary_key=True),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Statements that take a database at version N-1 to version N, in order. Version 1 is the
# first schema, created whole by create_all; version 2 adds idle_records, which create_all
# also creates on an existing database.
MIGRATIONS: dict[int, list[str]] = {2: []}
