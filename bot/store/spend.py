"""The spend ledger's rows (``handlers/spend/runs.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.spend.ports import SPEND_PART
from handlers.spend.runs import SpendRun
from handlers.spend.savings import ChangeDone, Saving


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


def _runs(
    rows: Sequence[sa.Row[Any]], read: dict[str, tuple[tuple[str, str], ...]]
) -> list[SpendRun]:
    return [_run(row, read) for row in rows]


class SpendRows:
    engine: AsyncEngine

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

    async def spend_parts(
        self, since: float, until: float, size: int = SPEND_PART
    ) -> AsyncIterator[list[SpendRun]]:
        """The runs that overlap [since, until), ``size`` at a time, streamed from the
        database (a server-side cursor on PostgreSQL), the event loop free between parts."""
        table = schema.spend_runs
        query = (
            sa.select(table)
            .where(table.c.end > since, table.c.start < until)
            .order_by(table.c.start, table.c.cluster, table.c.pool)
            .execution_options(yield_per=size)
        )
        read: dict[str, tuple[tuple[str, str], ...]] = {}
        async with self.engine.connect() as connection:
            result = await connection.stream(query)
            async for rows in result.partitions(size):
                # made into runs in a worker thread: the loop only fetches
                yield await asyncio.to_thread(_runs, rows, read)

    async def keep_changes_done(self, done: Sequence[ChangeDone]) -> None:
        if not done:
            return
        table = schema.changes_done
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(table).on_conflict_do_nothing(index_elements=["request_id"])
        async with self.engine.begin() as connection:
            await connection.execute(statement, [asdict(change) for change in done])

    async def changes_done_until(self) -> float | None:
        table = schema.changes_done
        async with self.engine.connect() as connection:
            found = await connection.scalar(sa.select(sa.func.max(table.c.finished_at)))
        return None if found is None else float(found)

    async def savings_between(self, since: float, until: float) -> list[Saving]:
        """Each saving's end is the next kept change of its cluster (``lead`` over the
        cluster's changes, as SQLite and PostgreSQL both compute it)."""
        table = schema.changes_done
        ended = (
            sa.func.lead(table.c.finished_at)
            .over(partition_by=table.c.cluster, order_by=(table.c.finished_at, table.c.request_id))
            .label("ended")
        )
        changes = sa.select(table, ended).where(table.c.finished_at < until).subquery()
        query = (
            sa.select(changes)
            .where(
                changes.c.cause.is_not(None),
                sa.or_(changes.c.ended.is_(None), changes.c.ended > since),
            )
            .order_by(changes.c.finished_at, changes.c.request_id)
        )
        async with self.engine.connect() as connection:
            rows = await connection.execute(query)
            return [
                Saving(
                    cluster=row.cluster,
                    cause=row.cause,
                    start=row.finished_at,
                    end=row.ended,
                    per_hour=row.per_hour,
                    request_id=row.request_id,
                )
                for row in rows
            ]
