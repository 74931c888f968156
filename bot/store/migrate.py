"""Alembic, run on a connection the store already holds: ``upgrade_to_head`` for start-up and
``clusterbot migrate``, ``differences`` for the test that the migrations build exactly the
schema the code uses. A database already at the newest revision is told so by one read of its
stamp, without loading Alembic (a tenth of a second of a replica's start)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from bot.store import schema

if TYPE_CHECKING:
    from alembic.config import Config

SCRIPTS = Path(__file__).with_name("migrations")
log = logging.getLogger(__name__)


def head() -> str:
    """The newest revision: each revision's file is named by its id, ``NNNN_what.py``."""
    return max(path.name[:4] for path in (SCRIPTS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


def _config(connection: sa.Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    config.attributes["connection"] = connection
    return config


def _stamped(connection: sa.Connection) -> str | None:
    """The revision the database is stamped with, read as a row (None: no stamp)."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()
    return next(iter(found), None)


def upgrade_to_head(connection: sa.Connection) -> str:
    """Apply every revision the database lacks; returns the revision it is at now."""
    newest = head()
    if _stamped(connection) == newest:
        return newest
    from alembic import command

    before = current_revision(connection)
    command.upgrade(_config(connection), "head")
    after = current_revision(connection)
    if after != before:
        log.info("database schema migrated from revision %s to %s", before, after)
    return after


def current_revision(connection: sa.Connection) -> str:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision() or "none"


def differences(connection: sa.Connection) -> list[Any]:
    """What would have to change for the database to match ``schema.metadata``."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    return list(compare_metadata(MigrationContext.configure(connection), schema.metadata))
