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

    def edges(
        self, start: sa.Column[float] = schema.spend_runs.c.start
    ) -> list[sa.ColumnElement[bool]]:
        """The rows of the edges, by their ``start``, each a range: from a day before
        ``since`` (a row lasts a day at most) to the whole buckets, and from them on."""
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


@dataclass(frozen=True)
class Rollup:
    """A roll-up table ``into`` of rows of ``source`` (cut at UTC midnights, found by their
    ``start``): its first column the bucket, then ``keys``, then ``sums`` of each bucket's
    rows by ``keys``."""

    into: sa.Table
    source: sa.Table
    size: float
    keys: tuple[str, ...]
    sums: tuple[Any, ...]

    async def resum(self, connection: AsyncConnection, touched: dict[float, set[str]]) -> None:
        """Sum again the buckets ``touched``, each of the clusters named (all: none named)."""
        into, source = self.into, self.source
        bucket = into.c[into.columns.keys()[0]]
        columns = [source.c[name] for name in self.keys]
        names = [bucket.name, *self.keys, *into.columns.keys()[1 + len(self.keys) :]]
        for at, clusters in sorted(touched.items()):
            within = sa.and_(source.c.start >= at, source.c.start < at + self.size)
            named = sorted(clusters)
            parts = [named[n : n + CHUNK] for n in range(0, len(named), CHUNK)] or [[]]
            for some in parts:
                gone = into.delete().where(bucket == at)
                where = within
                if some:
                    gone = gone.where(into.c.cluster.in_(some))
                    where = sa.and_(within, source.c.cluster.in_(some))
                await connection.execute(gone)
                query = sa.select(sa.literal(at), *columns, *self.sums).where(where)
                query = query.group_by(*columns).having(sa.func.count() > 0)  # none: no row
                await connection.execute(into.insert().from_select(names, query))

    def touched(self, pieces: Sequence[tuple[str, float]], named: bool) -> dict[float, set[str]]:
        """The buckets of ``pieces`` (a cluster and a start each), with their clusters
        where ``named``."""
        found: dict[float, set[str]] = {}
        for cluster, start in pieces:
            clusters = found.setdefault(_floor(start, self.size), set())
            if named:
                clusters.add(cluster)
        return found


_runs = schema.spend_runs
_node_seconds = sa.func.sum(_runs.c.nodes * (_runs.c.end - _runs.c.start))
LEDGER_WEEKS = Rollup(
    schema.spend_weeks,
    _runs,
    WEEK,
    COLUMNS,
    (_node_seconds, sa.func.min(_runs.c.start), sa.func.max(_runs.c.start)),
)
LEDGER_DAYS = Rollup(schema.spend_days, _runs, DAY, ("idle", "node_hour"), (_node_seconds,))


async def refresh(connection: AsyncConnection, pieces: Sequence[SpendRun]) -> None:
    """Sum again, from the ledger, the weeks of the clusters ``pieces`` touch and their days
    (the pieces are written: the caller's transaction holds both)."""
    starts = [(piece.cluster, piece.start) for piece in pieces]
    await LEDGER_WEEKS.resum(connection, LEDGER_WEEKS.touched(starts, named=True))
    await LEDGER_DAYS.resum(connection, LEDGER_DAYS.touched(starts, named=False))


async def forget(connection: AsyncConnection, before: float) -> None:
    """The roll-ups of weeks and days that end before ``before`` (the ledger's rows of then
    are gone); a week that straddles it is only read whole by periods after it."""
    w, d = schema.spend_weeks, schema.spend_days
    await connection.execute(w.delete().where(w.c.week + WEEK <= before))
    await connection.execute(d.delete().where(d.c.day + DAY <= before))
