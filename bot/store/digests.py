"""Where the weekly digest learns since when clusterbot has watched spend: a firing before
that has no week to tell of, and is not owed."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema


class DigestRows:
    engine: AsyncEngine
    reads: AsyncEngine  # of one statement each, without a transaction

    async def first_spend(self) -> float | None:
        table = schema.spend_runs
        async with self.reads.connect() as connection:
            first = (await connection.execute(sa.select(sa.func.min(table.c.start)))).scalar()
        return None if first is None else float(first)
