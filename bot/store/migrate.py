"""Alembic, run on a connection the store already holds: ``upgrade_to_head`` for start-up and
``clusterbot migrate``, ``differences`` for the test that the migrations build exactly the
schema the code uses."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from bot.store import schema

SCRIPTS = Path(__file__).with_name("migrations")
log = logging.getLogger(__name__)


def _config(connection: sa.Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    config.attributes["connection"] = connection
    return config


def upgrade_to_head(connection: sa.Connection) -> str:
    """Apply every revision the database lacks; returns the revision it is at now."""
    before = current_revision(connection)
    command.upgrade(_config(connection), "head")
    after = current_revision(connection)
    if after != before:
        log.info("database schema migrated from revision %s to %s", before, after)
    return after


def current_revision(connection: sa.Connection) -> str:
    return MigrationContext.configure(connection).get_current_revision() or "none"


def differences(connection: sa.Connection) -> list[Any]:
    """What would have to change for the database to match ``schema.metadata``."""
    return list(compare_metadata(MigrationContext.configure(connection), schema.metadata))
