"""Off-hours schedules: each phase change one conditional UPDATE, so replicas fire once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from bot.store.owed import insert_owed
from handlers.owed.model import Owed
from handlers.schedules.model import Phase, Schedule, ScheduleChanges, ScheduleState
from handlers.schedules.times import Weekly

_FIELDS = [f.name for f in fields(Schedule)]


def _row(values: dict[str, Any]) -> dict[str, Any]:
    """A schedule's values as its columns hold them."""
    row = dict(values)
    for name in ("off", "on"):
        if name in row:
            row[name] = row[name].stored
    if "kept" in row:
        row["kept"] = json.dumps({pool: list(b) for pool, b in row["kept"].items()})
    for name in ("state", "phase"):
        if name in row:
            row[name] = str(row[name])
    return row


def _schedule(row: sa.Row[Any]) -> Schedule:
    data = {k: row._mapping[schema.schedules.c[k]] for k in _FIELDS}
    data["off"], data["on"] = Weekly.read(data["off"]), Weekly.read(data["on"])
    data["kept"] = {pool: (b[0], b[1]) for pool, b in json.loads(data["kept"]).items()}
    data["state"], data["phase"] = ScheduleState(data["state"]), Phase(data["phase"])
    return Schedule(**data)


class ScheduleRows:
    engine: AsyncEngine

    async def add_schedule(self, schedule: Schedule) -> bool:
        """Keep a new schedule; False when its id is taken (another replica made it)."""
        values = {name: getattr(schedule, name) for name in _FIELDS}
        try:
            async with self.engine.begin() as connection:
                await connection.execute(schema.schedules.insert().values(**_row(values)))
        except IntegrityError:
            return False
        return True

    async def drop_schedule(self, schedule_id: str) -> None:
        table = schema.schedules
        async with self.engine.begin() as connection:
            await connection.execute(table.delete().where(table.c.id == schedule_id))

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        table = schema.schedules
        async with self.engine.connect() as connection:
            found = (
                await connection.execute(table.select().where(table.c.id == schedule_id))
            ).first()
        return None if found is None else _schedule(found)

    async def schedules(self, states: Sequence[ScheduleState] | None = None) -> list[Schedule]:
        """Schedules in ``states`` (every one when None), and any other still asleep or on its
        way, oldest first."""
        table = schema.schedules
        query = table.select().order_by(table.c.created_at, table.c.id)
        if states is not None:
            query = query.where(
                sa.or_(
                    table.c.state.in_([str(s) for s in states]),
                    table.c.phase != str(Phase.AWAKE),
                )
            )
        async with self.engine.connect() as connection:
            return [_schedule(row) for row in await connection.execute(query)]

    async def move_schedule(
        self,
        schedule_id: str,
        before: Phase,
        after: Phase,
        *,
        if_due: float | None = None,
        owe: Sequence[Owed] = (),
        **changes: Unpack[ScheduleChanges],
    ) -> bool:
        """``before`` -> ``after`` with ``changes`` (and only while its ``due_at`` is
        ``if_due``, when given); False when another replica moved it first. What the move
        makes owed (``owe``) is recorded with it, in the same transaction."""
        table = schema.schedules
        values = _row({**changes, "phase": after})
        where = [table.c.id == schedule_id, table.c.phase == str(before)]
        if if_due is not None:
            where.append(table.c.due_at == if_due)
        return await self._moved(table.update().where(*where).values(**values), owe)

    async def _moved(self, update: sa.Update, owe: Sequence[Owed]) -> bool:
        async with self.engine.begin() as connection:
            result = await connection.execute(update)
            won = bool(result.rowcount)
            if won:
                await insert_owed(connection, owe)
        return won

    async def claim_notice(self, schedule_id: str, off_at: float, owe: Sequence[Owed] = ()) -> bool:
        """Whether this call is the one to post the notice for the "off" at ``off_at``."""
        table = schema.schedules
        fresh = sa.or_(table.c.noticed_for.is_(None), table.c.noticed_for != off_at)
        update = table.update().where(table.c.id == schedule_id, fresh).values(noticed_for=off_at)
        return await self._moved(update, owe)

    async def set_schedule_state(
        self,
        schedule_id: str,
        before: Sequence[ScheduleState],
        after: ScheduleState,
        owe: Sequence[Owed] = (),
        **changes: Unpack[ScheduleChanges],
    ) -> bool:
        table = schema.schedules
        values = _row({**changes, "state": after})
        update = (
            table.update()
            .where(table.c.id == schedule_id, table.c.state.in_([str(s) for s in before]))
            .values(**values)
        )
        return await self._moved(update, owe)

    async def update_schedule(self, schedule_id: str, **changes: Unpack[ScheduleChanges]) -> None:
        table = schema.schedules
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update().where(table.c.id == schedule_id).values(**_row(dict(changes)))
            )
