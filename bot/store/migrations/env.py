"""Alembic's environment: migrations run on the connection the store hands over (inside its
transaction, after its PostgreSQL advisory lock), never on one of their own."""

from __future__ import annotations

from alembic import context

from bot.store import schema

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=schema.metadata,
    # SQLite alters a table by copying it; batch mode does that for ALTERs it lacks.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
