"""One file per schema revision, oldest first (Alembic reads them by path)."""
