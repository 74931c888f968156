"""The spend ledger's sums as SQL: a period's clipping of its runs, their sums by any of
its columns, idleness and price (and by UTC day, the runs that span days split by the
database), and the fleet's spend by cluster, priced, whose statement is built once for each
shape of period and run with the period's bound values."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from bot.store.spend_rollup import clusters_priced, cover, spans
from handlers.spend.runs import DAY


def kept_columns(columns: Sequence[str], only: Mapping[str, Sequence[str]]) -> list[Any]:
    """The columns to sum by; a column ``only`` names keeps those values, the others read
    as one empty value (summed together)."""
    t = schema.spend_runs
    return [
        sa.case((t.c[name].in_(only[name]), t.c[name]), else_=sa.literal("")).label(name)
        if name in only
        else t.c[name]
        for name in columns
    ]


def day_of(at: sa.ColumnElement[Any], dialect: str) -> sa.ColumnElement[Any]:
    """The UTC midnight of a time (after 1970: SQLite's CAST truncates, the floor here)."""
    days = sa.func.floor(at / DAY) if dialect == "postgresql" else sa.cast(at / DAY, sa.Integer)
    return days * DAY


class Period:
    """A period's clipping of the ledger's runs, as SQL: each run's start and end within
    [since, until), the UTC day its part starts on, and whether that part ends the same day."""

    def __init__(self, since: Any, until: Any, dialect: str) -> None:
        t = schema.spend_runs
        self.start = sa.case((t.c.start > since, t.c.start), else_=since)
        self.end = sa.case((t.c.end < until, t.c.end), else_=until)
        self.day = day_of(self.start, dialect).label("day")
        self.one_day = self.end <= self.day + DAY
        self.overlap = sa.and_(t.c.end > since, t.c.start < until)
        self.node_seconds = sa.func.sum(t.c.nodes * (self.end - self.start)).label("seconds")


def in_days(
    first: sa.Select[Any], name: str, carried: Sequence[str]
) -> tuple[Any, sa.ColumnElement[Any]]:
    """The rows of ``first`` (its ``carried`` columns, then ``s`` and ``e``, a start and end
    within the period, and ``day``, the UTC midnight of ``s``) made into a row a UTC day each
    covers, by a recursive step a day (the rows made are their days, never rows times days):
    the rows' columns, and each row's seconds within its day."""
    pieces = first.cte(name, recursive=True)
    nxt = (pieces.c.day + DAY).label("day")
    shared = [pieces.c[column] for column in (*carried, "s", "e")]
    pieces = pieces.union_all(sa.select(*shared, nxt).where(nxt < pieces.c.e))
    c = pieces.c
    end = sa.case((c.e < c.day + DAY, c.e), else_=c.day + DAY)
    return c, end - sa.case((c.s > c.day, c.s), else_=c.day)


def split_by_day(
    period: Period, where: list[sa.ColumnElement[bool]], columns: Sequence[str], kept: list[Any]
) -> sa.Select[Any]:
    """The runs that span days, each split into its days by the database (a recursive step
    a day, so the rows made are the runs' days, never runs times days), summed by day and by
    ``columns``, idleness and price: the event loop gets a row a group and a day."""
    t = schema.spend_runs
    first = sa.select(
        *kept,
        t.c.idle,
        t.c.node_hour,
        t.c.nodes,
        period.start.label("s"),
        period.end.label("e"),
        period.day,
    ).where(*where, sa.not_(period.one_day))
    c, within = in_days(first, "pieces", (*columns, "idle", "node_hour", "nodes"))
    keys = [*(c[name] for name in columns), c.idle, c.node_hour, c.day]
    seconds = sa.func.sum(c.nodes * within).label("seconds")
    first_start, last_start = sa.func.min(c.s).label("first"), sa.func.max(c.s).label("last")
    return sa.select(*keys, seconds, first_start, last_start).group_by(*keys)


def of_cluster(
    cluster: str, column: sa.Column[str] = schema.spend_runs.c.cluster
) -> sa.ColumnElement[bool]:
    """A cluster by its full name, or by its id (the last part of the name)."""
    if "/" in cluster:
        return column == cluster
    return column.endswith(f"/{cluster}", autoescape=True)


async def rows_of(
    engine: AsyncEngine, query: sa.Select[Any], values: Mapping[str, Any] | None = None
) -> list[Any]:
    """The query's rows (tuples: read by position); ``values``: its bound values."""
    async with engine.connect() as connection:
        return list((await connection.execute(query, values)).all())


async def at_once(
    engine: AsyncEngine, *queries: sa.Select[Any], values: Mapping[str, Any] | None = None
) -> list[list[Any]]:
    """Each query's rows, the queries on connections of their own at once: the database
    answers a report's few scans side by side, as its one big sum would use its workers."""
    return list(await asyncio.gather(*(rows_of(engine, query, values) for query in queries)))


def ledger_sums(
    period: Period,
    columns: Sequence[str],
    daily: bool,
    only: Mapping[str, Sequence[str]],
    *rows: sa.ColumnElement[bool],
) -> list[sa.Select[Any]]:
    """The sums over ``period`` of the ledger's ``rows`` (all that overlap it when none are
    named) by ``columns``, idleness and price (and day: the rows within a day, and those
    that span days split by the database)."""
    t = schema.spend_runs
    kept = kept_columns(columns, only)
    keys = [*kept, t.c.idle, t.c.node_hour] + ([period.day] if daily else [])
    where = [period.overlap, *rows]
    first, last = sa.func.min(t.c.start).label("first"), sa.func.max(t.c.start).label("last")
    query = sa.select(*keys, period.node_seconds, first, last).where(*where)
    if not daily:
        return [query.group_by(*keys)]
    return [
        query.where(period.one_day).group_by(*keys),
        split_by_day(period, where, columns, kept),
    ]


# the statements of the fleet's spend by cluster, built once for each shape of period
_PRICED: dict[tuple[Any, ...], sa.Select[Any]] = {}


def priced(
    since: float, until: float, dialect: str, named: bool
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The query of the fleet's spend by cluster over [since, until) (of the bound list
    ``clusters`` when ``named``) and its bound values: built once for the period's shape."""
    days, weeks = spans(since, until)
    (days, day_values), (weeks, week_values) = days.bound("day"), weeks.bound("week")
    key = (dialect, days.shape, weeks.shape, named)
    query = _PRICED.get(key)
    if query is None:
        rolled, partial = cover(days, weeks)
        period = Period(days.since, days.until, dialect)
        clusters: Any = sa.bindparam("clusters", expanding=True) if named else None
        edges = []
        for edge in partial:
            if clusters is not None:
                edge = sa.and_(edge, schema.spend_runs.c.cluster.in_(clusters))
            found = ledger_sums(period, ("cluster",), False, {}, edge)[0]
            edges.append(found.with_only_columns(*found.selected_columns[:-1]))  # no "last"
        query = _PRICED[key] = clusters_priced(rolled, edges, clusters)
    return query, {**day_values, **week_values}
