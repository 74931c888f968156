"""PostgreSQL's transaction-level advisory locks: what one replica at a time does (SQLite
writes one transaction at a time already)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

MIGRATION_LOCK = 0x0C1B_0001  # one replica migrates at a time
CHANGES_LOCK = 0x0C1B_0002  # one replica keeps changes done at a time: each sees the other's
LEDGER_LOCK = 0x0C1B_0003  # one replica writes the ledger and its roll-ups at a time


async def one_at_a_time(connection: AsyncConnection, key: int) -> None:
    """Hold ``key`` until the connection's transaction ends (nothing on SQLite)."""
    if connection.dialect.name == "postgresql":
        await connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
