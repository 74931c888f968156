"""A fresh PostgreSQL database per test, on the machine's server (trust auth), and a look
into any test database from outside."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import require

SERVER = "postgresql://postgres@127.0.0.1:5432/test"


async def postgres_available() -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", 5432), 2)
    except (OSError, TimeoutError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def _admin(statement: str) -> None:
    connection = await asyncpg.connect(SERVER)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database; its SQLAlchemy URL. Skipped when PostgreSQL is absent, a
    failure under CI=true."""
    require(asyncio.run(postgres_available()), "PostgreSQL on 127.0.0.1:5432")
    name = f"cb_{secrets.token_hex(6)}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the database at ``url`` (SQLite or PostgreSQL), from outside
    the processes under test."""

    async def run() -> list[tuple[Any, ...]]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                return [tuple(r) for r in await connection.execute(sa.text(sql))]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def execute(url: str, sql: str, **values: Any) -> None:
    """Run one statement on the database at ``url`` and commit it, from outside the
    processes under test (a row as an earlier step of a test left it)."""

    async def run() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as connection:
                await connection.execute(sa.text(sql), values)
        finally:
            await engine.dispose()

    asyncio.run(run())
