"""The spend ledger keeps its runs cut at UTC midnights and rolled up, a pool's a week and
the fleet's a day, so that a long report reads a row a pool a week and only its edge days
from the ledger; the ended savings are cut and rolled up the same way.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

DAY = 86400.0
WEEK = 7 * DAY
COLUMNS = "cluster, pool, target, labels, idle, node_hour"


def _floor(column: str, size: float) -> str:
    """The SQL of ``column`` down to a multiple of ``size`` (times after 1970)."""
    if op.get_bind().dialect.name == "postgresql":
        return f"floor({column} / {size}) * {size}"
    return f"CAST({column} / {size} AS INTEGER) * {size}"


def _cut() -> None:
    """Each row that crosses a UTC midnight becomes a row a day."""
    runs = sa.table(
        "spend_runs",
        *(sa.column(name) for name in ("cluster", "pool", "start", "end", "nodes")),
        *(sa.column(name) for name in ("node_hour", "idle", "target", "labels")),
    )
    bind = op.get_bind()
    crossing = sa.text(f'SELECT * FROM spend_runs WHERE "end" > {_floor("start", DAY)} + {DAY}')
    for row in list(bind.execute(crossing).mappings()):
        key = (runs.c.cluster == row["cluster"], runs.c.pool == row["pool"])
        bind.execute(runs.delete().where(*key, runs.c.start == row["start"]))
        pieces, start = [], row["start"]
        while start < row["end"]:
            end = min(start - start % DAY + DAY, row["end"])
            pieces.append({**row, "start": start, "end": end})
            start = end
        bind.execute(runs.insert(), pieces)


def _cut_savings() -> None:
    """Each ended saving (a kept change that cut a cost, with its end) as pieces a day."""
    names = ("request_id", "cluster", "cause", "per_hour", "start", "end")
    pieces_table = sa.table("savings_pieces", *(sa.column(name) for name in names))
    bind = op.get_bind()
    ended = sa.text(
        "SELECT request_id, cluster, cause, per_hour, finished_at, ended FROM changes_done"
        " WHERE ended IS NOT NULL AND cause IS NOT NULL AND per_hour IS NOT NULL"
    )
    pieces = []
    for row in bind.execute(ended).mappings():
        start = row["finished_at"]
        while start < row["ended"]:
            end = min(start - start % DAY + DAY, row["ended"])
            pieces.append({**{n: row[n] for n in names[:4]}, "start": start, "end": end})
            start = end
    for at in range(0, len(pieces), 5000):
        bind.execute(pieces_table.insert(), pieces[at : at + 5000])
    saved = 'sum(per_hour * ("end" - start)) / 3600.0'
    op.execute(
        "INSERT INTO savings_weeks (week, cluster, cause, saved)"
        f" SELECT {_floor('start', WEEK)}, cluster, cause, {saved} FROM savings_pieces"
        f" GROUP BY {_floor('start', WEEK)}, cluster, cause"
    )
    op.execute(
        "INSERT INTO savings_days (day, saved)"
        f" SELECT {_floor('start', DAY)}, {saved} FROM savings_pieces"
        f" GROUP BY {_floor('start', DAY)}"
    )


def _places() -> None:
    """Each place the ledger's runs have, once, by number, under the key the service gives
    it (the sha256 of its columns as JSON)."""
    bind = op.get_bind()
    places = sa.table("spend_places", *(sa.column(n) for n in ("key", *COLUMNS.split(", "))))
    rows = []
    for found in bind.execute(sa.text(f"SELECT DISTINCT {COLUMNS} FROM spend_runs")):
        cluster, pool, target, labels, idle, node_hour = found
        text = json.dumps([cluster, pool, target, labels, bool(idle), node_hour])
        key = hashlib.sha256(text.encode()).hexdigest()
        rows.append(
            dict(
                zip(
                    ("key", *COLUMNS.split(", ")),
                    (key, *found[:4], bool(idle), node_hour),
                    strict=True,
                )
            )
        )
    for at in range(0, len(rows), 5000):
        bind.execute(places.insert(), rows[at : at + 5000])


def upgrade() -> None:
    op.create_index("ix_spend_runs_start", "spend_runs", ["start"])
    op.create_table(
        "spend_places",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("pool", sa.String(64), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("idle", sa.Boolean, nullable=False),
        sa.Column("node_hour", sa.Float),
    )
    op.create_index("ix_spend_places_cluster", "spend_places", ["cluster"])
    for name, bucket in (("spend_weeks", "week"), ("spend_place_days", "day")):
        op.create_table(
            name,
            sa.Column(bucket, sa.Float, primary_key=True),
            sa.Column("place", sa.Integer, primary_key=True),
            sa.Column("seconds", sa.Float, nullable=False),
            sa.Column("first", sa.Float, nullable=False),
            sa.Column("last", sa.Float, nullable=False),
        )
    op.create_table(
        "spend_days",
        sa.Column("day", sa.Float, nullable=False),
        sa.Column("idle", sa.Boolean, nullable=False),
        sa.Column("node_hour", sa.Float),
        sa.Column("seconds", sa.Float, nullable=False),
    )
    op.create_index("ix_spend_days_day", "spend_days", ["day"])
    op.create_index("ix_changes_done_ended", "changes_done", ["ended"])
    op.create_table(
        "savings_pieces",
        sa.Column("request_id", sa.String(40), primary_key=True),
        sa.Column("start", sa.Float, primary_key=True),
        sa.Column("end", sa.Float, nullable=False),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("cause", sa.String(32), nullable=False),
        sa.Column("per_hour", sa.Float, nullable=False),
    )
    op.create_index("ix_savings_pieces_start", "savings_pieces", ["start"])
    op.create_table(
        "savings_weeks",
        sa.Column("week", sa.Float, nullable=False),
        sa.Column("cluster", sa.String(300), nullable=False),
        sa.Column("cause", sa.String(32), nullable=False),
        sa.Column("saved", sa.Float, nullable=False),
    )
    op.create_index("ix_savings_weeks_week", "savings_weeks", ["week"])
    op.create_index("ix_savings_weeks_cluster_week", "savings_weeks", ["cluster", "week"])
    op.create_table(
        "savings_days",
        sa.Column("day", sa.Float, nullable=False),
        sa.Column("saved", sa.Float, nullable=False),
    )
    op.create_index("ix_savings_days_day", "savings_days", ["day"])
    _cut()
    _cut_savings()
    _places()
    seconds = 'sum(r.nodes * (r."end" - r.start))'
    joined = " AND ".join(
        [f"r.{name} = p.{name}" for name in COLUMNS.split(", ")[:-1]]
        + ["(r.node_hour = p.node_hour OR (r.node_hour IS NULL AND p.node_hour IS NULL))"]
    )
    for name, bucket, size in (("spend_weeks", "week", WEEK), ("spend_place_days", "day", DAY)):
        op.execute(
            f"INSERT INTO {name} ({bucket}, place, seconds, first, last)"
            f" SELECT {_floor('r.start', size)}, p.id, {seconds}, min(r.start), max(r.start)"
            f" FROM spend_runs AS r JOIN spend_places AS p ON {joined}"
            f" GROUP BY {_floor('r.start', size)}, p.id"
        )
    op.execute(
        "INSERT INTO spend_days (day, idle, node_hour, seconds)"
        f" SELECT {_floor('start', DAY)}, idle, node_hour, {seconds}"
        f" FROM spend_runs AS r GROUP BY {_floor('start', DAY)}, idle, node_hour"
    )


def downgrade() -> None:
    op.drop_table("savings_days")
    op.drop_table("savings_weeks")
    op.drop_table("savings_pieces")
    op.drop_index("ix_changes_done_ended", "changes_done")
    op.drop_table("spend_days")
    op.drop_table("spend_place_days")
    op.drop_table("spend_weeks")
    op.drop_table("spend_places")
    op.drop_index("ix_spend_runs_start", "spend_runs")
