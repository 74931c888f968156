"""The spend ledger rolled up as it is written: each pool's node-seconds a week
(``spend_weeks``) and the fleet's a UTC day (``spend_days``), each at one price and idleness.

The ledger keeps its runs cut at UTC midnights (``handlers.spend.runs.by_day``), so a week's
or a day's rows are a range of starts. Whatever rows a write touches, the weeks of their pools
and their days are summed again from the ledger in the same transaction: a run written twice
(its end moved) leaves the same roll-up as once, and no write needs the rows it replaced.

A period then reads its whole weeks (or days) here and only its edges from the ledger: rows
starting in the day before ``since`` up to the first whole week, and from the last one to
``until``; a row lasts a day at most, so nothing earlier can reach into the period."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.store import schema
from handlers.spend.runs import DAY, SpendRun

WEEK = 7 * DAY
CHUNK = 500  # clusters named in one statement
COLUMNS = ("cluster", "pool", "target", "labels", "idle", "node_hour")


def _floor(at: float, size: float) -> float:
    return at - at % size


def _ceil(at: float, size: float) -> float:
    return at if at % size == 0 else _floor(at, size) + size


@dataclass(frozen=True)
class Span:
    """A period split into what the roll-up answers, [low, high) in whole buckets of
    ``size``, and its edges, read from the ledger (low == high: the ledger alone)."""

    since: float
    until: float
    low: float
    high: float

    @classmethod
    def of(cls, since: float, until: float, size: float) -> Span:
        low, high = _ceil(since, size), _floor(until, size)
        if high <= low:
            low = high = _ceil(since, size)  # no whole bucket: all edge
        return cls(since, until, low, high)

    def edges(self) -> list[sa.ColumnElement[bool]]:
        """The ledger's rows of the edges, each a range of starts: from a day before
        ``since`` (a row lasts a day at most) to the whole buckets, and from them on."""
        start = schema.spend_runs.c.start
        if self.low == self.high:
            return [start >= self.since - DAY]
        return [
            sa.and_(start >= self.since - DAY, start < self.low),
            start >= self.high,
        ]


def weeks_summed(span: Span, kept: Sequence[Any], daily: bool = False) -> sa.Select[Any]:
    """The whole weeks' sums by ``kept`` (columns of ``spend_weeks``), idleness and price."""
    w = schema.spend_weeks
    keys = [*kept, w.c.idle, w.c.node_hour]
    seconds = sa.func.sum(w.c.seconds).label("seconds")
    first, last = sa.func.min(w.c.first).label("first"), sa.func.max(w.c.last).label("last")
    return (
        sa.select(*keys, seconds, first, last)
        .where(w.c.week >= span.low, w.c.week < span.high)
        .group_by(*keys)
    )


def days_summed(span: Span) -> sa.Select[Any]:
    """The fleet's whole days' sums by day, idleness and price."""
    d = schema.spend_days
    return sa.select(
        d.c.idle,
        d.c.node_hour,
        d.c.day,
        d.c.seconds,
        d.c.day.label("first"),
        d.c.day.label("last"),
    ).where(d.c.day >= span.low, d.c.day < span.high)


def _sums_of(
    bucket: float, keys: Sequence[str], where: sa.ColumnElement[bool], extremes: bool
) -> sa.Select[Any]:
    """The ledger's rows ``where`` summed by ``keys`` as the roll-up row of ``bucket``."""
    t = schema.spend_runs
    columns = [t.c[name] for name in keys]
    sums: list[Any] = [sa.func.sum(t.c.nodes * (t.c.end - t.c.start))]
    if extremes:
        sums += [sa.func.min(t.c.start), sa.func.max(t.c.start)]
    return sa.select(sa.literal(bucket), *columns, *sums).where(where).group_by(*columns)


async def refresh(connection: AsyncConnection, pieces: Sequence[SpendRun]) -> None:
    """Sum again, from the ledger, the weeks of the clusters ``pieces`` touch and their days
    (the pieces are written: the caller's transaction holds both)."""
    t, w, d = schema.spend_runs, schema.spend_weeks, schema.spend_days
    weeks: dict[float, set[str]] = {}
    days: set[float] = set()
    for piece in pieces:
        weeks.setdefault(_floor(piece.start, WEEK), set()).add(piece.cluster)
        days.add(_floor(piece.start, DAY))
    names = ["week", *COLUMNS, "seconds", "first", "last"]
    for week, touched in sorted(weeks.items()):
        clusters = sorted(touched)
        for at in range(0, len(clusters), CHUNK):
            some = clusters[at : at + CHUNK]
            await connection.execute(w.delete().where(w.c.week == week, w.c.cluster.in_(some)))
            where = sa.and_(t.c.start >= week, t.c.start < week + WEEK, t.c.cluster.in_(some))
            query = _sums_of(week, COLUMNS, where, extremes=True)
            await connection.execute(w.insert().from_select(names, query))
    for day in sorted(days):
        await connection.execute(d.delete().where(d.c.day == day))
        where = sa.and_(t.c.start >= day, t.c.start < day + DAY)
        query = _sums_of(day, ("idle", "node_hour"), where, extremes=False)
        await connection.execute(
            d.insert().from_select(["day", "idle", "node_hour", "seconds"], query)
        )


async def forget(connection: AsyncConnection, before: float) -> None:
    """The roll-ups of weeks and days that end before ``before`` (the ledger's rows of then
    are gone); a week that straddles it is only read whole by periods after it."""
    w, d = schema.spend_weeks, schema.spend_days
    await connection.execute(w.delete().where(w.c.week + WEEK <= before))
    await connection.execute(d.delete().where(d.c.day + DAY <= before))
