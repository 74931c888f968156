"""The slurmrestd data parser each cluster serves, learned once and kept (a ``VersionBook``)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema


class SlurmVersionRows:
    engine: AsyncEngine

    async def slurm_versions(self) -> dict[str, str]:
        table = schema.slurm_versions
        async with self.engine.connect() as connection:
            rows = await connection.execute(sa.select(table.c.cluster, table.c.version))
            return {row.cluster: row.version for row in rows}

    async def keep_slurm_version(self, cluster: str, version: str, at: float) -> None:
        """An upsert: two replicas learning the same cluster at once both succeed."""
        table = schema.slurm_versions
        async with self.engine.begin() as connection:
            updated = await connection.execute(
                table.update()
                .where(table.c.cluster == cluster)
                .values(version=version, learned_at=at)
            )
            if updated.rowcount:
                return
        try:
            async with self.engine.begin() as connection:
                await connection.execute(
                    table.insert().values(cluster=cluster, version=version, learned_at=at)
                )
        except sa.exc.IntegrityError:  # another replica inserted it first: it learned the same
            async with self.engine.begin() as connection:
                await connection.execute(
                    table.update()
                    .where(table.c.cluster == cluster)
                    .values(version=version, learned_at=at)
                )
