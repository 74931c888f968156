"""Persistence: SQLite by default, PostgreSQL for replicas."""

from bot.store.store import Store, details

__all__ = ["Store", "details"]
