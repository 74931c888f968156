"""The schema of release 3, the last before Alembic: the baseline every later revision builds
on.

On an empty database it creates the tables. On a database an earlier release made (its
version recorded in ``clusterbot_meta``) it first applies that release's own upgrade steps,
then adds any table it lacks, then drops ``clusterbot_meta``: from here Alembic keeps the
version. The tables are written out here as they were, never imported from the live schema,
which later revisions change.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

OPEN = sorted(["approved", "draft", "executing", "pending", "running"])
_OPEN_LIST = ", ".join(f"'{s}'" for s in OPEN)
metadata = sa.MetaData()

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
    sa.Column("owner", sa.String(128)),
    sa.Column("lease_until", sa.Float, nullable=False, server_default="0"),
    sa.Column("progress_ts", sa.String(32)),
    sa.Column("executing_at", sa.Float),
)
OPEN_REQUEST_INDEX = "one_open_request_per_cluster"
# A cluster has at most one request under way: two people asking at once, on two replicas,
# cannot both get a card. Partial unique indexes work alike on SQLite and PostgreSQL.
sa.Index(
    OPEN_REQUEST_INDEX,
    requests.c.cluster,
    unique=True,
    sqlite_where=requests.c.state.in_(OPEN),
    postgresql_where=requests.c.state.in_(OPEN),
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
    sa.Column("owner", sa.String(128)),
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False, server_default="operation"),
    sa.Column("done_at", sa.Float),
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

# Work that one replica at a time does (the idle sweep): who holds it, until when, and when
# it last finished, so replicas take turns instead of each sweeping every interval.
leases = sa.Table(
    "leases",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(128)),
    sa.Column("until", sa.Float, nullable=False),
    sa.Column("last_finished", sa.Float),
)

# The last sweep's report, so /cluster idle answers at once on any replica.
sweep_reports = sa.Table(
    "sweep_reports",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("report", sa.Text, nullable=False),
)

# What took a release-N-1 database to release N, as those releases ran it.
LEGACY_STEPS: dict[int, list[str]] = {
    2: [],
    3: [
        "ALTER TABLE approval_requests ADD COLUMN owner VARCHAR(128)",
        "ALTER TABLE approval_requests ADD COLUMN lease_until FLOAT NOT NULL DEFAULT 0",
        "ALTER TABLE approval_requests ADD COLUMN progress_ts VARCHAR(32)",
        "ALTER TABLE approval_requests ADD COLUMN executing_at FLOAT",
        "ALTER TABLE tracked_operations ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT 'operation'",
        "ALTER TABLE tracked_operations ADD COLUMN done_at FLOAT",
        f"CREATE UNIQUE INDEX IF NOT EXISTS {OPEN_REQUEST_INDEX} ON approval_requests (cluster) "
        f"WHERE state IN ({_OPEN_LIST})",
    ],
}
LEGACY_META = "clusterbot_meta"


def upgrade() -> None:
    bind = op.get_bind()
    if sa.inspect(bind).has_table(LEGACY_META):
        recorded = bind.execute(
            sa.text(f"SELECT value FROM {LEGACY_META} WHERE key = 'schema_version'")
        ).scalar()
        for step in range(int(recorded or 1) + 1, 4):
            for statement in LEGACY_STEPS[step]:
                op.execute(statement)
        if int(recorded or 1) < 3:
            # Release 3 made tracked_operations.owner 128 characters wide (replica ids) in
            # new databases, but its upgrade step left older ones at 64.
            with op.batch_alter_table("tracked_operations") as batch:
                batch.alter_column(
                    "owner",
                    existing_type=sa.String(64),
                    type_=sa.String(128),
                    existing_nullable=True,
                )
    metadata.create_all(bind, checkfirst=True)
    if sa.inspect(bind).has_table(LEGACY_META):
        op.drop_table(LEGACY_META)


def downgrade() -> None:
    raise NotImplementedError("release 3 is the oldest schema clusterbot can be taken back to")
