"""The savings rolled up as they are kept, as the ledger is (``bot/store/spend_rollup.py``):
each ended saving (a kept change that cut a cost, until its cluster's next change) cut at UTC
midnights into ``savings_pieces``, what each cluster's cause saved a week and the fleet a day.

Whenever rows are kept, the changes whose end moved (the mended ones and the new ones) lose
their pieces and get them again from their ends, and the weeks and days those pieces touch
are summed again, in the same transaction. A saving still open (its cluster's newest change)
has no pieces: it is read from the changes themselves, at most one a cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.store import schema
from bot.store.spend_rollup import CHUNK, WEEK, Rollup, Span
from bot.store.spend_sql import day_of
from handlers.spend.runs import DAY, cut_at_midnight

_pieces = schema.savings_pieces
_saved = sa.func.sum(_pieces.c.per_hour * (_pieces.c.end - _pieces.c.start)) / 3600.0
_weeks = schema.savings_weeks
SAVINGS_WEEKS = Rollup(
    _weeks, _pieces, _pieces.c.start, _pieces.c.cluster, WEEK,
    (_pieces.c.cluster, _pieces.c.cause), (_saved,), _weeks.c.cluster.in_,
)  # fmt: skip
SAVINGS_DAYS = Rollup(
    schema.savings_days, _pieces, _pieces.c.start, _pieces.c.cluster, DAY, (), (_saved,)
)


def _cut(change: Any) -> list[dict[str, Any]]:
    """An ended saving's pieces, cut at UTC midnights (none for one that saved nothing or
    is still open)."""
    ended = change.ended
    if ended is None or ended <= change.finished_at or None in (change.cause, change.per_hour):
        return []
    kept = {name: getattr(change, name) for name in ("request_id", "cluster", "cause", "per_hour")}
    return [
        {**kept, "start": start, "end": end}
        for start, end in cut_at_midnight(change.finished_at, ended)
    ]


async def repiece(connection: AsyncConnection, changes: Sequence[Any]) -> None:
    """Cut ``changes`` (rows of ``changes_done`` whose end may have moved) again, and sum
    again the weeks and days their old and new pieces touch."""
    starts: list[tuple[str, float]] = []
    ids = [change.request_id for change in changes]
    for at in range(0, len(ids), CHUNK):
        gone = _pieces.delete().where(_pieces.c.request_id.in_(ids[at : at + CHUNK]))
        found = await connection.execute(gone.returning(_pieces.c.cluster, _pieces.c.start))
        starts += [(row.cluster, row.start) for row in found]
    pieces = [piece for change in changes for piece in _cut(change)]
    if pieces:
        await connection.execute(_pieces.insert(), pieces)
    starts += [(piece["cluster"], piece["start"]) for piece in pieces]
    await SAVINGS_WEEKS.resum(connection, starts)
    await SAVINGS_DAYS.resum(connection, starts)


def _clipped(since: Any, until: Any) -> sa.ColumnElement[Any]:
    start = sa.case((_pieces.c.start > since, _pieces.c.start), else_=since)
    end = sa.case((_pieces.c.end < until, _pieces.c.end), else_=until)
    return _pieces.c.per_hour * (end - start) / 3600.0


def fleet_totals(span: Span) -> list[sa.Select[Any]]:
    """The ended savings within the period of ``span`` (in weeks) by cluster and cause:
    whole weeks from the roll-up, the edges from the pieces (rows of ``cluster``,
    ``cause``, ``saved``)."""
    since, until, w = span.since, span.until, schema.savings_weeks
    overlap = sa.and_(_pieces.c.end > since, _pieces.c.start < until)
    keys = (_pieces.c.cluster, _pieces.c.cause)
    saved = sa.func.sum(_clipped(since, until)).label("saved")
    queries = [
        sa.select(*keys, saved).where(overlap, edge).group_by(*keys)
        for edge in span.edges(_pieces.c.start)
    ]
    if span.shape[0]:
        queries.append(
            sa.select(w.c.cluster, w.c.cause, sa.func.sum(w.c.saved).label("saved"))
            .where(w.c.week >= span.low, w.c.week < span.high)
            .group_by(w.c.cluster, w.c.cause)
        )
    return queries


def fleet_days(span: Span, dialect: str) -> list[sa.Select[Any]]:
    """The ended savings within the period of ``span`` (in days) by UTC day: whole days
    from the roll-up, the edges from the pieces (a piece lies within its day)."""
    since, until, d = span.since, span.until, schema.savings_days
    day = day_of(_pieces.c.start, dialect)
    overlap = sa.and_(_pieces.c.end > since, _pieces.c.start < until)
    saved = sa.func.sum(_clipped(since, until)).label("saved")
    queries = [
        sa.select(day.label("day"), saved).where(overlap, edge).group_by(day)
        for edge in span.edges(_pieces.c.start)
    ]
    if span.shape[0]:
        queries.append(
            sa.select(d.c.day, d.c.saved).where(d.c.day >= span.low, d.c.day < span.high)
        )
    return queries
