"""The spend ledger's rows (``handlers/spend/runs.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from bot.store.locks import LEDGER_LOCK, one_at_a_time
from bot.store.spend_rollup import (
    SETTLE_PAGE,
    Span,
    cover,
    days_summed,
    forget,
    places_summed,
    refresh,
    spans,
)
from bot.store.spend_sql import (
    Period,
    at_once,
    ledger_sums,
    of_cluster,
    priced,
    rows_of,
)
from handlers.spend.runs import DAY, SpendRun, by_day
from handlers.spend.totals import PLACEMENT, Priced, Sums, days_of


def _row(run: SpendRun) -> dict[str, Any]:
    return {
        "cluster": run.cluster,
        "pool": run.pool,
        "start": run.start,
        "end": run.end,
        "nodes": run.nodes,
        "node_hour": run.node_hour,
        "idle": run.idle,
        "target": run.target,
        "labels": json.dumps([list(pair) for pair in run.labels]),
    }


def _run(row: sa.Row[Any], read: dict[str, tuple[tuple[str, str], ...]] | None = None) -> SpendRun:
    """The row's run; ``read``: labels already decoded (a cluster's runs share theirs)."""
    m = row._mapping
    text = m["labels"]
    labels = read.get(text) if read is not None else None
    if labels is None:
        labels = tuple((str(k), str(v)) for k, v in json.loads(text))
        if read is not None:
            read[text] = labels
    return SpendRun(
        m["cluster"],
        m["pool"],
        m["start"],
        m["end"],
        m["nodes"],
        m["node_hour"],
        bool(m["idle"]),
        m["target"],
        labels,
    )


def _sums(
    rows: Sequence[sa.Row[Any]],
    read: dict[str, tuple[tuple[str, str], ...]],
    columns: Collection[str],
    daily: bool,
) -> list[Sums]:
    """The rows of sums of one query; ``columns``: those it was summed by (only those are
    read: the others are empty). Each column is found by its place once, not by name a row:
    a report reads thousands of rows."""
    if not rows:
        return []
    at = {name: n for n, name in enumerate(rows[0]._fields)}
    named = [at.get(name) if name in columns else None for name in ("cluster", "pool", "target")]
    text_at = at["labels"] if "labels" in columns else None
    idle, price, seconds, last, first = (
        at[name] for name in ("idle", "node_hour", "seconds", "last", "first")
    )
    day = at["day"] if daily else None
    found = []
    for row in rows:
        labels: tuple[tuple[str, str], ...] = ()
        text = row[text_at] if text_at is not None else None
        if text:
            labels = read.get(text) or tuple((str(k), str(v)) for k, v in json.loads(text))
            read[text] = labels
        cluster, pool, target = ("" if n is None else row[n] for n in named)
        found.append(
            Sums(
                cluster,
                pool,
                target,
                labels,
                bool(row[idle]),
                row[price],
                float(row[seconds] or 0.0) / 3600.0,
                None if day is None else float(row[day]),
                float(row[last]),
                float(row[first]),
            )
        )
    return found


class SpendRows:
    engine: AsyncEngine
    reads: AsyncEngine  # of one statement each, without a transaction

    async def spend_sums(
        self,
        since: float,
        until: float,
        *,
        cluster: str | None = None,
        columns: Sequence[str] = PLACEMENT,
        daily: bool = False,
        only: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[list[Sums], list[SpendRun]]:
        only = only or {}
        if cluster is None and daily and not columns:
            return await self._fleet_days(since, until), []
        if cluster is None and daily and "cluster" in only:  # a chart's series by cluster
            return await self._named_days(since, until, columns, only), []
        period = Period(since, until, self.engine.dialect.name)
        if cluster is not None:
            queries = ledger_sums(period, columns, daily, only, of_cluster(cluster))
        elif daily or only or tuple(columns) != PLACEMENT:
            queries = ledger_sums(period, columns, daily, only)
        else:  # whole weeks and days from the roll-ups, partial days from the ledger
            rolled, partial = cover(*spans(since, until))
            queries = [q for edge in partial for q in ledger_sums(period, columns, False, {}, edge)]
            if rolled:
                queries.append(places_summed(rolled))
        return await self._summed(columns, daily, queries), []

    async def spend_by_cluster(
        self, since: float, until: float, clusters: Collection[str] | None = None
    ) -> list[Priced]:
        """The fleet's spend over [since, until) by cluster (of ``clusters`` only, full
        names, when named), priced by the database: whole weeks and days from the roll-ups,
        partial days from the ledger."""
        if clusters is not None and not clusters:
            return []
        query, values = priced(since, until, self.engine.dialect.name, clusters is not None)
        if clusters is not None:
            values["clusters"] = sorted(clusters)
        rows = await rows_of(self.reads, query, values)
        return [Priced._make(row) for row in rows]  # floats as the database summed them

    async def _summed(
        self, columns: Sequence[str], daily: bool, queries: Sequence[sa.Select[Any]]
    ) -> list[Sums]:
        read: dict[str, tuple[tuple[str, str], ...]] = {}
        found = await at_once(self.reads, *queries)
        return [sums for rows in found for sums in _sums(rows, read, columns, daily)]

    async def _fleet_days(self, since: float, until: float) -> list[Sums]:
        """The fleet's sums by day: its whole days from the roll-up, its edges' here."""
        span, queries = Span.of(since, until, DAY), []
        edges = span.edges()
        if edges:
            period = Period(since, until, self.engine.dialect.name)
            queries = [q for edge in edges for q in ledger_sums(period, (), True, {}, edge)]
        if span.low < span.high:
            queries.append(days_summed(span))
        return await self._summed((), True, queries)

    async def _named_days(
        self, since: float, until: float, columns: Sequence[str], only: Mapping[str, Sequence[str]]
    ) -> list[Sums]:
        """A chart's series: the named clusters' days from their own rows, and the rest of
        the fleet as the fleet's days less theirs (a row a day, price and idleness)."""
        t = schema.spend_runs
        period = Period(since, until, self.engine.dialect.name)
        named = ledger_sums(period, columns, True, only, t.c.cluster.in_(only["cluster"]))
        fleet, sums = await asyncio.gather(
            self._fleet_days(since, until), self._summed(columns, True, named)
        )
        rest: dict[tuple[float | None, bool, float | None], float] = {}
        for row in fleet:
            key = (row.day, row.idle, row.node_hour)
            rest[key] = rest.get(key, 0.0) + row.node_hours
        for row in sums:
            key = (row.day, row.idle, row.node_hour)
            rest[key] = rest.get(key, 0.0) - row.node_hours
        for (day, idle, price), hours in rest.items():
            if abs(hours) > 1e-9:
                sums.append(Sums("", "", "", (), idle, price, hours, day, since, since))
        return sums

    async def spend_watched(self, since: float, until: float) -> set[float]:
        period = Period(since, until, self.engine.dialect.name)
        one_day = sa.select(period.day).where(period.overlap, period.one_day).distinct()
        across = sa.select(period.start, period.end).where(period.overlap, ~period.one_day)
        async with self.reads.connect() as connection:
            days = {float(day) for (day,) in await connection.execute(one_day)}
            for start, end in await connection.execute(across):
                days.update(days_of(start, end))
        return days

    async def record_spend(self, runs: Sequence[SpendRun]) -> None:
        """Add the runs, cut at UTC midnights; one already there (the same pool and start)
        takes the new end. The roll-ups of what they touch are summed again with them."""
        if not runs:
            return
        table = schema.spend_runs
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=["cluster", "pool", "start"], set_={"end": statement.excluded.end}
        )
        pieces = [piece for run in runs for piece in by_day(run)]
        async with self.engine.begin() as connection:
            await one_at_a_time(connection, LEDGER_LOCK)  # each sees the other's rows
            rows = [_row(piece) for piece in pieces]
            await connection.execute(statement, rows)
            await refresh(connection, rows)

    async def settle_spend(self, since: float) -> int:
        """The ledger's rows that ended from ``since`` on cut at midnight, and the roll-ups
        of their days and weeks summed again: rows written by a replica that did neither (of
        an earlier release, during an upgrade) are mended by the next settling. How many
        rows were cut. ``SETTLE_PAGE`` rows a transaction, in the key's order, so that the
        work between two awaits stays a few milliseconds whatever the fleet."""
        cut, after = 0, None
        while True:
            runs, crossing = await self._settle_page(since, after)
            cut += crossing
            if len(runs) < SETTLE_PAGE:
                return cut
            after = (runs[-1].cluster, runs[-1].pool, runs[-1].start)

    async def _settle_page(
        self, since: float, after: tuple[str, str, float] | None
    ) -> tuple[list[SpendRun], int]:
        t = schema.spend_runs
        key = (t.c.cluster, t.c.pool, t.c.start)
        query = t.select().where(t.c.end >= since).order_by(*key).limit(SETTLE_PAGE)
        if after is not None:
            query = query.where(sa.tuple_(*key) > after)
        async with self.engine.begin() as connection:
            await one_at_a_time(connection, LEDGER_LOCK)
            runs = [_run(row) for row in await connection.execute(query)]
            crossing = [run for run in runs if len(by_day(run)) > 1]
            for run in crossing:
                gone = sa.tuple_(*key) == (run.cluster, run.pool, run.start)
                await connection.execute(t.delete().where(gone))
            pieces = [_row(piece) for run in runs for piece in by_day(run)]
            cut = [_row(piece) for run in crossing for piece in by_day(run)]
            if cut:
                await connection.execute(t.insert(), cut)
            await refresh(connection, pieces)
        return runs, len(crossing)

    async def forget_spend(self, before: float) -> int:
        table = schema.spend_runs
        async with self.engine.begin() as connection:
            await one_at_a_time(connection, LEDGER_LOCK)  # no write sums what goes
            result = await connection.execute(table.delete().where(table.c.end < before))
            await forget(connection, before)
        return int(result.rowcount or 0)

    async def spend_between(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SpendRun]:
        """The runs that overlap [since, until), of one cluster or all."""
        table = schema.spend_runs
        query = sa.select(table).where(table.c.end > since, table.c.start < until)
        if cluster is not None:
            query = query.where(table.c.cluster == cluster)
        async with self.reads.connect() as connection:
            rows = await connection.execute(
                query.order_by(table.c.start, table.c.cluster, table.c.pool)
            )
        return [_run(row) for row in rows]
