"""Persistence: SQLite by default, PostgreSQL for replicas."""

from bot.store.records import IdleRecords, StoreKeeper
from bot.store.store import Store, details, shown
from handlers.ports import OpenRequestExistsError

__all__ = ["IdleRecords", "OpenRequestExistsError", "Store", "StoreKeeper", "details", "shown"]
