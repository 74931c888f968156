"""Persistence: SQLite by default, PostgreSQL for replicas."""

from bot.store.store import IdleRecords, Store, details

__all__ = ["IdleRecords", "Store", "details"]
