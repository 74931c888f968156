"""The database schema as the code uses it; ``bot/store/migrations`` takes a database to it
(a test checks that the two agree)."""

from __future__ import annotations

import sqlalchemy as sa

from handlers.entities import OPEN_STATES

OPEN = sorted(str(s) for s in OPEN_STATES)

metadata = sa.MetaData()

# A column keeps the name it was created with, so replicas of an earlier release read and write
# it during a rolling upgrade; where the code's name for it changed, ``key`` is that name
# (``card_ts`` holds the request's ``card_message``).

requests = sa.Table(
    "approval_requests",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("plan", sa.Text, nullable=False),
    sa.Column("requester", sa.String(64), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False, index=True),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("card_ts", sa.String(32), key="card_message"),
    sa.Column("decided_by", sa.String(64)),
    sa.Column("decided_at", sa.Float),
    sa.Column("operation", sa.String(300)),
    sa.Column("outcome", sa.Text),
    sa.Column("finished_at", sa.Float, index=True),
    sa.Column("origin", sa.String(32), nullable=False, server_default="command"),
    sa.Column("owner", sa.String(128)),
    sa.Column("lease_until", sa.Float, nullable=False, server_default="0"),
    sa.Column("progress_ts", sa.String(32), key="progress_message"),
    sa.Column("executing_at", sa.Float),
    sa.Column("mention_ts", sa.String(32), key="mention_message"),
    sa.Column("card_thread_ts", sa.String(32), key="card_thread"),
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
    sa.Column("thread_ts", sa.String(32), key="thread"),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("next_poll_at", sa.Float, nullable=False, index=True),
    sa.Column("interval", sa.Float, nullable=False),
    sa.Column("progress", sa.Text),
    sa.Column("shown_progress", sa.Text),
    sa.Column("progress_ts", sa.String(32), key="progress_message"),
    sa.Column("last_edit_at", sa.Float, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("final", sa.String(16)),
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

# Every other capability's record of a cluster (the spend ledger's open runs, health's
# episode), beside its owner's name: each changed by compare-and-set on its version.
cluster_records = sa.Table(
    "cluster_records",
    metadata,
    sa.Column("owner", sa.String(64), primary_key=True),
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

# The spec of each cluster the bot deleted, kept before the DELETE was sent; the newest per
# cluster name (a cluster restored and deleted again keeps its latest spec).
kept_specs = sa.Table(
    "kept_specs",
    metadata,
    sa.Column("cluster", sa.String(300), primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("kept_at", sa.Float, nullable=False),
    sa.Column("request_id", sa.String(40), nullable=False),
)

# Pipeline releases (POST /api/v1/release): each waits for its cluster's queue to empty.
releases = sa.Table(
    "releases",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("cluster", sa.String(300), nullable=False),
    sa.Column("action", sa.String(16), nullable=False),
    sa.Column("caller", sa.String(320), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("deadline", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("channel", sa.String(64)),
    sa.Column("thread_ts", sa.String(32), key="thread"),
    sa.Column("drained_at", sa.Float),
    sa.Column("request_id", sa.String(40)),
    sa.Column("outcome", sa.Text),
)

# The slurmrestd data parser each cluster answered last (v0.0.40 to v0.0.45).
slurm_versions = sa.Table(
    "slurm_versions",
    metadata,
    sa.Column("cluster", sa.String(300), primary_key=True),
    sa.Column("version", sa.String(16), nullable=False),
    sa.Column("learned_at", sa.Float, nullable=False),
)

# Form submissions from their first byte until made or told (handlers/intake.py).
submissions = sa.Table(
    "submissions",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("user", sa.String(64), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("what", sa.String(200), nullable=False),
    sa.Column("received_at", sa.Float, nullable=False, index=True),
    sa.Column("owner", sa.String(128), nullable=False),
    sa.Column("made", sa.Boolean, nullable=False, server_default=sa.false()),
)

# The spend ledger (handlers/spend/runs.py): a row for each closed run of a pool at one node
# count, price and idleness; keyed by its start, so a run written twice (a crash between the
# ledger and the idle records) is one row with its latest end.
spend_runs = sa.Table(
    "spend_runs",
    metadata,
    sa.Column("cluster", sa.String(300), primary_key=True),
    sa.Column("pool", sa.String(64), primary_key=True),
    sa.Column("start", sa.Float, primary_key=True),
    sa.Column("end", sa.Float, nullable=False, index=True),
    sa.Column("nodes", sa.Integer, nullable=False),
    sa.Column("node_hour", sa.Float),
    sa.Column("idle", sa.Boolean, nullable=False),
    sa.Column("target", sa.String(100), nullable=False),
    sa.Column("labels", sa.Text, nullable=False),  # JSON: [[key, value], ...]
    # runs are kept cut at UTC midnights (a row a day at most): a day's rows are a range
    sa.Index("ix_spend_runs_start", "start"),
)

# The ledger rolled up, kept as its rows are written (bot/store/spend_rollup.py): each place
# a run may have (its cluster, pool, target, labels, price and idleness) once, by number, and
# each place's node-seconds a UTC day and a week (weeks from the epoch), so that a period
# reads a row a place a week and a day at its edges, summed by number, and only its partial
# days from the ledger itself.
spend_places = sa.Table(
    "spend_places",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False, unique=True),  # sha256 of the columns
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("pool", sa.String(64), nullable=False),
    sa.Column("target", sa.String(100), nullable=False),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("idle", sa.Boolean, nullable=False),
    sa.Column("node_hour", sa.Float),
)

spend_weeks = sa.Table(
    "spend_weeks",
    metadata,
    sa.Column("week", sa.Float, primary_key=True),
    sa.Column("place", sa.Integer, primary_key=True),
    sa.Column("seconds", sa.Float, nullable=False),  # node-seconds
    sa.Column("first", sa.Float, nullable=False),  # the earliest start of its rows
    sa.Column("last", sa.Float, nullable=False),  # the latest
)

spend_place_days = sa.Table(
    "spend_place_days",
    metadata,
    sa.Column("day", sa.Float, primary_key=True),
    sa.Column("place", sa.Integer, primary_key=True),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("first", sa.Float, nullable=False),
    sa.Column("last", sa.Float, nullable=False),
    sa.Index("ix_spend_place_days_place", "place", "day"),  # a few clusters' days
)

# ... and the fleet's node-seconds a UTC day, at one price and idleness: a chart's days.
spend_days = sa.Table(
    "spend_days",
    metadata,
    sa.Column("day", sa.Float, nullable=False, index=True),
    sa.Column("idle", sa.Boolean, nullable=False),
    sa.Column("node_hour", sa.Float),
    sa.Column("seconds", sa.Float, nullable=False),
)

# What each succeeded change did to its cluster's cost an hour (handlers/spend/savings.py),
# kept from the requests as they end: a report reads the savings of its period by time
# instead of every request's plan. A change that saved nothing ends the saving before it.
changes_done = sa.Table(
    "changes_done",
    metadata,
    sa.Column("request_id", sa.String(40), primary_key=True),
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("finished_at", sa.Float, nullable=False, index=True),
    sa.Column("cause", sa.String(32)),  # None: the change saved nothing
    sa.Column("per_hour", sa.Float),
    # the time of the cluster's next kept change (None while this is its newest): when the
    # saving ended; kept as rows are added (bot/store/spend.py), so no report orders them
    sa.Column("ended", sa.Float),
    sa.Index("ix_changes_done_cluster_finished", "cluster", "finished_at"),
    sa.Index("ix_changes_done_ended", "ended"),  # the savings still open: ended is None
)

# Each ended saving (a kept change that cut a cost, with its end) cut at UTC midnights, and
# rolled up as they are kept (bot/store/saved_rollup.py): what a cluster's cause saved a week
# (weeks from the epoch), and the fleet a UTC day. A long report reads its whole weeks and
# days here, its edge days from the pieces, and the savings still open from the changes.
savings_pieces = sa.Table(
    "savings_pieces",
    metadata,
    sa.Column("request_id", sa.String(40), primary_key=True),
    sa.Column("start", sa.Float, primary_key=True),
    sa.Column("end", sa.Float, nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False),
    sa.Column("cause", sa.String(32), nullable=False),
    sa.Column("per_hour", sa.Float, nullable=False),
    sa.Index("ix_savings_pieces_start", "start"),
)

savings_weeks = sa.Table(
    "savings_weeks",
    metadata,
    sa.Column("week", sa.Float, nullable=False),
    sa.Column("cluster", sa.String(300), nullable=False),
    sa.Column("cause", sa.String(32), nullable=False),
    sa.Column("saved", sa.Float, nullable=False),  # dollars
    sa.Index("ix_savings_weeks_week", "week"),
    sa.Index("ix_savings_weeks_cluster_week", "cluster", "week"),
)

savings_days = sa.Table(
    "savings_days",
    metadata,
    sa.Column("day", sa.Float, nullable=False, index=True),
    sa.Column("saved", sa.Float, nullable=False),
)

# Off-hours schedules (handlers/schedules/): each phase change one conditional UPDATE.
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("cluster", sa.String(300), nullable=False, index=True),
    sa.Column("pool", sa.String(64)),
    sa.Column("off", sa.String(64), nullable=False),  # "mon,tue,wed,thu,fri 20:00"
    sa.Column("on", sa.String(64), nullable=False),
    sa.Column("zone", sa.String(64), nullable=False),
    sa.Column("requested_by", sa.String(320), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("request_id", sa.String(40), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("approved_by", sa.String(320)),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("next_off", sa.Float),
    sa.Column("next_on", sa.Float),
    sa.Column("due_at", sa.Float),
    sa.Column("tries", sa.Integer, nullable=False),
    sa.Column("firing_request", sa.String(40)),
    sa.Column("kept", sa.Text, nullable=False),  # JSON: {pool: [min, max]}
    sa.Column("slept_at", sa.Float),
    sa.Column("noticed_for", sa.Float),
    sa.Column("thread", sa.String(64)),
    sa.Column("freed_hour", sa.Float),
    sa.Column("saved", sa.Float, nullable=False),
    sa.Column("saved_hours", sa.Float, nullable=False),
    sa.Column("label", sa.String(63)),  # the policy schedule a cluster label named
)

# The weekly digest's firings: one row each, claimed by the replica that posts it.
digests = sa.Table(
    "digests",
    metadata,
    sa.Column("fired_at", sa.Float, primary_key=True),
    sa.Column("claimed_by", sa.String(200), nullable=False),
    sa.Column("claimed_at", sa.Float, nullable=False),
    sa.Column("message", sa.String(64)),
)

# What the bot owes the world (handlers/owed): each item recorded before it is done, held by a
# lease only the replica working on it renews, and not looked at again while a call sent for
# it may still be applied (``in_flight_until``).
owed = sa.Table(
    "owed",
    metadata,
    sa.Column("key", sa.String(300), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("subject", sa.Text, nullable=False),  # JSON
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("due_at", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("owner", sa.String(128)),
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("in_flight_until", sa.Float, nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("done_at", sa.Float),
    sa.Column("result", sa.Text, nullable=False),  # JSON
)
sa.Index("owed_due", owed.c.state, owed.c.due_at)
