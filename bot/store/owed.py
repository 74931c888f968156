"""The items the bot owes (``handlers/owed``): recorded once under their key, each hold,
renewal and end one conditional UPDATE, so that of any number of replicas one works an item
at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.store import schema
from bot.store.direct import changed, rows_of
from handlers.owed.model import Owed, OwedChanges, OwedState

_JSON = ("subject", "result")


# An update of an item its owner holds, built once for every attempt's record and settling:
# it sets the columns named by the parameters it is executed with, and its compiled form is
# cached by that set of names. Built anew for each call, its construction and cache key were
# a third of the event loop's time in each settling.
_HELD = schema.owed.update().where(
    schema.owed.c.key == sa.bindparam("held"),
    schema.owed.c.owner == sa.bindparam("holder"),
    schema.owed.c.state == str(OwedState.DUE),
)


def _free(now: Any) -> list[sa.ColumnElement[bool]]:
    """An item no one holds, due at ``now`` and not maybe in flight."""
    table = schema.owed
    return [
        table.c.state == str(OwedState.DUE),
        table.c.due_at <= now,
        table.c.lease_until < now,
        table.c.in_flight_until <= now,
    ]


# The claim of the first free items of some kinds, built once a dialect (each replica's
# engine claims every tick: building it was most of the event loop's time in a claim).
_CLAIMS: dict[str, Any] = {}


def _claim(dialect: str) -> Any:
    statement = _CLAIMS.get(dialect)
    if statement is None:
        table = schema.owed
        free = _free(sa.bindparam("now", type_=sa.Float))
        wanted = (
            sa.select(table.c.key)
            .where(*free, table.c.kind.in_(sa.bindparam("kinds", expanding=True)))
            .order_by(table.c.due_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        if dialect == "postgresql":
            wanted = wanted.with_for_update(skip_locked=True)
        statement = _CLAIMS[dialect] = (
            table.update()
            .where(table.c.key.in_(wanted.scalar_subquery()), *free)
            .values(
                owner=sa.bindparam("claimer"),
                lease_until=sa.bindparam("until"),
                attempts=table.c.attempts + 1,
            )
            .returning(*table.c)
        )
    return statement


def _row(item: Owed) -> dict[str, Any]:
    return {
        "key": item.key,
        "kind": item.kind,
        "subject": json.dumps(item.subject, sort_keys=True),
        "state": str(item.state),
        "due_at": item.due_at,
        "created_at": item.created_at,
        "owner": item.owner,
        "lease_until": item.lease_until,
        "attempts": item.attempts,
        "in_flight_until": item.in_flight_until,
        "note": item.note,
        "done_at": item.done_at,
        "result": json.dumps(item.result, sort_keys=True),
    }


def _item(row: sa.Row[Any]) -> Owed:
    data = dict(row._mapping)
    for name in _JSON:
        data[name] = json.loads(data[name] or "{}")
    data["state"] = OwedState(data["state"])
    return Owed(**data)


async def insert_owed(connection: AsyncConnection, items: Sequence[Owed]) -> set[str]:
    """Insert the items whose keys are not taken, in the caller's transaction (so that an
    item is owed with the state change that makes it so); an item owed ``again`` whose key is
    taken by one due or done is made due (at the sooner time). Returns the keys inserted or
    made due."""
    table = schema.owed
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    inserted: set[str] = set()
    once = [item for item in items if not item.again]
    if once:
        statement = (
            dialect.insert(table)
            .values([_row(item) for item in once])
            .on_conflict_do_nothing(index_elements=[table.c.key])
            .returning(table.c.key)
        )
        inserted |= {row.key for row in await connection.execute(statement)}
    for item in (item for item in items if item.again):  # each its own row: few, and alike
        insert = dialect.insert(table).values(_row(item))
        sooner = sa.case(
            (table.c.state == str(OwedState.DONE), insert.excluded.due_at),
            (table.c.due_at < insert.excluded.due_at, table.c.due_at),
            else_=insert.excluded.due_at,
        )
        statement = insert.on_conflict_do_update(
            index_elements=[table.c.key],
            set_={"state": str(OwedState.DUE), "due_at": sooner, "done_at": None},
            where=table.c.state.in_([str(OwedState.DUE), str(OwedState.DONE)]),
        ).returning(table.c.key)
        inserted |= {row.key for row in await connection.execute(statement)}
    return inserted


class OwedRows:
    engine: AsyncEngine

    async def owe(self, items: Sequence[Owed]) -> set[str]:
        async with self.engine.begin() as connection:
            return await insert_owed(connection, items)

    async def claim_owed(
        self, owner: str, now: float, lease: float, limit: int, kinds: Sequence[str]
    ) -> list[Owed]:
        statement = _claim(self.engine.dialect.name)
        values = {
            "now": now,
            "kinds": list(kinds),
            "limit": limit,
            "claimer": owner,
            "until": now + lease,
        }
        rows = await rows_of(self.engine, statement, values)
        return sorted((_item(r) for r in rows), key=lambda i: i.due_at)

    async def claim_owed_item(self, key: str, owner: str, now: float, lease: float) -> Owed | None:
        table = schema.owed
        statement = (
            table.update()
            .where(table.c.key == key, *_free(now))
            .values(owner=owner, lease_until=now + lease, attempts=table.c.attempts + 1)
            .returning(*table.c)
        )
        async with self.engine.begin() as connection:
            row = (await connection.execute(statement)).first()
        return _item(row) if row is not None else None

    async def renew_owed(self, owner: str, keys: Sequence[str], until: float) -> set[str]:
        table = schema.owed
        held: set[str] = set()
        async with self.engine.begin() as connection:
            for start in range(0, len(keys), 500):
                rows = await connection.execute(
                    table.update()
                    .where(
                        table.c.key.in_(list(keys[start : start + 500])),
                        table.c.owner == owner,
                        table.c.state == str(OwedState.DUE),
                    )
                    .values(lease_until=until)
                    .returning(table.c.key)
                )
                held.update(row.key for row in rows)
        return held

    async def mark_owed(self, key: str, owner: str, **changes: Unpack[OwedChanges]) -> bool:
        values: dict[str, Any] = dict(changes)
        for name in _JSON:
            if name in values:
                values[name] = json.dumps(values[name], sort_keys=True)
        return await self._held_update(key, owner, values)

    async def settle_owed(
        self,
        key: str,
        owner: str,
        *,
        state: OwedState = OwedState.DUE,
        due_at: float | None = None,
        done_at: float | None = None,
        note: str | None = None,
    ) -> bool:
        values: dict[str, Any] = {"state": str(state), "owner": None, "lease_until": 0.0}
        values["note"] = note
        if due_at is not None:
            values["due_at"] = due_at
        if done_at is not None:
            values["done_at"] = done_at
        return await self._held_update(key, owner, values)

    async def _held_update(self, key: str, owner: str, values: dict[str, Any]) -> bool:
        """Change an item only while ``owner`` holds it and it is due."""
        return await changed(self.engine, _HELD, {**values, "held": key, "holder": owner}) == 1

    async def release_owed(self, owner: str, keys: Sequence[str] | None = None) -> None:
        table = schema.owed
        conditions = [table.c.owner == owner]
        if keys is not None:
            conditions.append(table.c.key.in_(list(keys)))
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update().where(*conditions).values(owner=None, lease_until=0.0)
            )

    async def get_owed(self, key: str) -> Owed | None:
        table = schema.owed
        async with self.engine.connect() as connection:
            row = (await connection.execute(sa.select(table).where(table.c.key == key))).first()
        return _item(row) if row is not None else None

    async def owed_items(
        self, *, kinds: Sequence[str] | None = None, states: Sequence[OwedState] = (OwedState.DUE,)
    ) -> list[Owed]:
        table = schema.owed
        query = (
            sa.select(table)
            .where(table.c.state.in_([str(s) for s in states]))
            .order_by(table.c.due_at)
        )
        if kinds is not None:
            query = query.where(table.c.kind.in_(list(kinds)))
        async with self.engine.connect() as connection:
            return [_item(r) for r in await connection.execute(query)]

    async def forget_owed(self, before: float) -> int:
        table = schema.owed
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.delete().where(table.c.state != str(OwedState.DUE), table.c.done_at < before)
            )
        return int(result.rowcount or 0)
