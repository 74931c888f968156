"""Persistence for requests, tracked operations and the audit log (SQLAlchemy Core, async).

Every state change that a click, a retry or a second replica could repeat is one conditional
UPDATE, so it happens exactly once: ``transition`` returns whether this caller won.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.store import schema
from handlers.idle import IdleRecord, Run
from handlers.plans import ChangePlan
from handlers.records import ApprovalRequest, AuditEntry, RequestState, TrackedOperation

_OPERATION_FIELDS = [f.name for f in fields(TrackedOperation)]


def _request_row(request: ApprovalRequest) -> dict[str, Any]:
    row = asdict(request)
    row["plan"] = request.plan.model_dump_json()
    row["kind"] = request.plan.kind
    row["cluster"] = request.plan.cluster
    row["state"] = str(request.state)
    return row


def _request(row: sa.Row[Any]) -> ApprovalRequest:
    data = dict(row._mapping)
    data.pop("kind")
    data.pop("cluster")
    data["plan"] = ChangePlan.model_validate_json(data["plan"])
    data["state"] = RequestState(data["state"])
    return ApprovalRequest(**data)


def _operation(row: sa.Row[Any]) -> TrackedOperation:
    return TrackedOperation(**{k: row._mapping[k] for k in _OPERATION_FIELDS})


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, url: str, **engine_options: Any) -> Store:
        if url.startswith("sqlite"):
            # A busy file waits instead of failing while another connection writes.
            engine_options.setdefault("connect_args", {"timeout": 30})
        return cls(create_async_engine(url, **engine_options))

    async def close(self) -> None:
        await self.engine.dispose()

    async def migrate(self) -> int:
        """Create the schema, or bring an older one up to date; returns the version."""
        async with self.engine.begin() as connection:
            if self.engine.dialect.name == "sqlite":
                await connection.exec_driver_sql("PRAGMA journal_mode=WAL")
            await connection.run_sync(schema.metadata.create_all)
            current = (
                await connection.execute(
                    sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                )
            ).scalar()
            version = int(current) if current else 0
            if version == 0:
                await connection.execute(
                    schema.meta.insert().values(
                        key="schema_version", value=str(schema.SCHEMA_VERSION)
                    )
                )
                return schema.SCHEMA_VERSION
            for step in range(version + 1, schema.SCHEMA_VERSION + 1):
                for statement in schema.MIGRATIONS.get(step, []):
                    await connection.exec_driver_sql(statement)
            if version < schema.SCHEMA_VERSION:
                await connection.execute(
                    schema.meta.update()
                    .where(schema.meta.c.key == "schema_version")
                    .values(value=str(schema.SCHEMA_VERSION))
                )
            return schema.SCHEMA_VERSION

    async def ping(self) -> bool:
        try:
            async with self.engine.connect() as connection:
                await connection.execute(sa.text("SELECT 1"))
        except Exception:  # any failure means not ready; /readyz says so
            return False
        return True

    # -- approval requests ---------------------------------------------------------------------

    async def add_request(self, request: ApprovalRequest) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(schema.requests.insert().values(**_request_row(request)))

    async def get_request(self, request_id: str) -> ApprovalRequest | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(schema.requests).where(schema.requests.c.id == request_id)
                )
            ).first()
        return _request(row) if row else None

    async def transition(
        self,
        request_id: str,
        from_states: Sequence[RequestState],
        to_state: RequestState,
        **changes: Any,
    ) -> bool:
        """Move a request between states atomically; True only for the caller that moved it."""
        table = schema.requests
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.id == request_id, table.c.state.in_([str(s) for s in from_states]))
                .values(state=str(to_state), **changes)
            )
        return bool(result.rowcount == 1)

    async def update_request(self, request_id: str, **changes: Any) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.requests.update().where(schema.requests.c.id == request_id).values(**changes)
            )

    async def expired_requests(self, now: float) -> list[ApprovalRequest]:
        table = schema.requests
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table).where(
                    table.c.state == str(RequestState.PENDING), table.c.expires_at <= now
                )
            )
            return [_request(r) for r in rows]

    async def open_requests(self, cluster: str) -> list[ApprovalRequest]:
        table = schema.requests
        open_states = [str(s) for s in RequestState if s.open]
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table).where(table.c.cluster == cluster, table.c.state.in_(open_states))
            )
            return [_request(r) for r in rows]

    # -- tracked operations --------------------------------------------------------------------

    async def add_operation(self, operation: TrackedOperation) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(schema.operations.insert().values(**asdict(operation)))

    async def get_operation(self, name: str) -> TrackedOperation | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(schema.operations).where(schema.operations.c.name == name)
                )
            ).first()
        return _operation(row) if row else None

    async def active_operations(self) -> list[TrackedOperation]:
        """Operations whose final message has not been posted yet, oldest first."""
        table = schema.operations
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table)
                .where(sa.or_(table.c.final.is_(None), table.c.final != "posted"))
                .order_by(table.c.started_at)
            )
            return [_operation(r) for r in rows]

    async def claim_due(self, owner: str, now: float, lease: float) -> list[TrackedOperation]:
        """Lease the operations due for a poll to this process, so replicas never both poll."""
        table = schema.operations
        claimed = []
        for operation in await self.active_operations():
            if operation.next_poll_at > now:
                continue
            async with self.engine.begin() as connection:
                result = await connection.execute(
                    table.update()
                    .where(
                        table.c.name == operation.name,
                        sa.or_(
                            table.c.owner.is_(None),
                            table.c.owner == owner,
                            table.c.lease_until < now,
                        ),
                    )
                    .values(owner=owner, lease_until=now + lease)
                )
            if result.rowcount == 1:
                operation.owner, operation.lease_until = owner, now + lease
                claimed.append(operation)
        return claimed

    async def update_operation(self, name: str, **changes: Any) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.operations.update().where(schema.operations.c.name == name).values(**changes)
            )

    async def claim_final(self, name: str) -> bool:
        """Take the right to post an operation's final message; True for exactly one caller."""
        table = schema.operations
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.final.is_(None))
                .values(final="claimed")
            )
        return bool(result.rowcount == 1)

    async def release_operations(self, owner: str) -> None:
        """Give up this process's leases at shutdown, so another replica resumes at once."""
        table = schema.operations
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update().where(table.c.owner == owner).values(owner=None, lease_until=0.0)
            )

    # -- audit ---------------------------------------------------------------------------------

    async def audit(self, entry: AuditEntry) -> None:
        row = asdict(entry)
        row.pop("id")
        async with self.engine.begin() as connection:
            await connection.execute(schema.audit.insert().values(**row))

    async def audit_log(self, cluster: str | None = None, limit: int = 20) -> list[AuditEntry]:
        table = schema.audit
        query = sa.select(table).order_by(table.c.at.desc(), table.c.id.desc()).limit(limit)
        if cluster is not None:
            query = query.where(table.c.cluster == cluster)
        async with self.engine.connect() as connection:
            rows = await connection.execute(query)
            return [AuditEntry(**dict(r._mapping)) for r in rows]


def _record_json(record: IdleRecord) -> str:
    document = asdict(record)
    document["history"] = [[r.start, r.end, r.busy] for r in record.history]
    return json.dumps(document, separators=(",", ":"))


def _record(text: str) -> IdleRecord:
    document = json.loads(text)
    document["history"] = tuple(Run(*run) for run in document["history"])
    return IdleRecord(**document)


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
        """Compare-and-set many records in one transaction; returns the clusters that lost."""
        table = schema.idle_records
        from sqlalchemy.dialects import postgresql, sqlite

        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        lost: set[str] = set()
        async with self.engine.begin() as connection:
            for record, version in items:
                statement: sa.Executable
                if version == 0:
                    statement = (
                        insert(table)
                        .values(
                            cluster=record.cluster,
                            record=_record_json(record),
                            version=1,
                            updated_at=now,
                        )
                        .on_conflict_do_nothing(index_elements=["cluster"])
                    )
                else:
                    statement = (
                        table.update()
                        .where(table.c.cluster == record.cluster, table.c.version == version)
                        .values(record=_record_json(record), version=version + 1, updated_at=now)
                    )
                if (await connection.execute(statement)).rowcount != 1:
                    lost.add(record.cluster)
        return lost

    async def delete(self, cluster: str) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.idle_records.delete().where(schema.idle_records.c.cluster == cluster)
            )


def details(**values: Any) -> str:
    """Audit details as compact JSON."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
