"""Kept specs: written before a delete is sent, read to restore what a delete removed."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.entities import KeptSpec, RequestState


def _kept(row: sa.Row[Any]) -> KeptSpec:
    return KeptSpec(
        cluster=row.cluster,
        spec=json.loads(row.spec),
        kept_at=row.kept_at,
        request_id=row.request_id,
    )


class KeptRows:
    engine: AsyncEngine

    async def keep_spec(self, kept: KeptSpec) -> None:
        """Keep (or replace) a cluster's spec: an upsert, so a delete sent again after a crash
        keeps it once."""
        table = schema.kept_specs
        values = {
            "spec": json.dumps(kept.spec, sort_keys=True),
            "kept_at": kept.kept_at,
            "request_id": kept.request_id,
        }
        async with self.engine.begin() as connection:
            updated = await connection.execute(
                table.update().where(table.c.cluster == kept.cluster).values(**values)
            )
            if updated.rowcount == 0:
                await connection.execute(table.insert().values(cluster=kept.cluster, **values))

    async def deleted_specs(self) -> list[KeptSpec]:
        """The specs of clusters whose delete finished, newest first (a spec kept for a
        delete that failed or is still under way is not listed)."""
        kept, requests = schema.kept_specs, schema.requests
        query = (
            sa.select(kept)
            .join(requests, requests.c.id == kept.c.request_id)
            .where(requests.c.state == str(RequestState.SUCCEEDED))
            .order_by(kept.c.kept_at.desc())
        )
        async with self.engine.connect() as connection:
            return [_kept(row) for row in await connection.execute(query)]
