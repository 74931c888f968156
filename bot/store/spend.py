"""The spend ledger's rows (``handlers/spend/runs.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.spend.runs import SpendRun
from handlers.spend.savings import ChangeDone, SavedSum
from handlers.spend.totals import DAY, PLACEMENT, Sums, days_of

LOCK = 0x0C1B_0002  # pg_advisory_xact_lock key: one replica keeps changes done at a time


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
    row: Any, read: dict[str, tuple[tuple[str, str], ...]], columns: Collection[str], daily: bool
) -> Sums:
    """A row of sums; ``columns``: those it was summed by (only those are read: a row's
    missing key is a slow miss, and a chart's query answers a row a group and a day)."""
    text = row["labels"] if "labels" in columns else None
    labels: tuple[tuple[str, str], ...] = ()
    if text:
        labels = read.get(text) or tuple((str(k), str(v)) for k, v in json.loads(text))
        read[text] = labels
    return Sums(
        cluster=row["cluster"] if "cluster" in columns else "",
        pool=row["pool"] if "pool" in columns else "",
        target=row["target"] if "target" in columns else "",
        labels=labels,
        idle=bool(row["idle"]),
        node_hour=row["node_hour"],
        node_hours=float(row["seconds"] or 0.0) / 3600.0,
        day=float(row["day"]) if daily else None,
        last=float(row["last"]),
        first=float(row["first"]),
    )


def _kept(columns: Sequence[str], only: Mapping[str, Sequence[str]]) -> list[Any]:
    """The columns to sum by; a column ``only`` names keeps those values, the others read
    as one empty value (summed together)."""
    t = schema.spend_runs
    return [
        sa.case((t.c[name].in_(only[name]), t.c[name]), else_=sa.literal("")).label(name)
        if name in only
        else t.c[name]
        for name in columns
    ]


def _day_of(at: sa.ColumnElement[Any], dialect: str) -> sa.ColumnElement[Any]:
    """The UTC midnight of a time (after 1970: SQLite's CAST truncates, the floor here)."""
    days = sa.func.floor(at / DAY) if dialect == "postgresql" else sa.cast(at / DAY, sa.Integer)
    return days * DAY


class Period:
    """A period's clipping of the ledger's runs, as SQL: each run's start and end within
    [since, until), the UTC day its part starts on, and whether that part ends the same day."""

    def __init__(self, since: float, until: float, dialect: str) -> None:
        t = schema.spend_runs
        self.start = sa.case((t.c.start > since, t.c.start), else_=since)
        self.end = sa.case((t.c.end < until, t.c.end), else_=until)
        self.day = _day_of(self.start, dialect).label("day")
        self.one_day = self.end <= self.day + DAY
        self.overlap = sa.and_(t.c.end > since, t.c.start < until)
        self.node_seconds = sa.func.sum(t.c.nodes * (self.end - self.start)).label("seconds")


def _in_days(
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


def _split_by_day(
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
    c, within = _in_days(first, "pieces", (*columns, "idle", "node_hour", "nodes"))
    keys = [*(c[name] for name in columns), c.idle, c.node_hour, c.day]
    seconds = sa.func.sum(c.nodes * within).label("seconds")
    first_start, last_start = sa.func.min(c.s).label("first"), sa.func.max(c.s).label("last")
    return sa.select(*keys, seconds, first_start, last_start).group_by(*keys)


def _of_cluster(
    cluster: str, column: sa.Column[str] = schema.spend_runs.c.cluster
) -> sa.ColumnElement[bool]:
    """A cluster by its full name, or by its id (the last part of the name)."""
    if "/" in cluster:
        return column == cluster
    return column.endswith(f"/{cluster}", autoescape=True)


def _mend_ended(clusters: Collection[str], earliest: float) -> sa.Update:
    """Each kept change of ``clusters`` whose saving may end at a change kept from
    ``earliest`` on takes the time of its cluster's next change (in time, then id)."""
    table = schema.changes_done
    n = table.alias("n")
    after = sa.and_(  # a range of the (cluster, time) index, ties told apart by id
        n.c.finished_at >= table.c.finished_at,
        sa.or_(n.c.finished_at > table.c.finished_at, n.c.request_id > table.c.request_id),
    )
    following = sa.select(sa.func.min(n.c.finished_at)).where(n.c.cluster == table.c.cluster, after)
    return (
        table.update()
        .where(
            table.c.cluster.in_(clusters),
            sa.or_(table.c.ended.is_(None), table.c.ended >= earliest),
        )
        .values(ended=following.scalar_subquery())
    )


def _savings_sums(
    since: float, until: float, cluster: str | None, dialect: str
) -> tuple[sa.Select[Any], sa.Select[Any]]:
    """The savings within [since, until) summed by cluster and cause, and by UTC day: each
    succeeded change that cut a cluster's cost saves until the cluster's next kept change
    (``ended``, kept with the rows), clipped to the period; the days split as the runs' are."""
    table = schema.changes_done
    changes = sa.select(
        table.c.cluster, table.c.cause, table.c.per_hour, table.c.finished_at, table.c.ended
    ).where(
        table.c.finished_at < until,
        sa.or_(table.c.ended.is_(None), table.c.ended > since),
        table.c.cause.is_not(None),
        table.c.per_hour.is_not(None),
    )
    if cluster is not None:
        changes = changes.where(_of_cluster(cluster, table.c.cluster))
    c = changes.subquery().c
    start = sa.case((c.finished_at > since, c.finished_at), else_=since)
    stop = sa.func.coalesce(c.ended, until)
    end = sa.case((stop < until, stop), else_=until)
    saved = (sa.func.sum(c.per_hour * (end - start)) / 3600.0).label("saved")
    totals = sa.select(c.cluster, c.cause, saved).where(end > start).group_by(c.cluster, c.cause)
    first = sa.select(
        c.per_hour, start.label("s"), end.label("e"), _day_of(start, dialect).label("day")
    ).where(end > start)
    p, within = _in_days(first, "saved_pieces", ("per_hour",))
    daily = (
        sa.select(p.day, (sa.func.sum(p.per_hour * within) / 3600.0).label("saved"))
        .group_by(p.day)
        .order_by(p.day)
    )
    return totals, daily


async def _rows(engine: AsyncEngine, query: sa.Select[Any]) -> list[sa.Row[Any]]:
    async with engine.connect() as connection:
        return list((await connection.execute(query)).all())


async def _at_once(engine: AsyncEngine, *queries: sa.Select[Any]) -> list[list[sa.Row[Any]]]:
    """Each query's rows, the queries on connections of their own at once: the database
    answers a report's few scans side by side, as its one big sum would use its workers."""
    return list(await asyncio.gather(*(_rows(engine, query) for query in queries)))


class SpendRows:
    engine: AsyncEngine

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
        t = schema.spend_runs
        period = Period(since, until, self.engine.dialect.name)
        kept = _kept(columns, only or {})
        keys = [*kept, t.c.idle, t.c.node_hour] + ([period.day] if daily else [])
        where = [period.overlap] + ([] if cluster is None else [_of_cluster(cluster)])
        first, last = sa.func.min(t.c.start).label("first"), sa.func.max(t.c.start).label("last")
        query = sa.select(*keys, period.node_seconds, first, last).where(*where)
        if daily:
            query = query.where(period.one_day)
        queries = [query.group_by(*keys)]
        if daily:
            queries.append(_split_by_day(period, where, columns, kept))
        read: dict[str, tuple[tuple[str, str], ...]] = {}
        found = await _at_once(self.engine, *queries)
        return [_sums(row._mapping, read, columns, daily) for rows in found for row in rows], []

    async def spend_watched(self, since: float, until: float) -> set[float]:
        period = Period(since, until, self.engine.dialect.name)
        one_day = sa.select(period.day).where(period.overlap, period.one_day).distinct()
        across = sa.select(period.start, period.end).where(period.overlap, ~period.one_day)
        async with self.engine.connect() as connection:
            days = {float(day) for (day,) in await connection.execute(one_day)}
            for start, end in await connection.execute(across):
                days.update(days_of(start, end))
        return days

    async def record_spend(self, runs: Sequence[SpendRun]) -> None:
        """Add the runs; one already there (the same pool and start) takes the new end."""
        if not runs:
            return
        table = schema.spend_runs
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=["cluster", "pool", "start"], set_={"end": statement.excluded.end}
        )
        async with self.engine.begin() as connection:
            await connection.execute(statement, [_row(run) for run in runs])

    async def forget_spend(self, before: float) -> int:
        table = schema.spend_runs
        async with self.engine.begin() as connection:
            result = await connection.execute(table.delete().where(table.c.end < before))
        return int(result.rowcount or 0)

    async def spend_between(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SpendRun]:
        """The runs that overlap [since, until), of one cluster or all."""
        table = schema.spend_runs
        query = sa.select(table).where(table.c.end > since, table.c.start < until)
        if cluster is not None:
            query = query.where(table.c.cluster == cluster)
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                query.order_by(table.c.start, table.c.cluster, table.c.pool)
            )
        return [_run(row) for row in rows]

    async def keep_changes_done(self, done: Sequence[ChangeDone]) -> None:
        if not done:
            return
        table = schema.changes_done
        postgres = self.engine.dialect.name == "postgresql"
        dialect = postgresql if postgres else sqlite
        statement = (
            dialect.insert(table)
            .on_conflict_do_nothing(index_elements=["request_id"])
            .returning(table.c.cluster, table.c.finished_at)
        )
        async with self.engine.begin() as connection:
            if postgres:  # one replica keeps rows at a time: each sees the other's to mend
                await connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK}
                )
            added = (await connection.execute(statement, [asdict(c) for c in done])).all()
            if added:  # only the rows added move an end: those kept before changed nothing
                clusters = {row.cluster for row in added}
                await connection.execute(
                    _mend_ended(clusters, min(row.finished_at for row in added))
                )

    async def changes_done_until(self) -> float | None:
        table = schema.changes_done
        async with self.engine.connect() as connection:
            found = await connection.scalar(sa.select(sa.func.max(table.c.finished_at)))
        return None if found is None else float(found)

    async def savings_sums(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SavedSum]:
        totals, daily = _savings_sums(since, until, cluster, self.engine.dialect.name)
        by_cluster, by_day = await _at_once(self.engine, totals, daily)
        found = [SavedSum(row.cluster, row.cause, float(row.saved)) for row in by_cluster]
        return found + [SavedSum("", "", float(row.saved), float(row.day)) for row in by_day]
