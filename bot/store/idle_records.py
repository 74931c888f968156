"""Idle records: what the bot remembers of each cluster between sweeps, changed by
compare-and-set so that a click and a sweep never undo each other."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from bot.store import schema
from bot.store.store import Store
from handlers.health.episodes import Episode
from handlers.idle.rules import IdleRecord, Run
from handlers.spend.runs import OpenRun

_RECORD_FIELDS = {f.name for f in fields(IdleRecord)}


# The document keeps the keys it was first written with, which replicas of an earlier release
# read during a rolling upgrade: the record's name for a key, and the key stored.
_STORED_AS = {"alert_message": "alert_ts"}


def _record_json(record: IdleRecord) -> str:
    document = {_STORED_AS.get(name, name): getattr(record, name) for name in _RECORD_FIELDS}
    document["history"] = [[r.start, r.end, r.busy] for r in record.history]
    document["spending"] = [run.to_list() for run in record.spending]
    document["episode"] = record.episode.to_dict() if record.episode else None
    return json.dumps(document, separators=(",", ":"))


def _record(text: str) -> IdleRecord:
    document = json.loads(text)
    for name, stored in _STORED_AS.items():
        if stored in document:
            document[name] = document.pop(stored)
    document["history"] = tuple(Run(*run) for run in document.get("history", []))
    document["spending"] = tuple(OpenRun.from_list(r) for r in document.get("spending", []))
    document["labels"] = tuple((str(k), str(v)) for k, v in document.get("labels", []))
    episode = document.get("episode")
    document["episode"] = Episode.from_dict(episode) if isinstance(episode, dict) else None
    # A record written by another version may carry fields this one does not know.
    return IdleRecord(**{k: v for k, v in document.items() if k in _RECORD_FIELDS})


class IdleRecords:
    """Idle records, changed by compare-and-set: a click and a sweep never undo each other."""

    def __init__(self, store: Store) -> None:
        self.engine = store.engine

    async def get(self, cluster: str) -> tuple[IdleRecord, int]:
        table = schema.idle_records
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(table.c.record, table.c.version).where(table.c.cluster == cluster)
                )
            ).first()
        if row is None:
            return IdleRecord(cluster=cluster), 0
        return _record(row.record), int(row.version)

    async def all(self) -> list[IdleRecord]:
        async with self.engine.connect() as connection:
            rows = await connection.execute(sa.select(schema.idle_records.c.record))
            return [_record(r.record) for r in rows]

    async def put(self, record: IdleRecord, version: int, now: float) -> bool:
        """Write if nobody wrote since ``version`` was read; True when written."""
        table = schema.idle_records
        if version == 0:
            try:
                async with self.engine.begin() as connection:
                    await connection.execute(
                        table.insert().values(
                            cluster=record.cluster,
                            record=_record_json(record),
                            version=1,
                            updated_at=now,
                        )
                    )
            except sa.exc.IntegrityError:
                return False  # someone else created it first
            return True
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.cluster == record.cluster, table.c.version == version)
                .values(record=_record_json(record), version=version + 1, updated_at=now)
            )
        return bool(result.rowcount == 1)

    async def get_many(self, clusters: Sequence[str]) -> dict[str, tuple[IdleRecord, int]]:
        """Every record asked for in one query; new clusters get an empty record, version 0."""
        table = schema.idle_records
        found = {c: (IdleRecord(cluster=c), 0) for c in clusters}
        async with self.engine.connect() as connection:
            for start in range(0, len(clusters), 500):
                rows = await connection.execute(
                    sa.select(table.c.cluster, table.c.record, table.c.version).where(
                        table.c.cluster.in_(clusters[start : start + 500])
                    )
                )
                for row in rows:
                    found[row.cluster] = (_record(row.record), int(row.version))
        return found

    async def put_many(self, items: Sequence[tuple[IdleRecord, int]], now: float) -> set[str]:
        """Compare-and-set many records in one transaction, as a few statements (new records
        inserted together, changed ones updated by one prepared statement); returns the
        clusters that lost to another writer."""
        table = schema.idle_records
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        fresh = [(r, v) for r, v in items if v == 0]
        changed = [(r, v) for r, v in items if v != 0]
        lost: set[str] = set()
        # one statement, compiled once and cached; SQLAlchemy sends the rows as a few
        # multi-row INSERTs ("insertmanyvalues"), each answering the rows it wrote
        new_row = (
            insert(table)
            .on_conflict_do_nothing(index_elements=["cluster"])
            .returning(table.c.cluster)
        )
        async with self.engine.begin() as connection:
            for start in range(0, len(fresh), 500):
                chunk = fresh[start : start + 500]
                rows = [
                    {
                        "cluster": r.cluster,
                        "record": _record_json(r),
                        "version": 1,
                        "updated_at": now,
                    }
                    for r, _ in chunk
                ]
                written = {row.cluster for row in await connection.execute(new_row, rows)}
                lost |= {r.cluster for r, _ in chunk if r.cluster not in written}
            for start in range(0, len(changed), 500):  # each chunk's awaits free the loop
                chunk = changed[start : start + 500]
                texts = {r.cluster: _record_json(r) for r, _ in chunk}
                update = (
                    table.update()
                    .where(table.c.cluster == sa.bindparam("b_cluster"))
                    .where(table.c.version == sa.bindparam("b_version"))
                    .values(
                        record=sa.bindparam("b_record"),
                        version=sa.bindparam("b_next"),
                        updated_at=sa.bindparam("b_at"),
                    )
                )
                await connection.execute(
                    update,
                    [
                        {
                            "b_cluster": r.cluster,
                            "b_version": v,
                            "b_record": texts[r.cluster],
                            "b_next": v + 1,
                            "b_at": now,
                        }
                        for r, v in chunk
                    ],
                )
                # which updates took: the row holds this write's record at the next version
                wanted = {r.cluster: v + 1 for r, v in chunk}
                seen: set[str] = set()
                stored = await connection.execute(
                    sa.select(table.c.cluster, table.c.version, table.c.record).where(
                        table.c.cluster.in_(list(wanted))
                    )
                )
                for row in stored:
                    seen.add(row.cluster)
                    if row.version != wanted[row.cluster] or row.record != texts[row.cluster]:
                        lost.add(row.cluster)
                lost |= set(wanted) - seen  # deleted meanwhile
        return lost

    async def delete(self, cluster: str) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.idle_records.delete().where(schema.idle_records.c.cluster == cluster)
            )
