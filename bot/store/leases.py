"""Named leases (work one replica at a time does, such as the idle sweep), which a live
replica renews, and the last sweep's report."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema


class LeaseRows:
    engine: AsyncEngine

    async def renew_leases(self, owner: str, now: float, lease: float) -> None:
        """Keep this replica's named leases (its sweep's) in hand; the owed work running
        here is renewed by the engine, item by item. Nothing else: what died here lapses."""
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.leases.update()
                .where(schema.leases.c.owner == owner)
                .values(until=now + lease)
            )

    async def release_leases(self, owner: str) -> None:
        """Give up this replica's leases (at shutdown, or at start after a crash) so that any
        replica, this one included, takes the work up at once."""
        async with self.engine.begin() as connection:
            for table in (schema.requests, schema.owed):
                await connection.execute(
                    table.update().where(table.c.owner == owner).values(owner=None, lease_until=0.0)
                )
            await connection.execute(
                schema.leases.update()
                .where(schema.leases.c.owner == owner)
                .values(owner=None, until=0.0)
            )

    async def take_lease(
        self, name: str, owner: str, now: float, ttl: float, min_gap: float = 0.0
    ) -> bool:
        """Hold the named lease for ``ttl`` s, unless another replica holds it or the work last
        finished less than ``min_gap`` s ago. True for exactly one caller."""
        table = schema.leases
        async with self.engine.begin() as connection:
            exists = (
                await connection.execute(sa.select(table.c.name).where(table.c.name == name))
            ).first()
            if exists is None:
                try:
                    async with connection.begin_nested():
                        await connection.execute(table.insert().values(name=name, until=0.0))
                except sa.exc.IntegrityError:
                    pass  # another replica inserted it first; the update below decides
            result = await connection.execute(
                table.update()
                .where(
                    table.c.name == name,
                    sa.or_(table.c.until < now, table.c.owner == owner),
                    sa.or_(table.c.last_finished.is_(None), table.c.last_finished <= now - min_gap),
                )
                .values(owner=owner, until=now + ttl)
            )
        return bool(result.rowcount == 1)

    async def free_lease(self, name: str, owner: str) -> None:
        """Give a named lease back unfinished (its work was cut off): any replica may take
        it at once, and the last finish stays what it was."""
        table = schema.leases
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.owner == owner)
                .values(owner=None, until=0.0)
            )

    async def finish_lease(self, name: str, owner: str, now: float) -> None:
        table = schema.leases
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.owner == owner)
                .values(owner=None, until=0.0, last_finished=now)
            )

    async def save_report(self, at: float, report: str, *, kind: str = "latest") -> None:
        table = schema.sweep_reports
        text = report
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update().where(table.c.name == kind).values(at=at, report=text)
            )
            if result.rowcount == 0:
                try:
                    async with connection.begin_nested():
                        await connection.execute(
                            table.insert().values(name=kind, at=at, report=text)
                        )
                except sa.exc.IntegrityError:
                    await connection.execute(
                        table.update().where(table.c.name == kind).values(at=at, report=text)
                    )

    async def latest_report(self, *, kind: str = "latest") -> tuple[float, str] | None:
        table = schema.sweep_reports
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(table.c.at, table.c.report).where(table.c.name == kind)
                )
            ).first()
        if row is None:
            return None
        return float(row.at), str(row.report)
