"""Persistence for requests, tracked operations, leases and the audit log (SQLAlchemy Core).

Every state change that a click, a retry or a second replica could repeat is one conditional
UPDATE, so it happens exactly once: ``transition`` returns whether this caller won. Work a
replica does on a request or an operation is covered by a lease that the replica renews
while it lives; a lease that runs out lets another replica take the work over.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from bot.store import schema
from handlers.entities import (
    ApprovalRequest,
    AuditEntry,
    Final,
    RequestState,
    TrackedOperation,
)
from handlers.plans import ChangePlan
from handlers.ports import OpenRequestExistsError

_OPERATION_FIELDS = [f.name for f in fields(TrackedOperation)]
_REQUEST_FIELDS = [f.name for f in fields(ApprovalRequest)]
MIGRATION_LOCK = 0x0C1B_0001  # pg_advisory_xact_lock key: one replica migrates at a time


def _request_row(request: ApprovalRequest) -> dict[str, Any]:
    row = asdict(request)
    row["plan"] = request.plan.model_dump_json()
    row["kind"] = str(request.plan.kind)
    row["cluster"] = request.plan.cluster
    row["state"] = str(request.state)
    return row


def _request(row: sa.Row[Any]) -> ApprovalRequest:
    mapping = row._mapping
    data = {name: mapping[name] for name in _REQUEST_FIELDS}
    data["plan"] = ChangePlan.model_validate_json(data["plan"])
    data["state"] = RequestState(data["state"])
    data["lease_until"] = float(data["lease_until"] or 0.0)
    return ApprovalRequest(**data)


def _operation(row: sa.Row[Any]) -> TrackedOperation:
    return TrackedOperation(**{k: row._mapping[k] for k in _OPERATION_FIELDS})


def _not_posted(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.or_(table.c.final.is_(None), table.c.final != str(Final.POSTED))


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, url: str, **engine_options: Any) -> Store:
        if url.startswith("sqlite"):
            # A busy file waits instead of failing while another connection writes.
            engine_options.setdefault("connect_args", {"timeout": 30})
            path = url.split(":///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        return cls(create_async_engine(url, **engine_options))

    async def close(self) -> None:
        await self.engine.dispose()

    async def migrate(self) -> int:
        """Create the schema, or bring an older one up to date; returns the version."""
        async with self.engine.begin() as connection:
            if self.engine.dialect.name == "postgresql":
                await connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                )
            if self.engine.dialect.name == "sqlite":
                await connection.exec_driver_sql("PRAGMA journal_mode=WAL")
            current = await self._version(connection)
            await connection.run_sync(schema.metadata.create_all)
            if current == 0:
                await connection.execute(
                    schema.meta.insert().values(
                        key="schema_version", value=str(schema.SCHEMA_VERSION)
                    )
                )
                return schema.SCHEMA_VERSION
            for step in range(current + 1, schema.SCHEMA_VERSION + 1):
                for statement in schema.MIGRATIONS.get(step, []):
                    await connection.exec_driver_sql(statement)
            if current < schema.SCHEMA_VERSION:
                await connection.execute(
                    schema.meta.update()
                    .where(schema.meta.c.key == "schema_version")
                    .values(value=str(schema.SCHEMA_VERSION))
                )
            return schema.SCHEMA_VERSION

    async def _version(self, connection: AsyncConnection) -> int:
        """The schema version recorded in the database; 0 for an empty database."""
        exists = await connection.run_sync(
            lambda sync: sa.inspect(sync).has_table(schema.meta.name)
        )
        if not exists:
            return 0
        value = (
            await connection.execute(
                sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            )
        ).scalar()
        return int(value) if value else 0

    async def ping(self) -> bool:
        try:
            async with self.engine.connect() as connection:
                await connection.execute(sa.text("SELECT 1"))
        except Exception:  # any failure means not ready; /readyz says so
            return False
        return True

    # -- approval requests ---------------------------------------------------------------------

    async def add_request(self, request: ApprovalRequest) -> None:
        """Insert a request; raise OpenRequestExistsError when its cluster has one open."""
        try:
            async with self.engine.begin() as connection:
                await connection.execute(schema.requests.insert().values(**_request_row(request)))
        except sa.exc.IntegrityError as error:
            if schema.OPEN_REQUEST_INDEX in str(error) or "cluster" in str(error):
                raise OpenRequestExistsError(request.cluster) from None
            raise

    async def delete_request(self, request_id: str) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.requests.delete().where(schema.requests.c.id == request_id)
            )

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
        *,
        held_by: str | None = None,
        **changes: Any,
    ) -> bool:
        """Move a request between states atomically; True only for the caller that moved it.

        With ``held_by``, only the replica holding the request's lease may move it.
        """
        table = schema.requests
        conditions = [table.c.id == request_id, table.c.state.in_([str(s) for s in from_states])]
        if held_by is not None:
            conditions.append(table.c.owner == held_by)
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update().where(*conditions).values(state=str(to_state), **changes)
            )
        return bool(result.rowcount == 1)

    async def update_request(self, request_id: str, **changes: Any) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.requests.update().where(schema.requests.c.id == request_id).values(**changes)
            )

    async def _requests(self, *conditions: sa.ColumnElement[bool]) -> list[ApprovalRequest]:
        table = schema.requests
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table).where(*conditions).order_by(table.c.created_at)
            )
            return [_request(r) for r in rows]

    async def expired_requests(self, now: float) -> list[ApprovalRequest]:
        table = schema.requests
        return await self._requests(
            table.c.state == str(RequestState.PENDING), table.c.expires_at <= now
        )

    async def stale_drafts(self, before: float) -> list[ApprovalRequest]:
        """Drafts whose card was never confirmed posted (a crash while asking)."""
        table = schema.requests
        return await self._requests(
            table.c.state == str(RequestState.DRAFT), table.c.created_at <= before
        )

    async def open_requests(self, cluster: str) -> list[ApprovalRequest]:
        table = schema.requests
        return await self._requests(table.c.cluster == cluster, table.c.state.in_(schema.OPEN))

    async def requests_in(self, states: Sequence[str]) -> list[ApprovalRequest]:
        table = schema.requests
        return await self._requests(table.c.state.in_([str(s) for s in states]))

    async def orphaned_requests(self, now: float) -> list[ApprovalRequest]:
        """Approved requests with no live owner: the replica acting on them died."""
        table = schema.requests
        states = [str(RequestState.APPROVED), str(RequestState.EXECUTING)]
        return await self._requests(table.c.state.in_(states), table.c.lease_until < now)

    async def claim_request(self, request_id: str, owner: str, now: float, lease: float) -> bool:
        """Take over an approved request whose lease ran out (or is already ours)."""
        table = schema.requests
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(
                    table.c.id == request_id,
                    table.c.state.in_([str(RequestState.APPROVED), str(RequestState.EXECUTING)]),
                    sa.or_(table.c.lease_until < now, table.c.owner == owner),
                )
                .values(owner=owner, lease_until=now + lease)
            )
        return bool(result.rowcount == 1)

    async def start_following(
        self, request_id: str, owner: str, operation: TrackedOperation
    ) -> bool:
        """In one transaction: executing -> running, and the operation to follow recorded."""
        table = schema.requests
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(
                    table.c.id == request_id,
                    table.c.state == str(RequestState.EXECUTING),
                    table.c.owner == owner,
                )
                .values(state=str(RequestState.RUNNING), operation=operation.name)
            )
            if result.rowcount != 1:
                return False
            await connection.execute(schema.operations.insert().values(**asdict(operation)))
        return True

    # -- leases --------------------------------------------------------------------------------

    async def renew_leases(self, owner: str, now: float, lease: float) -> None:
        """Keep this replica's work: every request and operation it holds, and named leases."""
        async with self.engine.begin() as connection:
            for table in (schema.requests, schema.operations):
                await connection.execute(
                    table.update().where(table.c.owner == owner).values(lease_until=now + lease)
                )
            await connection.execute(
                schema.leases.update()
                .where(schema.leases.c.owner == owner)
                .values(until=now + lease)
            )

    async def release_leases(self, owner: str) -> None:
        """Give up this replica's leases (at shutdown, or at start after a crash) so that any
        replica, this one included, takes the work up at once."""
        async with self.engine.begin() as connection:
            for table in (schema.requests, schema.operations):
                await connection.execute(
                    table.update().where(table.c.owner == owner).values(owner=None, lease_until=0.0)
                )
            await connection.execute(
                schema.leases.update()
                .where(schema.leases.c.owner == owner)
                .values(owner=None, until=0.0)
            )

    async def take_lease(
        self, name: str, owner: str, now: float, ttl: float, min_gap: float = 0.0
    ) -> bool:
        """Hold the named lease for ``ttl`` s, unless another replica holds it or the work last
        finished less than ``min_gap`` s ago. True for exactly one caller."""
        table = schema.leases
        async with self.engine.begin() as connection:
            exists = (
                await connection.execute(sa.select(table.c.name).where(table.c.name == name))
            ).first()
            if exists is None:
                try:
                    async with connection.begin_nested():
                        await connection.execute(table.insert().values(name=name, until=0.0))
                except sa.exc.IntegrityError:
                    pass  # another replica inserted it first; the update below decides
            result = await connection.execute(
                table.update()
                .where(
                    table.c.name == name,
                    sa.or_(table.c.until < now, table.c.owner == owner),
                    sa.or_(table.c.last_finished.is_(None), table.c.last_finished <= now - min_gap),
                )
                .values(owner=owner, until=now + ttl)
            )
        return bool(result.rowcount == 1)

    async def finish_lease(self, name: str, owner: str, now: float) -> None:
        table = schema.leases
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.owner == owner)
                .values(owner=None, until=0.0, last_finished=now)
            )

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

    async def operation_of(self, request_id: str) -> TrackedOperation | None:
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(schema.operations).where(schema.operations.c.request_id == request_id)
                )
            ).first()
        return _operation(row) if row else None

    async def active_operations(self) -> list[TrackedOperation]:
        """Operations whose final message has not been posted yet, oldest first."""
        table = schema.operations
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                sa.select(table).where(_not_posted(table)).order_by(table.c.started_at)
            )
            return [_operation(r) for r in rows]

    async def count_in_flight(self) -> int:
        table = schema.operations
        async with self.engine.connect() as connection:
            value = await connection.scalar(
                sa.select(sa.func.count()).select_from(table).where(_not_posted(table))
            )
        return int(value or 0)

    async def claim_due(self, owner: str, now: float, lease: float) -> list[TrackedOperation]:
        """Lease the operations due for a poll to this replica, so replicas never both poll.
        Only due rows are touched (``next_poll_at`` is indexed)."""
        table = schema.operations
        until = now + lease
        due = [table.c.next_poll_at <= now, _not_posted(table)]
        async with self.engine.connect() as connection:
            any_due = (
                await connection.execute(sa.select(table.c.name).where(*due).limit(1))
            ).first()
        if any_due is None:
            return []  # a read only: nothing is written while nothing is due
        async with self.engine.begin() as connection:
            await connection.execute(
                table.update()
                .where(
                    *due,
                    sa.or_(
                        table.c.owner.is_(None), table.c.owner == owner, table.c.lease_until < now
                    ),
                )
                .values(owner=owner, lease_until=until)
            )
            rows = await connection.execute(
                sa.select(table).where(*due, table.c.owner == owner, table.c.lease_until == until)
            )
            return [_operation(r) for r in rows]

    async def update_operation(self, name: str, **changes: Any) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(
                schema.operations.update().where(schema.operations.c.name == name).values(**changes)
            )

    async def claim_final(self, name: str, **changes: Any) -> bool:
        """Take the right to post an operation's final message; True for exactly one caller."""
        table = schema.operations
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(table.c.name == name, table.c.final.is_(None))
                .values(final=str(Final.CLAIMED), **changes)
            )
        return bool(result.rowcount == 1)

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

    # -- sweep reports -------------------------------------------------------------------------

    async def save_report(self, at: float, report: dict[str, Any]) -> None:
        table = schema.sweep_reports
        text = json.dumps(report, separators=(",", ":"))
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update().where(table.c.name == "latest").values(at=at, report=text)
            )
            if result.rowcount == 0:
                try:
                    async with connection.begin_nested():
                        await connection.execute(
                            table.insert().values(name="latest", at=at, report=text)
                        )
                except sa.exc.IntegrityError:
                    await connection.execute(
                        table.update().where(table.c.name == "latest").values(at=at, report=text)
                    )

    async def latest_report(self) -> tuple[float, dict[str, Any]] | None:
        table = schema.sweep_reports
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.select(table.c.at, table.c.report).where(table.c.name == "latest")
                )
            ).first()
        if row is None:
            return None
        return float(row.at), dict(json.loads(row.report))


def details(**values: Any) -> str:
    """Audit details as compact JSON."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
