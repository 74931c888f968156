"""Tracked operations: which replica polls each one, and who posts its end (exactly once)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.entities import Final, OperationChanges, OperationKind, TrackedOperation

_OPERATION_FIELDS = [f.name for f in fields(TrackedOperation)]


def _operation(row: sa.Row[Any]) -> TrackedOperation:
    mapping = row._mapping
    data = {k: mapping[schema.operations.c[k]] for k in _OPERATION_FIELDS}
    data["kind"] = OperationKind(data["kind"])
    data["final"] = Final(data["final"]) if data["final"] else None
    return TrackedOperation(**data)


def _not_posted(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.or_(table.c.final.is_(None), table.c.final != str(Final.POSTED))


def _claim_statement() -> sa.UpdateBase:
    """UPDATE … SET owner, lease WHERE name IN (the due and free rows, longest due first,
    LIMIT n) RETURNING *. The outer WHERE repeats the conditions: of two replicas that chose
    the same rows, PostgreSQL re-checks each row once the other's lock is gone, so one takes
    it; SQLite runs one writer at a time."""
    table = schema.operations
    now = sa.bindparam("now", type_=sa.Float)
    owner = sa.bindparam("owner", type_=sa.String)
    due_and_free = (
        table.c.next_poll_at <= now,
        _not_posted(table),
        sa.or_(table.c.owner.is_(None), table.c.owner == owner, table.c.lease_until < now),
    )
    chosen = (
        sa.select(table.c.name)
        .where(*due_and_free)
        .order_by(table.c.next_poll_at)
        .limit(sa.bindparam("limit", type_=sa.Integer))
        .scalar_subquery()
    )
    return (
        table.update()
        .where(table.c.name.in_(chosen), *due_and_free)
        .values(owner=owner, lease_until=sa.bindparam("until", type_=sa.Float))
        .returning(*table.c)
    )


_CLAIM = _claim_statement()


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

    async def claim_due(
        self, owner: str, now: float, lease: float, limit: int
    ) -> list[TrackedOperation]:
        """Lease to this replica at most ``limit`` of the operations due for a poll, longest
        due first, so replicas never both poll. One statement: only due rows are read
        (``next_poll_at`` is indexed), and nothing is written while nothing is due."""
        async with self.engine.begin() as connection:
            rows = await connection.execute(
                _CLAIM, {"owner": owner, "now": now, "until": now + lease, "limit": limit}
            )
            claimed = [_operation(r) for r in rows]
        return sorted(claimed, key=lambda o: o.next_poll_at)

    async def update_operation(self, name: str, **changes: Unpack[OperationChanges]) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.operations.update().where(schema.operations.c.name == name).values(**changes)
            )

    async def update_operations(self, items: Sequence[tuple[str, OperationChanges]]) -> None:
        """Many operations' changes in one transaction (a tracker tick's polls): one
        statement per set of changed columns, run for all its rows at once (executemany)."""
        table = schema.operations
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for name, changes in items:
            columns = tuple(sorted(changes))
            groups.setdefault(columns, []).append(
                {"match_name": name, **{f"new_{k}": v for k, v in changes.items()}}
            )
        async with self.engine.begin() as connection:
            for columns, rows in groups.items():
                statement = (
                    table.update()
                    .where(table.c.name == sa.bindparam("match_name"))
                    .values({c: sa.bindparam(f"new_{c}") for c in columns})
                )
                await connection.execute(statement, rows)

    async def claim_final(self, name: str, **changes: Unpack[OperationChanges]) -> bool:
        """Take the right to post an operation's final message; True for exactly one caller."""
        table = schema.operations
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.final.is_(None))
                .values(final=str(Final.CLAIMED), **changes)
            )
        return bool(result.rowcount == 1)
