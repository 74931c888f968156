"""Tracked operations: what is known of each change followed to its end (its poll, its
thread message, its outcome). Who polls one, and when, is its owed item's
(``handlers/changes/tracking.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from bot.store.direct import changed, first
from bot.store.owed import insert_owed
from handlers.entities import Final, OperationChanges, OperationKind, TrackedOperation
from handlers.owed.model import Owed

_OPERATION_FIELDS = [f.name for f in fields(TrackedOperation)]


def _operation(row: sa.Row[Any]) -> TrackedOperation:
    mapping = row._mapping
    data = {k: mapping[schema.operations.c[k]] for k in _OPERATION_FIELDS}
    data["kind"] = OperationKind(data["kind"])
    data["final"] = Final(data["final"]) if data["final"] else None
    return TrackedOperation(**data)


# A follow's read and write of its operation, at every poll: built once (their construction
# and cache key cost more than their execution); an update sets the columns named by the
# parameters it is executed with.
_BY_NAME = sa.select(schema.operations).where(schema.operations.c.name == sa.bindparam("named"))
_UPDATE = schema.operations.update().where(schema.operations.c.name == sa.bindparam("named"))


def _not_posted(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.or_(table.c.final.is_(None), table.c.final != str(Final.POSTED))


class OperationRows:
    engine: AsyncEngine

    async def add_operation(self, operation: TrackedOperation, owe: Sequence[Owed] = ()) -> None:
        """An operation to follow, and its following owed (``owe``), in one transaction."""
        async with self.engine.begin() as connection:
            await connection.execute(schema.operations.insert().values(**asdict(operation)))
            await insert_owed(connection, owe)

    async def get_operation(self, name: str) -> TrackedOperation | None:
        row = await first(self.engine, _BY_NAME, {"named": name})
        return _operation(row) if row else None

    async def operation_of(self, request_id: str) -> TrackedOperation | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(schema.operations).where(schema.operations.c.request_id == request_id)
                )
            ).first()
        return _operation(row) if row else None

    async def active_operations(self) -> list[TrackedOperation]:
        """Operations whose final message has not been posted yet, oldest first."""
        table = schema.operations
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table).where(_not_posted(table)).order_by(table.c.started_at)
            )
            return [_operation(r) for r in rows]

    async def count_in_flight(self) -> int:
        table = schema.operations
        async with self.engine.connect() as connection:
            value = await connection.scalar(
                sa.select(sa.func.count()).select_from(table).where(_not_posted(table))
            )
        return int(value or 0)

    async def update_operation(self, name: str, **changes: Unpack[OperationChanges]) -> None:
        await changed(self.engine, _UPDATE, {**changes, "named": name})
