"""SQLite through aiosqlite with one call to the connection's thread per statement.

aiosqlite runs each SQLite connection in a thread of its own, and every call to it is a hand-off
to that thread and a wake-up of the event loop when it answers. SQLAlchemy's adapter makes a
statement four such calls (make a cursor, execute, fetch the rows, close the cursor), and a
connection given back to the pool one more, a rollback that resets it, even after a commit:
a read of one row was five hand-offs, a one-statement write five. Here a statement is one call
that does all four on the connection's thread, and a commit or rollback goes to the thread only
when SQLite says the connection is in a transaction and no statement of ours is still under way
on it (a statement cut off by a cancellation may yet begin one: whatever ends it then goes
behind it on the thread, as before). A read is one hand-off, a one-statement write two.

Used for ``sqlite+aiosqlite`` URLs by ``Store.from_url`` (``module=``, SQLAlchemy's way to
hand a dialect its DB-API); the SQL, the pool and the dialect are SQLAlchemy's own.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite
from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_connection
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT

T = TypeVar("T")
Done = tuple[Any, int, int | None, list[Any] | None]  # description, rowcount, lastrowid, rows


def _execute(
    connection: sqlite3.Connection, operation: str, parameters: Sequence[Any] | None
) -> Done:
    cursor = connection.cursor()
    try:
        cursor.execute(operation, () if parameters is None else parameters)
        rows = cursor.fetchall() if cursor.description else None
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


def _executemany(
    connection: sqlite3.Connection, operation: str, parameters: Sequence[Sequence[Any]]
) -> Done:
    cursor = connection.cursor()
    try:
        cursor.executemany(operation, parameters)
        return cursor.description, cursor.rowcount, cursor.lastrowid, None
    finally:
        cursor.close()


class OneCallCursor(AsyncAdapt_aiosqlite_cursor):
    """A cursor that holds no SQLite cursor between calls: each statement makes, runs, reads
    and closes its own in one call, and keeps what SQLAlchemy reads of it afterwards."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")
    _awaitable_cursor_close = False  # nothing left open to close

    def __init__(self, adapt_connection: AsyncAdapt_dbapi_connection) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    def _keep(self, done: Done) -> None:
        self._description, self._rowcount, self._lastrowid, rows = done
        self._rows = collections.deque(rows or ())

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        connection = cast(OneCallConnection, self._adapt_connection)
        async with connection._execute_mutex:
            self._keep(await connection.call(_execute, operation, parameters))

    async def _executemany_async(self, operation: Any, seq_of_parameters: Any) -> None:
        connection = cast(OneCallConnection, self._adapt_connection)
        async with connection._execute_mutex:
            self._keep(await connection.call(_executemany, operation, seq_of_parameters))


class OneCallConnection(AsyncAdapt_aiosqlite_connection):
    """The adapted connection: statements in one call each, and a commit or rollback only when
    there is a transaction to end."""

    __slots__ = ("_ended", "_queued")
    _cursor_cls = OneCallCursor

    def __init__(self, dbapi: Any, connection: Any) -> None:
        super().__init__(dbapi, connection)
        # calls handed to the thread, and calls it finished: each counted by one thread only
        # (a call refused before it was handed over, its connection closed, leaves them
        # apart for good: the safe side, where every rollback goes)
        self._queued = 0
        self._ended = 0

    async def call(self, work: Callable[..., T], *args: Any) -> T:
        """``work(sqlite_connection, *args)`` on the connection's thread."""
        driver = cast(aiosqlite.Connection, self._connection)

        def run() -> T:
            try:
                return work(driver._conn, *args)
            finally:
                self._ended += 1

        self._queued += 1
        return cast(T, await driver._execute(run))  # type: ignore[no-untyped-call]

    def _nothing_to_end(self) -> bool:
        raw: sqlite3.Connection | None = cast(aiosqlite.Connection, self._connection)._connection
        return self._queued == self._ended and raw is not None and not raw.in_transaction

    def commit(self) -> None:
        if not self._nothing_to_end():
            super().commit()

    def rollback(self) -> None:
        if not self._nothing_to_end():
            super().rollback()


class OneCallDbapi(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite DB-API, whose connections are ``OneCallConnection``."""

    def connect(self, *arg: Any, **kw: Any) -> OneCallConnection:
        adapted = super().connect(*arg, **kw)
        return OneCallConnection(self, adapted._connection)


def one_call_dbapi() -> OneCallDbapi:
    return OneCallDbapi(aiosqlite, sqlite3)
