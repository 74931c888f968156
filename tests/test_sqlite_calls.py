"""SQLite's statements in one call each to the connection's thread (bot/store/sqlite_calls.py),
on a real database file: what SQLAlchemy reads of a statement is kept, a read is one hand-off
and a one-statement write two, errors are SQLAlchemy's own, and a statement cut off by a
cancellation leaves no transaction open on the connection the pool gets back."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import pytest
import sqlalchemy as sa

from bot.store import Store, schema
from bot.store.sqlite_calls import OneCallConnection
from handlers.entities import TrackedOperation
from tests.test_store import open_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store("sqlite", tmp_path) as opened:
        yield opened


def operation(name: str) -> TrackedOperation:
    now = time.time()
    return TrackedOperation(
        name=name,
        request_id=f"r-{name}",
        cluster=f"projects/p/locations/l/modelDevelopmentClusters/{name}",
        channel="C1",
        thread=None,
        started_at=now,
        next_poll_at=now,
    )


class Counted(SimpleQueue[Any]):
    """The connection's queue to its thread, counting what is handed over."""

    def __init__(self, queue: SimpleQueue[Any]) -> None:
        self.queue = queue
        self.handed = 0

    def put_nowait(self, item: Any) -> None:
        self.handed += 1
        self.queue.put_nowait(item)


async def handoffs(store: Store) -> Counted:
    """The pool's one kept connection, its hand-offs counted from now on."""
    async with store.engine.connect() as connection:
        raw = await connection.get_raw_connection()
        adapted = raw.dbapi_connection
        assert isinstance(adapted, OneCallConnection)
        counted = Counted(adapted._connection._tx)
        adapted._connection._tx = counted
    return counted


async def test_a_read_is_one_handoff_and_a_write_two(tmp_path: Path) -> None:
    store = Store.from_url(
        f"sqlite+aiosqlite:///{tmp_path / 'one.db'}", pool_size=1, max_overflow=0
    )
    try:
        await store.migrate()
        await store.add_operation(operation("op1"))
        counted = await handoffs(store)
        assert (await store.get_operation("op1")) is not None
        assert counted.handed == 1
        await store.update_operation("op1", interval=4.0)
        assert counted.handed == 3  # the statement and its commit; no rollback after it
        assert (await store.get_operation("op1")).interval == 4.0  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_what_sqlalchemy_reads_of_a_statement_is_kept(store: Store) -> None:
    table = schema.operations
    await store.add_operation(operation("op1"))
    await store.add_operation(operation("op2"))
    async with store.engine.begin() as connection:
        changed = await connection.execute(
            table.update().where(table.c.name.in_(["op1", "op2", "none"])).values(interval=2.0)
        )
        assert changed.rowcount == 2
        many = await connection.execute(
            table.update().where(table.c.name == sa.bindparam("named")).values(interval=3.0),
            [{"named": "op1"}, {"named": "none"}],
        )
        assert many.rowcount == 1
        rows = (await connection.execute(sa.select(table.c.name, table.c.interval))).all()
        assert sorted(rows) == [("op1", 3.0), ("op2", 2.0)]
        inserted = await connection.execute(
            schema.audit.insert().values(at=1.0, actor="U1", action="test", cluster="c", details="")
        )
        assert inserted.inserted_primary_key[0] is not None
        assert (await connection.scalar(sa.select(sa.func.count()).select_from(table))) == 2
    with pytest.raises(sa.exc.IntegrityError, match="UNIQUE"):
        await store.add_operation(operation("op1"))


async def test_a_statement_cut_off_leaves_no_transaction_open(tmp_path: Path) -> None:
    """Another connection holds the write lock, so the update waits in SQLite's busy wait;
    it is cancelled meanwhile. Once the lock is let go the update runs on its thread and
    begins a transaction: what goes behind it on that thread (SQLAlchemy closes a connection
    whose statement was cut off) ends that transaction, and the database is free for every
    other writer, the update undone."""
    path = str(tmp_path / "cut.db")
    store = Store.from_url(f"sqlite+aiosqlite:///{path}", pool_size=1, max_overflow=0)
    try:
        await store.migrate()
        await store.add_operation(operation("op1"))
        await cut_off(store, path)
    finally:
        await store.close()


async def cut_off(store: Store, path: str) -> None:
    counted = await handoffs(store)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    update = asyncio.ensure_future(store.update_operation("op1", interval=9.0))
    deadline = time.monotonic() + 30
    while counted.handed < 1:  # the update waits on the lock in its thread
        assert time.monotonic() < deadline, "the update never reached its thread"
        await asyncio.sleep(0.01)
    update.cancel()
    locker.execute("ROLLBACK")  # the update goes on in its thread, and begins a transaction
    locker.close()
    with pytest.raises(asyncio.CancelledError):
        await update
    other = sqlite3.connect(path, timeout=10)
    try:
        undone = "SELECT interval FROM tracked_operations WHERE name = 'op1'"
        assert other.execute(undone).fetchone() == (1.0,)  # never committed
        deadline = time.monotonic() + 30
        while True:
            try:
                with other:
                    other.execute("UPDATE tracked_operations SET interval = 5.0 WHERE name = 'op1'")
                break
            except sqlite3.OperationalError:  # locked: a transaction was left open
                assert time.monotonic() < deadline, "the cut-off update kept the write lock"
        stored = other.execute(
            "SELECT interval FROM tracked_operations WHERE name = 'op1'"
        ).fetchone()
        assert stored == (5.0,)
    finally:
        other.close()
    again = await store.get_operation("op1")
    assert again is not None and again.interval == 5.0
    await store.update_operation("op1", interval=6.0)  # the pool's connections still write
    assert (await store.get_operation("op1")).interval == 6.0  # type: ignore[union-attr]
