"""The spend ledger's rows (``handlers/spend/runs.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.spend.runs import SpendRun


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


def _run(row: sa.Row[Any]) -> SpendRun:
    m = row._mapping
    labels = tuple((str(k), str(v)) for k, v in json.loads(m["labels"]))
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
            rows = await connection.execute(query.order_by(table.c.start))
        return [_run(row) for row in rows]
