"""Persistence for requests, tracked operations, leases and the audit log (SQLAlchemy Core).

Every state change that a click, a retry or a second replica could repeat is one conditional
UPDATE, so it happens exactly once: ``transition`` returns whether this caller won. Work a
replica does on a request or an operation is covered by a lease that the replica renews
while it lives; a lease that runs out lets another replica take the work over.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Unpack
from urllib.parse import urlparse

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.store import schema
from bot.store.digests import DigestRows
from bot.store.kept import KeptRows
from bot.store.leases import LeaseRows
from bot.store.locks import MIGRATION_LOCK, one_at_a_time
from bot.store.migrate import upgrade_to_head
from bot.store.operations import OperationRows
from bot.store.owed import OwedRows, insert_owed
from bot.store.releases import ReleaseRows
from bot.store.saved import SavedRows
from bot.store.schedules import ScheduleRows
from bot.store.slurm_versions import SlurmVersionRows
from bot.store.spend import SpendRows
from bot.store.submissions import SubmissionRows
from handlers.capabilities import REGISTRY
from handlers.changes.plan import ChangePlan
from handlers.entities import (
    ApprovalRequest,
    AuditEntry,
    Origin,
    RequestChanges,
    RequestState,
    TrackedOperation,
)
from handlers.owed.model import Owed
from handlers.ports import OpenRequestExistsError

_REQUEST_FIELDS = [f.name for f in fields(ApprovalRequest)]
# PostgreSQL connections a replica keeps open, and at most: a fleet's night runs a hundred
# schedule checks, changes and polls at once, and a connection opened past the kept ones is
# closed again after each use (a new login, and its prepared statements lost); 40 at most
# leaves room for two replicas and the tools under PostgreSQL's default of 100. On SQLite
# each connection is a thread of its own with its own page and statement caches: one opened
# past the kept ones and closed after use starts and stops a thread on the event loop's time
# (ten kept: acks while following 1,000 operations 4.6x a bare app's p99 at 100/s), and each
# kept one holds about 5 MB at SQLite's and Python's default caches once a sweep of 10,000
# clusters has used it (32 kept: 306 MB after 24 sweeps, goal 200 MB). So 16 are kept with
# small caches (the file's pages are in the operating system's cache anyway)
POOL = {"pool_size": 30, "max_overflow": 10, "pool_timeout": 60.0}
SQLITE_POOL = {"pool_size": 16, "max_overflow": 24, "pool_timeout": 60.0}
SQLITE_CACHE_KB = 512  # each connection's page cache (SQLite's default is 2,000 KB)
SQLITE_STATEMENTS = 32  # prepared statements each connection keeps (Python's default: 128)


Plans = Callable[[str | bytes], ChangePlan[Any]]  # a stored plan read as its kind's


def _small_page_cache(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KB}")
    cursor.close()


def _request_row(request: ApprovalRequest) -> dict[str, Any]:
    row = asdict(request)
    row["plan"] = request.plan.model_dump_json()
    row["kind"] = str(request.plan.kind)
    row["cluster"] = request.plan.cluster
    row["state"] = str(request.state)
    return row


def _request(row: sa.Row[Any], plans: Plans) -> ApprovalRequest:
    mapping = row._mapping
    data = {name: mapping[schema.requests.c[name]] for name in _REQUEST_FIELDS}
    data["plan"] = plans(data["plan"])
    data["state"] = RequestState(data["state"])
    data["origin"] = Origin(data["origin"])
    data["lease_until"] = float(data["lease_until"] or 0.0)
    return ApprovalRequest(**data)


def shown(url: str) -> str:
    """The database a sweep used, without credentials: a file path, or host and name."""
    if url.startswith("sqlite"):
        return url.split(":///", 1)[-1]
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.hostname or ''}{parsed.path}"


class Store(
    OperationRows,
    LeaseRows,
    KeptRows,
    ReleaseRows,
    SlurmVersionRows,
    SubmissionRows,
    SpendRows,
    SavedRows,
    ScheduleRows,
    DigestRows,
    OwedRows,
):
    def __init__(self, engine: AsyncEngine, plans: Plans = REGISTRY.read_plan) -> None:
        self.engine = engine
        # reads of one statement each: no transaction begun and rolled back around them
        self.reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.plans = plans  # reads a stored plan as its kind's: every capability's kinds

    @classmethod
    def from_url(cls, url: str, plans: Plans = REGISTRY.read_plan, **engine_options: Any) -> Store:
        # a pool wide enough for the commands let through at once (handlers/gate.py), the
        # engine's items and the periodic jobs together; a burst beyond it waits its turn
        # (a minute at most) instead of failing
        sqlite = url.startswith("sqlite")
        for option, value in (SQLITE_POOL if sqlite else POOL).items():
            engine_options.setdefault(option, value)
        if sqlite:
            # A busy file waits instead of failing while another connection writes.
            engine_options.setdefault(
                "connect_args", {"timeout": 30, "cached_statements": SQLITE_STATEMENTS}
            )
            if url.startswith("sqlite+aiosqlite"):
                from bot.store.sqlite_calls import one_call_dbapi

                engine_options.setdefault("module", one_call_dbapi())
            path = url.split(":///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, **engine_options)
        if sqlite:
            sa.event.listen(engine.sync_engine, "connect", _small_page_cache)
        return cls(engine, plans)

    async def close(self) -> None:
        await self.engine.dispose()

    async def migrate(self) -> str:
        """Bring the schema to the newest revision (creating it in an empty database); returns
        that revision. Replicas starting together migrate one at a time."""
        async with self.engine.begin() as connection:
            await one_at_a_time(connection, MIGRATION_LOCK)
            if self.engine.dialect.name == "sqlite":
                await connection.exec_driver_sql("PRAGMA journal_mode=WAL")
            return await connection.run_sync(upgrade_to_head)

    async def ping(self) -> bool:
        try:
            async with self.engine.connect() as connection:
                await connection.execute(sa.text("SELECT 1"))
        except Exception:  # any failure means not ready; /readyz says so
            return False
        return True

    # -- approval requests ---------------------------------------------------------------------

    async def add_request(self, request: ApprovalRequest, owe: Sequence[Owed] = ()) -> None:
        """Insert a request, and what it makes owed with it; raise OpenRequestExistsError
        when its cluster has one open."""
        try:
            async with self.engine.begin() as connection:
                await connection.execute(schema.requests.insert().values(**_request_row(request)))
                await insert_owed(connection, owe)
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
        return _request(row, self.plans) if row else None

    async def get_requests(self, request_ids: Sequence[str]) -> dict[str, ApprovalRequest]:
        wanted = list(dict.fromkeys(request_ids))
        found: dict[str, ApprovalRequest] = {}
        async with self.engine.connect() as connection:
            for start in range(0, len(wanted), 500):  # within every database's bound
                chunk = wanted[start : start + 500]
                rows = await connection.execute(
                    sa.select(schema.requests).where(schema.requests.c.id.in_(chunk))
                )
                found.update((row.id, _request(row, self.plans)) for row in rows)
        return found

    async def transition(
        self,
        request_id: str,
        from_states: Sequence[RequestState],
        to_state: RequestState,
        *,
        owe: Sequence[Owed] = (),
        audit: AuditEntry | None = None,
        **changes: Unpack[RequestChanges],
    ) -> bool:
        """Move a request between states atomically; True only for the caller that moved it,
        and only then are the ``owe`` items and the ``audit`` entry recorded, in the same
        transaction."""
        table = schema.requests
        conditions = [table.c.id == request_id, table.c.state.in_([str(s) for s in from_states])]
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update().where(*conditions).values(state=str(to_state), **changes)
            )
            won = bool(result.rowcount == 1)
            if won:
                await insert_owed(connection, owe)
                if audit is not None:
                    await connection.execute(schema.audit.insert().values(**_audit_row(audit)))
        return won

    async def update_request(self, request_id: str, **changes: Unpack[RequestChanges]) -> None:
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
            return [_request(r, self.plans) for r in rows]

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

    async def requests_since(self, requester: str, since: float) -> list[ApprovalRequest]:
        table = schema.requests
        return await self._requests(table.c.requester == requester, table.c.created_at >= since)

    async def asked_in(
        self, channel: str, origin: str, since: float, until: float
    ) -> list[tuple[str, RequestState]]:
        table = schema.requests
        query = (
            sa.select(table.c.cluster, table.c.state)
            .where(
                table.c.created_at >= since,
                table.c.created_at < until,
                table.c.channel == channel,
                table.c.origin == origin,
            )
            .order_by(table.c.created_at)
        )
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [(str(cluster), RequestState(state)) for cluster, state in rows]

    async def start_following(
        self, request_id: str, operation: TrackedOperation, owe: Sequence[Owed] = ()
    ) -> bool:
        """In one transaction: executing -> running, the operation to follow recorded, and
        its following owed."""
        table = schema.requests
        async with self.engine.begin() as connection:
            result = await connection.execute(
                table.update()
                .where(
                    table.c.id == request_id,
                    table.c.state == str(RequestState.EXECUTING),
                )
                .values(state=str(RequestState.RUNNING), operation=operation.name)
            )
            if result.rowcount != 1:
                return False
            await connection.execute(schema.operations.insert().values(**asdict(operation)))
            await insert_owed(connection, owe)
        return True

    # -- audit ---------------------------------------------------------------------------------

    async def audit(self, entry: AuditEntry) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(schema.audit.insert().values(**_audit_row(entry)))

    async def audit_log(
        self,
        cluster: str | None = None,
        limit: int = 20,
        *,
        actor: str | None = None,
        after: float | None = None,
        before: float | None = None,
    ) -> list[AuditEntry]:
        table = schema.audit
        query = sa.select(table).order_by(table.c.at.desc(), table.c.id.desc()).limit(limit)
        if cluster is not None:
            query = query.where(
                sa.or_(table.c.cluster == cluster, table.c.cluster.endswith(f"/{cluster}"))
            )
        if actor is not None:
            query = query.where(table.c.actor == actor)
        if after is not None:
            query = query.where(table.c.at >= after)
        if before is not None:
            query = query.where(table.c.at < before)
        async with self.engine.connect() as connection:
            rows = await connection.execute(query)
            return [AuditEntry(**dict(r._mapping)) for r in rows]


def details(**values: Any) -> str:
    """Audit details as compact JSON."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)


def _audit_row(entry: AuditEntry) -> dict[str, Any]:
    row = asdict(entry)
    row.pop("id")
    return row
