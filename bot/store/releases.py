"""Pipeline releases: each state change one conditional UPDATE, so replicas act once."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.entities import Release, ReleaseChanges, ReleaseState

_FIELDS = [f.name for f in fields(Release)]


def _release(row: sa.Row[Any]) -> Release:
    mapping = row._mapping
    data = {k: mapping[schema.releases.c[k]] for k in _FIELDS}
    data["state"] = ReleaseState(data["state"])
    return Release(**data)


class ReleaseRows:
    engine: AsyncEngine

    async def add_release(self, release: Release) -> None:
        row = {**asdict(release), "state": str(release.state)}
        async with self.engine.begin() as connection:
            await connection.execute(schema.releases.insert().values(**row))

    async def open_releases(self) -> list[Release]:
        table = schema.releases
        open_states = [str(s) for s in ReleaseState if s.open]
        query = sa.select(table).where(table.c.state.in_(open_states)).order_by(table.c.created_at)
        async with self.engine.connect() as connection:
            return [_release(row) for row in await connection.execute(query)]

    async def move_release(
        self,
        release_id: str,
        before: ReleaseState,
        after: ReleaseState,
        **changes: Unpack[ReleaseChanges],
    ) -> bool:
        """``before`` -> ``after`` with ``changes``; False when another replica moved it."""
        table = schema.releases
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.id == release_id, table.c.state == str(before))
                .values(state=str(after), **changes)
            )
        return bool(result.rowcount)

    async def update_release(self, release_id: str, **changes: Unpack[ReleaseChanges]) -> None:
        table = schema.releases
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update().where(table.c.id == release_id).values(**changes)
            )
