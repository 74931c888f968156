"""Form submissions (``handlers/intake.py``): one row from the first byte, keyed by the view's
id and hash, so that a replay finds its key taken."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from handlers.entities import Submission

_FIELDS = [f.name for f in fields(Submission)]


def _submission(row: sa.Row[Any]) -> Submission:
    return Submission(**{k: row._mapping[k] for k in _FIELDS})


class SubmissionRows:
    engine: AsyncEngine

    async def receive_submission(self, submission: Submission) -> bool:
        try:
            async with self.engine.begin() as connection:
                await connection.execute(schema.submissions.insert().values(**asdict(submission)))
        except sa.exc.IntegrityError:  # the key is taken: this view was submitted before
            return False
        return True

    async def submission_made(self, key: str) -> None:
        table = schema.submissions
        async with self.engine.begin() as connection:
            await connection.execute(table.update().where(table.c.key == key).values(made=True))

    async def drop_submission(self, key: str) -> None:
        table = schema.submissions
        async with self.engine.begin() as connection:
            await connection.execute(table.delete().where(table.c.key == key))

    async def unfinished_submissions(self, owner: str, before: float) -> list[Submission]:
        table = schema.submissions
        query = sa.select(table).where(
            table.c.made.is_(False), sa.or_(table.c.owner == owner, table.c.received_at < before)
        )
        async with self.engine.connect() as connection:
            return [_submission(row) for row in await connection.execute(query)]

    async def forget_submissions(self, before: float) -> None:
        table = schema.submissions
        async with self.engine.begin() as connection:
            await connection.execute(
                table.delete().where(table.c.made.is_(True), table.c.received_at < before)
            )
