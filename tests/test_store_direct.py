"""Statements run in one greenlet step (``bot/store/direct.py``), on SQLite and PostgreSQL: a
write cut off while it waits for another transaction's lock gives its connection back to the
pool once that lock is gone, and the item's holder settles it afterwards as usual."""

from __future__ import annotations

import asyncio
import contextlib

from bot.store import Store, schema
from handlers.owed.model import Owed, OwedState
from tests.test_jobs import until
from tests.test_store import database

__all__ = ["database"]  # the database fixture: SQLite and PostgreSQL


async def test_a_write_cut_off_while_it_waits_gives_its_connection_back(
    database: Store,
) -> None:
    store = database
    await store.owe([Owed(key="a", kind="k", subject={}, due_at=1.0, created_at=0.0)])
    [taken] = await store.claim_owed("A", 10.0, 60.0, 1, ["k"])
    holding = await store.engine.connect()  # another connection of the same pool
    blocked = await holding.begin()
    await holding.execute(  # another transaction's write holds the row (and SQLite's lock)
        schema.owed.update().where(schema.owed.c.key == "a").values(note="held")
    )
    settling = asyncio.ensure_future(store.settle_owed("a", "A", due_at=100.0))
    await until(lambda: store.engine.pool.checkedout() == 2, 60)  # waiting for the lock
    settling.cancel()
    await blocked.rollback()
    await holding.close()
    with contextlib.suppress(asyncio.CancelledError):
        await settling
    await until(lambda: store.engine.pool.checkedout() == 0, 60)
    assert await store.settle_owed("a", "A", due_at=200.0)
    kept = await store.get_owed("a")
    assert kept is not None and (kept.due_at, kept.owner, kept.state) == (
        200.0,
        None,
        OwedState.DUE,
    )
    assert taken.owner == "A"
