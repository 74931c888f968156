"""A statement and its connection's whole use in one step of the event loop's task.

SQLAlchemy's asyncio connection ends each use (``async with engine.connect()``, ``begin()``)
in a task of its own behind ``asyncio.shield``, so that a second cancellation cannot cut the
connection's return to the pool in half, and each of its calls (execute, commit, close) is a
greenlet of its own. For the statements the owed engine runs at every poll of every change it
follows (the operation's read and write, the item's settling, the tick's claim), that was as
much of the event loop's time as the statement itself. Here the use runs as one synchronous
function in one greenlet (``greenlet_spawn``, what ``AsyncConnection.run_sync`` runs):
connect, execute, commit and close, with the driver's calls awaited inside it as usual.

A cancellation arrives in the function at the driver's call it was waiting on, and the
``with`` block ends the connection as it unwinds: SQLAlchemy's pool invalidates a connection
whose reset fails, so a connection cut off by a second cancellation is discarded, never
reused half-ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn


def _first(engine: Engine, statement: sa.Executable, values: Mapping[str, Any]) -> Any:
    with engine.connect() as connection:
        return connection.execute(statement, values).first()


def _rows(engine: Engine, statement: sa.Executable, values: Mapping[str, Any]) -> Any:
    with engine.begin() as connection:
        return connection.execute(statement, values).all()


def _changed(engine: Engine, statement: sa.Executable, values: Mapping[str, Any]) -> int:
    with engine.begin() as connection:
        return int(connection.execute(statement, values).rowcount)


async def first(
    engine: AsyncEngine, statement: sa.Executable, values: Mapping[str, Any]
) -> sa.Row[Any] | None:
    """The first row a read gives, or None."""
    row: sa.Row[Any] | None = await greenlet_spawn(_first, engine.sync_engine, statement, values)
    return row


async def rows_of(
    engine: AsyncEngine, statement: sa.Executable, values: Mapping[str, Any]
) -> list[sa.Row[Any]]:
    """Every row a statement gives (an UPDATE's RETURNING), in a transaction of its own."""
    rows: list[sa.Row[Any]] = await greenlet_spawn(_rows, engine.sync_engine, statement, values)
    return rows


async def changed(engine: AsyncEngine, statement: sa.Executable, values: Mapping[str, Any]) -> int:
    """How many rows a write changed, in a transaction of its own."""
    count: int = await greenlet_spawn(_changed, engine.sync_engine, statement, values)
    return count
