"""Each capability's record of each cluster, changed by compare-and-set so that a click and a
sweep never undo each other: the idle records in ``idle_records`` (the table they have had
since the first release), every other kind in ``cluster_records`` beside its owner's name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from bot.store import schema
from bot.store.store import Store
from handlers.keeping import Kept, RecordKind
from handlers.sweep.state import IDLE_RECORD, IdleRecord

R = TypeVar("R")
CHUNK = 500  # clusters per statement


class KeptRecords(Generic[R]):
    """One kind of record by cluster, each write a compare-and-set on its version."""

    def __init__(self, store: Store, kind: RecordKind[R]) -> None:
        self.engine = store.engine
        self.kind = kind
        idle = kind.owner == IDLE_RECORD.owner
        self.table = schema.idle_records if idle else schema.cluster_records
        self.owner: dict[str, str] = {} if idle else {"owner": kind.owner}

    def _text(self, record: R) -> str:
        return json.dumps(self.kind.dump(record), separators=(",", ":"))

    def _mine(self) -> list[sa.ColumnElement[bool]]:
        return [self.table.c[k] == v for k, v in self.owner.items()]

    async def get(self, cluster: str) -> tuple[R, int]:
        return (await self.get_many([cluster]))[cluster]

    async def all(self) -> list[tuple[str, R]]:
        table = self.table
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table.c.cluster, table.c.record).where(*self._mine())
            )
            return [(r.cluster, self.kind.load(r.cluster, json.loads(r.record))) for r in rows]

    async def get_many(self, clusters: Sequence[str]) -> dict[str, tuple[R, int]]:
        """Every record asked for in one query; a cluster without one gets the kind's empty
        record, version 0."""
        table = self.table
        found = {c: (self.kind.empty(c), 0) for c in clusters}
        async with self.engine.connect() as connection:
            for start in range(0, len(clusters), CHUNK):
                rows = await connection.execute(
                    sa.select(table.c.cluster, table.c.record, table.c.version).where(
                        table.c.cluster.in_(clusters[start : start + CHUNK]), *self._mine()
                    )
                )
                for row in rows:
                    record = self.kind.load(row.cluster, json.loads(row.record))
                    found[row.cluster] = (record, int(row.version))
        return found

    async def put(self, cluster: str, record: R, version: int, now: float) -> bool:
        """Write if nobody wrote since ``version`` was read; True when written."""
        return not await self.put_many([(cluster, record, version)], now)

    async def put_many(self, items: Sequence[tuple[str, R, int]], now: float) -> set[str]:
        """Compare-and-set many records in one transaction, as a few statements (new records
        inserted together, changed ones updated by one prepared statement); returns the
        clusters that lost to another writer."""
        texts = {cluster: self._text(record) for cluster, record, _ in items}
        fresh = [cluster for cluster, _, version in items if version == 0]
        changed = [(cluster, version) for cluster, _, version in items if version != 0]
        lost: set[str] = set()
        async with self.engine.begin() as connection:
            for start in range(0, len(fresh), CHUNK):
                chunk = fresh[start : start + CHUNK]
                lost |= await self._insert(connection, chunk, texts, now)
            for start in range(0, len(changed), CHUNK):  # each chunk's awaits free the loop
                chunk_changed = changed[start : start + CHUNK]
                lost |= await self._update(connection, chunk_changed, texts, now)
        return lost

    async def _insert(
        self, connection: Any, clusters: list[str], texts: dict[str, str], now: float
    ) -> set[str]:
        """New records, one statement compiled once and cached (SQLAlchemy sends the rows
        as a few multi-row INSERTs, each answering the rows it wrote); the clusters another
        writer created first."""
        table = self.table
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        keys = [*self.owner, "cluster"]
        statement = (dialect.insert(table).on_conflict_do_nothing(index_elements=keys)).returning(
            table.c.cluster
        )
        rows = [
            {**self.owner, "cluster": c, "record": texts[c], "version": 1, "updated_at": now}
            for c in clusters
        ]
        written = {row.cluster for row in await connection.execute(statement, rows)}
        return set(clusters) - written

    async def _update(
        self,
        connection: Any,
        changed: list[tuple[str, int]],
        texts: dict[str, str],
        now: float,
    ) -> set[str]:
        """Changed records, one prepared statement; the clusters whose version moved on."""
        table = self.table
        update = (
            table.update()
            .where(table.c.cluster == sa.bindparam("b_cluster"), *self._mine())
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
                    "b_cluster": c,
                    "b_version": v,
                    "b_record": texts[c],
                    "b_next": v + 1,
                    "b_at": now,
                }
                for c, v in changed
            ],
        )
        # which updates took: the row holds this write's record at the next version
        wanted = {c: v + 1 for c, v in changed}
        seen: set[str] = set()
        lost: set[str] = set()
        stored = await connection.execute(
            sa.select(table.c.cluster, table.c.version, table.c.record).where(
                table.c.cluster.in_(list(wanted)), *self._mine()
            )
        )
        for row in stored:
            seen.add(row.cluster)
            if row.version != wanted[row.cluster] or row.record != texts[row.cluster]:
                lost.add(row.cluster)
        return lost | (set(wanted) - seen)  # and those deleted meanwhile

    async def delete(self, cluster: str) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                self.table.delete().where(self.table.c.cluster == cluster, *self._mine())
            )


class StoreKeeper:
    """Where each capability's records are kept: one ``KeptRecords`` per kind."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def of(self, kind: RecordKind[R]) -> Kept[R]:
        return KeptRecords(self.store, kind)


class IdleRecords(KeptRecords[IdleRecord]):
    """The idle sweep's records."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, IDLE_RECORD)
