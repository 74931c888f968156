"""Alembic migrations of the store's schema, applied on start and by ``clusterbot migrate``."""
