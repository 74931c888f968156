"""The spend ledger rolled up as it is written: each place a run may have (its cluster, pool,
target, labels, price and idleness) once, by number (``spend_places``), each place's
node-seconds a UTC day (``spend_place_days``) and a week (``spend_weeks``), and the fleet's a
day at one price and idleness (``spend_days``).

The ledger keeps its runs cut at UTC midnights (``handlers.spend.runs.by_day``), so a day's or
a week's rows are a range of starts. Whatever rows a write touches, the days and weeks of
their clusters are summed again from the ledger in the same transaction: a run written twice
(its end moved) leaves the same roll-up as once, and no write needs the rows it replaced.

A period then reads its whole weeks, and the whole days at its edges, from the roll-ups,
summed by place number, and only its partial first and last days from the ledger: rows that
start from a day before ``since`` to the first midnight, and from the last one to ``until``;
a row lasts a day at most, so nothing earlier can reach into the period."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.store import schema
from handlers.spend.runs import DAY

WEEK = 7 * DAY
CHUNK = 500  # clusters named in one statement
# rows (of the ledger, or kept changes) settled a transaction: the work between two awaits of
# the hourly settling stays a few milliseconds, and the writers between its pages wait as long
SETTLE_PAGE = 100
COLUMNS = ("cluster", "pool", "target", "labels", "idle", "node_hour")


def _floor(at: float, size: float) -> float:
    return at - at % size


def _ceil(at: float, size: float) -> float:
    return at if at % size == 0 else _floor(at, size) + size


@dataclass(frozen=True)
class Span:
    """A period split into what a roll-up answers, [low, high) in whole buckets of
    ``size``, and its edges, read elsewhere (low == high: the edges alone). Its times are
    floats, or bound values of a statement (``bound``) that serves every period of its
    ``shape``: whether it has whole buckets, an edge before them and one after."""

    since: Any
    until: Any
    low: Any
    high: Any
    shape: tuple[bool, bool, bool]

    @classmethod
    def of(cls, since: float, until: float, size: float) -> Span:
        low, high = _ceil(since, size), _floor(until, size)
        if high <= low:
            low = high = _ceil(since, size)  # no whole bucket: all edge
        return cls(since, until, low, high, (low < high, since < low, high < until))

    def bound(self, name: str) -> tuple[Span, dict[str, float]]:
        """The span with its times as the statement's values ``NAME_since`` and so on, and
        those values: a statement built from it is built once for its shape."""
        parts = ("since", "until", "low", "high")
        values = {f"{name}_{part}": float(getattr(self, part)) for part in parts}
        since, until, low, high = (sa.bindparam(key, type_=sa.Float) for key in values)
        return Span(since, until, low, high, self.shape), values

    def edges(
        self, start: sa.ColumnElement[float] = schema.spend_runs.c.start
    ) -> list[sa.ColumnElement[bool]]:
        """The rows of the edges, by their ``start``, each a range: from a day before
        ``since`` (a row lasts a day at most) to the whole buckets, and from them on; an
        edge of no time (a period that starts or ends on a bucket's bound) has none."""
        whole, before, after = self.shape
        if not whole:
            return [start >= self.since - DAY]
        edges = [sa.and_(start >= self.since - DAY, start < self.low)] if before else []
        return edges + ([start >= self.high] if after else [])


@dataclass(frozen=True)
class Rollup:
    """A roll-up table ``into`` of rows of ``source`` (cut at UTC midnights: ``start`` finds
    a bucket's, ``cluster`` a cluster's): its first column the bucket, then ``keys``, then the
    ``sums`` of each bucket's rows by ``keys``; ``mine``: its rows of some clusters (None:
    it sums the whole fleet, a bucket is summed whole)."""

    into: sa.Table
    source: sa.FromClause
    start: sa.ColumnElement[float]
    cluster: sa.ColumnElement[str]
    size: float
    keys: tuple[sa.ColumnElement[Any], ...]
    sums: tuple[Any, ...]
    mine: Callable[[list[str]], sa.ColumnElement[bool]] | None = None

    async def resum(self, connection: AsyncConnection, starts: Sequence[tuple[str, float]]) -> None:
        """Sum again the buckets of ``starts`` (a cluster and a start each), of their
        clusters."""
        touched: dict[float, set[str]] = {}
        for cluster, start in starts:
            clusters = touched.setdefault(_floor(start, self.size), set())
            if self.mine is not None:
                clusters.add(cluster)
        into = self.into
        bucket = into.c[into.columns.keys()[0]]
        for at, clusters in sorted(touched.items()):
            named = sorted(clusters)
            for some in [named[n : n + CHUNK] for n in range(0, len(named), CHUNK)] or [[]]:
                gone = into.delete().where(bucket == at)
                where = sa.and_(self.start >= at, self.start < at + self.size)
                if some and self.mine is not None:
                    gone = gone.where(self.mine(some))
                    where = sa.and_(where, self.cluster.in_(some))
                await connection.execute(gone)
                query = (
                    sa.select(sa.literal(at), *self.keys, *self.sums)
                    .select_from(self.source)
                    .where(where)
                    .group_by(*self.keys)
                    .having(sa.func.count() > 0)  # a bucket with no rows has none
                )
                await connection.execute(into.insert().from_select(into.columns.keys(), query))


_runs, _places = schema.spend_runs, schema.spend_places
_at_place = sa.and_(  # a run of the ledger at a place
    *(_runs.c[name] == _places.c[name] for name in COLUMNS[:-1]),
    _runs.c.node_hour.is_not_distinct_from(_places.c.node_hour),
)
_placed = _runs.join(_places, _at_place)
_of_place = (
    sa.func.sum(_runs.c.nodes * (_runs.c.end - _runs.c.start)),
    sa.func.min(_runs.c.start),
    sa.func.max(_runs.c.start),
)


def _places_of(into: sa.Table) -> Callable[[list[str]], sa.ColumnElement[bool]]:
    def mine(clusters: list[str]) -> sa.ColumnElement[bool]:
        ids = sa.select(_places.c.id).where(_places.c.cluster.in_(clusters))
        return into.c.place.in_(ids.scalar_subquery())

    return mine


def _place_rollup(into: sa.Table, size: float) -> Rollup:
    return Rollup(
        into, _placed, _runs.c.start, _runs.c.cluster, size, (_places.c.id,), _of_place,
        _places_of(into),
    )  # fmt: skip


PLACE_WEEKS = _place_rollup(schema.spend_weeks, WEEK)
PLACE_DAYS = _place_rollup(schema.spend_place_days, DAY)
FLEET_DAYS = Rollup(
    schema.spend_days, _runs, _runs.c.start, _runs.c.cluster, DAY,
    (_runs.c.idle, _runs.c.node_hour), _of_place[:1],
)  # fmt: skip


def place_key(place: Sequence[Any]) -> str:
    """The number-free key of a place (its ``COLUMNS``), the same however it was read."""
    cluster, pool, target, labels, idle, node_hour = place
    text = json.dumps([cluster, pool, target, labels, bool(idle), node_hour])
    return hashlib.sha256(text.encode()).hexdigest()


async def refresh(connection: AsyncConnection, pieces: Sequence[dict[str, Any]]) -> None:
    """Sum again, from the ledger, the days and weeks of the clusters ``pieces`` (rows of the
    ledger, written: the caller's transaction holds both) touch, their places first kept."""
    places = {tuple(piece[name] for name in COLUMNS) for piece in pieces}
    rows = [{"key": place_key(p), **dict(zip(COLUMNS, p, strict=True))} for p in places]
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    if rows:
        add = dialect.insert(_places).on_conflict_do_nothing(index_elements=["key"])
        await connection.execute(add, rows)
    starts = [(piece["cluster"], piece["start"]) for piece in pieces]
    for rollup in (PLACE_WEEKS, PLACE_DAYS, FLEET_DAYS):
        await rollup.resum(connection, starts)


def spans(since: float, until: float) -> tuple[Span, Span]:
    """[since, until) in whole days and edges, and its whole days in whole weeks."""
    days = Span.of(since, until, DAY)
    return days, Span.of(days.low, days.high, WEEK)


def cover(days: Span, weeks: Span) -> tuple[list[sa.Select[Any]], list[sa.ColumnElement[bool]]]:
    """What the roll-ups answer of a period (``spans``, or their bound forms), as queries of
    rows of a place number and its ``seconds``, ``first`` and ``last``: its whole weeks,
    and the whole days at its edges; and the rows of the ledger its partial days need
    (ranges of starts, none when the period starts and ends at midnight)."""
    if not days.shape[0]:  # no whole day: the ledger alone
        return [], days.edges()
    w, d = schema.spend_weeks, schema.spend_place_days
    whole: list[tuple[Any, Any]] = [(days.low, days.high)]
    parts: list[Any] = []
    if weeks.shape[0]:
        _, before, after = weeks.shape
        whole = [(weeks.since, weeks.low)] if before else []
        whole += [(weeks.high, weeks.until)] if after else []
        parts.append(
            sa.select(w.c.place, w.c.seconds, w.c.first, w.c.last).where(
                w.c.week >= weeks.low, w.c.week < weeks.high
            )
        )
    parts += [
        sa.select(d.c.place, d.c.seconds, d.c.first, d.c.last).where(d.c.day >= a, d.c.day < b)
        for a, b in whole
    ]
    return parts, days.edges()


def places_summed(parts: Sequence[sa.Select[Any]]) -> sa.Select[Any]:
    """The roll-ups' ``parts`` summed by place, with each place's columns."""
    rolled = sa.union_all(*parts).subquery()
    summed = (
        sa.select(
            rolled.c.place,
            sa.func.sum(rolled.c.seconds).label("seconds"),
            sa.func.min(rolled.c.first).label("first"),
            sa.func.max(rolled.c.last).label("last"),
        )
        .group_by(rolled.c.place)
        .subquery()
    )
    columns = [_places.c[name] for name in COLUMNS]
    return sa.select(*columns, summed.c.seconds, summed.c.first, summed.c.last).join_from(
        summed, _places, _places.c.id == summed.c.place
    )


def clusters_priced(
    rolled: Sequence[sa.Select[Any]], edges: Sequence[sa.Select[Any]], clusters: Any = None
) -> Any:
    """Each cluster's spend priced: its cost, the part idle, its node-hours and those
    without a price, and its first run's start; from the roll-ups' ``rolled`` parts (summed
    by place number first, then joined to their places) and the ledger's ``edges`` (sums by
    cluster, idleness and price), one query; of ``clusters`` only (full names, or their
    bound list), if named."""
    p = _places
    if clusters is not None and rolled:
        ids = sa.select(p.c.id).where(p.c.cluster.in_(clusters)).scalar_subquery()
        rolled = [part.where(part.selected_columns[0].in_(ids)) for part in rolled]
    seen: list[Any] = list(edges)
    if rolled:
        r = sa.union_all(*rolled).subquery()
        by_place = (
            sa.select(
                r.c.place, sa.func.sum(r.c.seconds).label("s"), sa.func.min(r.c.first).label("f")
            )
            .group_by(r.c.place)
            .subquery()
        )
        c = by_place.c
        seen.append(
            sa.select(
                p.c.cluster, p.c.idle, p.c.node_hour, c.s.label("seconds"), c.f.label("first")
            ).join_from(by_place, p, p.c.id == c.place)
        )
    u = sa.union_all(*seen).subquery()
    priced = u.c.seconds * u.c.node_hour / 3600.0
    unpriced = sa.case((u.c.node_hour.is_(None), u.c.seconds), else_=0.0)
    return sa.select(
        u.c.cluster,
        sa.func.coalesce(sa.func.sum(priced), 0.0),
        sa.func.coalesce(sa.func.sum(sa.case((u.c.idle, priced), else_=0.0)), 0.0),
        sa.func.sum(u.c.seconds) / 3600.0,
        sa.func.sum(unpriced) / 3600.0,
        sa.func.min(u.c.first),
    ).group_by(u.c.cluster)


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


async def forget(connection: AsyncConnection, before: float) -> None:
    """The roll-ups of weeks and days that end before ``before`` (the ledger's rows of then
    are gone); a week that straddles it is only read whole by periods after it. Places no
    roll-up and no run has left go too (the caller holds the ledger's lock: no write can
    be about to use one)."""
    w, d, p = schema.spend_weeks, schema.spend_days, schema.spend_place_days
    await connection.execute(w.delete().where(w.c.week + WEEK <= before))
    await connection.execute(d.delete().where(d.c.day + DAY <= before))
    await connection.execute(p.delete().where(p.c.day + DAY <= before))
    kept = [sa.select(t.c.place).where(t.c.place == _places.c.id).exists() for t in (w, p)]
    ran = sa.select(_runs.c.start).where(_at_place).exists()
    await connection.execute(_places.delete().where(~kept[0], ~kept[1], ~ran))
