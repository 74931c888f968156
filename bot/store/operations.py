"""Tracked operations: which replica polls each one, and who posts its end (exactly once)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.entities import Final, OperationKind, TrackedOperation

_OPERATION_FIELDS = [f.name for f in fields(TrackedOperation)]


def _operation(row: sa.Row[Any]) -> TrackedOperation:
    data = {k: row._mapping[k] for k in _OPERATION_FIELDS}
    data["kind"] = OperationKind(data["kind"])
    data["final"] = Final(data["final"]) if data["final"] else None
    return TrackedOperation(**data)


def _not_posted(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.or_(table.c.final.is_(None), table.c.final != str(Final.POSTED))


class OperationRows:
    engine: AsyncEngine

    async def add_operation(self, operation: TrackedOperation) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(schema.operations.insert().values(**asdict(operation)))

    async def get_operation(self, name: str) -> TrackedOperation | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(schema.operations).where(schema.operations.c.name == name)
                )
            ).first()
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

    async def claim_due(self, owner: str, now: float, lease: float) -> list[TrackedOperation]:
        """Lease the operations due for a poll to this replica, so replicas never both poll.
        Only due rows are touched (``next_poll_at`` is indexed)."""
        table = schema.operations
        until = now + lease
        due = [table.c.next_poll_at <= now, _not_posted(table)]
        async with self.engine.connect() as connection:
            any_due = (
                await connection.execute(sa.select(table.c.name).where(*due).limit(1))
            ).first()
        if any_due is None:
            return []  # a read only: nothing is written while nothing is due
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update()
                .where(
                    *due,
                    sa.or_(
                        table.c.owner.is_(None), table.c.owner == owner, table.c.lease_until < now
                    ),
                )
                .values(owner=owner, lease_until=until)
            )
            rows = await connection.execute(
                sa.select(table).where(*due, table.c.owner == owner, table.c.lease_until == until)
            )
            return [_operation(r) for r in rows]

    async def update_operation(self, name: str, **changes: Any) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.operations.update().where(schema.operations.c.name == name).values(**changes)
            )

    async def update_operations(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Many operations' changes in one transaction (a tracker tick's polls)."""
        table = schema.operations
        async with self.engine.begin() as connection:
            for name, changes in items:
                await connection.execute(
                    table.update().where(table.c.name == name).values(**changes)
                )

    async def claim_final(self, name: str, **changes: Any) -> bool:
        """Take the right to post an operation's final message; True for exactly one caller."""
        table = schema.operations
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.final.is_(None))
                .values(final=str(Final.CLAIMED), **changes)
            )
        return bool(result.rowcount == 1)
