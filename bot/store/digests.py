"""The weekly digest's firings: a firing is claimed by inserting its row, so of the replicas
whose cron fired it, one posts."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema


class DigestRows:
    engine: AsyncEngine

    async def claim_digest(self, fired_at: float, owner: str, now: float) -> bool:
        table = schema.digests
        try:
            async with self.engine.begin() as connection:
                await connection.execute(
                    table.insert().values(fired_at=fired_at, claimed_by=owner, claimed_at=now)
                )
        except IntegrityError:
            return False  # another replica claimed it first
        return True

    async def digest_posted(self, fired_at: float, message: str) -> None:
        table = schema.digests
        async with self.engine.begin() as connection:
            await connection.execute(
                sa.update(table).where(table.c.fired_at == fired_at).values(message=message)
            )
