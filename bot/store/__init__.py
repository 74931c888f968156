"""Persistence: SQLite by default, PostgreSQL for replicas."""

from bot.store.idle_records import IdleRecords
from bot.store.store import OpenRequestExistsError, Store, details

__all__ = ["IdleRecords", "OpenRequestExistsError", "Store", "details"]
