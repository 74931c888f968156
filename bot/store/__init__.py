"""Persistence: SQLite by default, PostgreSQL for replicas."""

from bot.store.idle_records import IdleRecords
from bot.store.store import Store, details, shown
from handlers.ports import OpenRequestExistsError

__all__ = ["IdleRecords", "OpenRequestExistsError", "Store", "details", "shown"]
