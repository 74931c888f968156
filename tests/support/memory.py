"""In-memory implementations of the core's ports, for unit tests that run in milliseconds.

They keep the real adapters' rules (a conditional update wins once, one open request per
cluster, compare-and-set idle records, leases that run out), and hand out copies, as a
database would; ``tests/test_store.py`` runs the same contract against them and against
SQLite and PostgreSQL.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, Unpack

from handlers import keeping
from handlers.domain.errors import NotFoundError, SlurmUnreadableError
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName, Target
from handlers.domain.operations import Operation, SlurmJob, SlurmNode
from handlers.domain.pools import ClusterState
from handlers.entities import (
    OPEN_STATES,
    ApprovalRequest,
    AuditEntry,
    Final,
    KeptSpec,
    OperationChanges,
    RequestChanges,
    RequestState,
    Submission,
    TrackedOperation,
)
from handlers.keeping import RecordKind
from handlers.owed.model import Owed
from handlers.policy import Policy, Role
from handlers.ports import OpenRequestExistsError
from handlers.spend.runs import SpendRun, by_day
from handlers.spend.savings import ChangeDone, SavedSum, Saving, saved_sums
from handlers.spend.totals import PLACEMENT, Priced, Spend, Sums
from handlers.sweep.rules import IdleRecord
from handlers.sweep.state import IDLE_RECORD
from tests.support.memory_owed import MemoryOwed

R = TypeVar("R")


@dataclass
class MemoryStore(MemoryOwed):
    """Requests, tracked operations, the audit log, named leases and the last report."""

    requests: dict[str, ApprovalRequest] = field(default_factory=dict)
    operations: dict[str, TrackedOperation] = field(default_factory=dict)
    entries: list[AuditEntry] = field(default_factory=list)
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    kept: dict[str, KeptSpec] = field(default_factory=dict)
    reports: dict[str, tuple[float, str]] = field(default_factory=dict)
    submissions: dict[str, Submission] = field(default_factory=dict)
    spend: dict[tuple[str, str, float], SpendRun] = field(default_factory=dict)
    done: dict[str, ChangeDone] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- requests ------------------------------------------------------------------------------

    async def add_request(self, request: ApprovalRequest, owe: Sequence[Owed] = ()) -> None:
        self._reach()
        cluster = request.plan.cluster
        if request.state in OPEN_STATES and any(
            r.plan.cluster == cluster and r.state in OPEN_STATES for r in self.requests.values()
        ):
            raise OpenRequestExistsError(cluster)
        self.requests[request.id] = copy.deepcopy(request)
        self.owe_now(owe)

    async def delete_request(self, request_id: str) -> None:
        self._reach()
        self.requests.pop(request_id, None)

    async def requests_since(self, requester: str, since: float) -> list[ApprovalRequest]:
        self._reach()
        return self._where(lambda r: r.requester == requester and r.created_at >= since)

    async def asked_in(
        self, channel: str, origin: str, since: float, until: float
    ) -> list[tuple[str, RequestState]]:
        self._reach()
        asked = self._where(
            lambda r: r.channel == channel and r.origin == origin and since <= r.created_at < until
        )
        return [(r.plan.cluster, r.state) for r in asked]

    # -- the spend ledger ----------------------------------------------------------------------

    async def record_spend(self, runs: Sequence[SpendRun]) -> None:
        self._reach()
        for run in runs:  # cut at UTC midnights, as the databases keep them
            for piece in by_day(run):
                self.spend[(piece.cluster, piece.pool, piece.start)] = piece

    async def first_spend(self) -> float | None:
        self._reach()
        return min((run.start for run in self.spend.values()), default=None)

    async def forget_spend(self, before: float) -> int:
        self._reach()
        gone = [key for key, run in self.spend.items() if run.end < before]
        for key in gone:
            del self.spend[key]
        return len(gone)

    async def spend_between(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SpendRun]:
        self._reach()
        found = [
            r
            for r in self.spend.values()
            if r.end > since and r.start < until and cluster in (None, r.cluster)
        ]
        return sorted(found, key=lambda r: (r.start, r.cluster, r.pool))

    async def spend_by_cluster(
        self, since: float, until: float, clusters: Collection[str] | None = None
    ) -> list[Priced]:
        sums, _ = await self.spend_sums(since, until, columns=("cluster",))
        found: dict[str, Spend] = {}
        first: dict[str, float] = {}
        for row in sums:
            if clusters is not None and row.cluster not in clusters:
                continue
            found.setdefault(row.cluster, Spend()).add_sums(row)
            first[row.cluster] = min(first.get(row.cluster, row.first), row.first)
        return [
            Priced(c, s.cost, s.idle, s.node_hours, s.unpriced, first[c]) for c, s in found.items()
        ]

    async def spend_sums(
        self,
        since: float,
        until: float,
        *,
        cluster: str | None = None,
        columns: Sequence[str] = PLACEMENT,
        daily: bool = False,
        only: Mapping[str, Sequence[str]] | None = None,  # every value kept here
    ) -> tuple[list[Sums], list[SpendRun]]:
        self._reach()
        found: dict[tuple[Any, ...], float] = {}
        last: dict[tuple[Any, ...], float] = {}
        first: dict[tuple[Any, ...], float] = {}
        spanning = []
        for run in await self.spend_between(since, until):
            if cluster is not None and cluster not in (run.cluster, run.cluster.rsplit("/")[-1]):
                continue
            start, end = max(run.start, since), min(run.end, until)
            day = start - start % 86400.0
            if daily and end > day + 86400.0:
                spanning.append(run)
                continue
            placed = {name: getattr(run, name) for name in columns}
            key = (tuple(sorted(placed.items())), run.idle, run.node_hour, day if daily else None)
            found[key] = found.get(key, 0.0) + run.nodes * (end - start)
            last[key] = max(last.get(key, run.start), run.start)
            first[key] = min(first.get(key, run.start), run.start)
        sums = [
            Sums(
                **{"cluster": "", "pool": "", "target": "", "labels": (), **dict(placed)},
                idle=idle,
                node_hour=price,
                node_hours=seconds / 3600.0,
                day=day,
                last=last[placed, idle, price, day],
                first=first[placed, idle, price, day],
            )
            for (placed, idle, price, day), seconds in found.items()
        ]
        return sums, spanning

    async def spend_watched(self, since: float, until: float) -> set[float]:
        self._reach()
        days = set()
        for run in await self.spend_between(since, until):
            start, end = max(run.start, since), min(run.end, until)
            day = start - start % 86400.0
            while day < end:
                days.add(day)
                day += 86400.0
        return days

    async def keep_changes_done(self, done: Sequence[ChangeDone]) -> None:
        self._reach()
        for change in done:
            self.done.setdefault(change.request_id, change)

    async def changes_unkept(self, margin: float) -> list[str]:
        self._reach()
        newest = max((c.finished_at for c in self.done.values()), default=None)
        since = 0.0 if newest is None else newest - margin
        kept = {c.request_id for c in self.done.values() if c.finished_at >= since}
        ended = self._ended(str(RequestState.SUCCEEDED), since)
        return [request_id for request_id in ended if request_id not in kept]

    def _savings_between(self, since: float, until: float) -> list[Saving]:
        changes = sorted(
            (c for c in self.done.values() if c.finished_at < until),
            key=lambda c: (c.finished_at, c.request_id),
        )
        found, following = [], {}
        for change in reversed(changes):
            end = following.get(change.cluster)
            following[change.cluster] = change.finished_at
            if (
                change.cause is None
                or change.per_hour is None
                or (end is not None and end <= since)
            ):
                continue
            found.append(
                Saving(
                    change.cluster,
                    change.cause,
                    change.finished_at,
                    end,
                    change.per_hour,
                    change.request_id,
                )
            )
        return found[::-1]

    async def savings_sums(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SavedSum]:
        self._reach()
        found = self._savings_between(since, until)
        if cluster is not None:
            found = [s for s in found if cluster in (s.cluster, s.cluster.rsplit("/", 1)[-1])]
        return saved_sums(found, since, until)

    # -- form submissions ----------------------------------------------------------------------

    async def receive_submission(self, submission: Submission) -> bool:
        self._reach()
        if submission.key in self.submissions:
            return False
        self.submissions[submission.key] = replace(submission)
        return True

    async def submission_made(self, key: str) -> None:
        self._reach()
        if key in self.submissions:
            self.submissions[key].made = True

    async def drop_submission(self, key: str) -> None:
        self._reach()
        self.submissions.pop(key, None)

    async def unfinished_submissions(self, owner: str, before: float) -> list[Submission]:
        self._reach()
        return [
            replace(s)
            for s in self.submissions.values()
            if not s.made and (s.owner == owner or s.received_at < before)
        ]

    async def forget_submissions(self, before: float) -> None:
        self._reach()
        for key in [k for k, s in self.submissions.items() if s.made and s.received_at < before]:
            del self.submissions[key]

    async def keep_spec(self, kept: KeptSpec) -> None:
        self._reach()
        self.kept[kept.cluster] = kept

    async def deleted_specs(self) -> list[KeptSpec]:
        self._reach()
        done = [
            k
            for k in self.kept.values()
            if (r := self.requests.get(k.request_id)) and r.state == RequestState.SUCCEEDED
        ]
        return sorted(done, key=lambda k: -k.kept_at)

    async def get_request(self, request_id: str) -> ApprovalRequest | None:
        self._reach()
        found = self.requests.get(request_id)
        return copy.deepcopy(found) if found else None

    async def get_requests(self, request_ids: Sequence[str]) -> dict[str, ApprovalRequest]:
        self._reach()
        return {i: copy.deepcopy(self.requests[i]) for i in request_ids if i in self.requests}

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
        self._reach()
        request = self.requests.get(request_id)
        if request is None or request.state not in from_states:
            return False
        self.requests[request_id] = replace(request, state=to_state, **changes)
        self.owe_now(owe)
        if audit is not None:
            self.entries.append(replace(audit, id=next(self._ids)))
        return True

    async def update_request(self, request_id: str, **changes: Unpack[RequestChanges]) -> None:
        self._reach()
        if request_id in self.requests:
            self.requests[request_id] = replace(self.requests[request_id], **changes)

    def _where(self, test: Any) -> list[ApprovalRequest]:
        found = [copy.deepcopy(r) for r in self.requests.values() if test(r)]
        return sorted(found, key=lambda r: r.created_at)

    async def expired_requests(self, now: float) -> list[ApprovalRequest]:
        self._reach()
        return self._where(lambda r: r.state == RequestState.PENDING and r.expires_at <= now)

    async def stale_drafts(self, before: float) -> list[ApprovalRequest]:
        self._reach()
        return self._where(lambda r: r.state == RequestState.DRAFT and r.created_at <= before)

    async def open_requests(self, cluster: str) -> list[ApprovalRequest]:
        self._reach()
        return self._where(lambda r: r.plan.cluster == cluster and r.state in OPEN_STATES)

    async def requests_in(self, states: Sequence[str]) -> list[ApprovalRequest]:
        self._reach()
        return self._where(lambda r: str(r.state) in {str(s) for s in states})

    def _ended(self, state: str, since: float) -> list[str]:
        found = self._where(
            lambda r: str(r.state) == str(state) and (r.finished_at or -1.0) >= since
        )
        return [r.id for r in sorted(found, key=lambda r: (r.finished_at or 0.0, r.id))]

    async def start_following(
        self, request_id: str, operation: TrackedOperation, owe: Sequence[Owed] = ()
    ) -> bool:
        self._reach()
        request = self.requests.get(request_id)
        if request is None or request.state != RequestState.EXECUTING:
            return False
        self.requests[request_id] = replace(
            request, state=RequestState.RUNNING, operation=operation.name
        )
        self.operations[operation.name] = copy.deepcopy(operation)
        self.owe_now(owe)
        return True

    async def audit(self, entry: AuditEntry) -> None:
        self._reach()
        self.entries.append(replace(entry, id=next(self._ids)))

    async def audit_log(
        self,
        cluster: str | None = None,
        limit: int = 20,
        *,
        actor: str | None = None,
        after: float | None = None,
        before: float | None = None,
    ) -> list[AuditEntry]:
        self._reach()
        found = [
            e
            for e in self.entries
            if (cluster is None or e.cluster == cluster or e.cluster.endswith(f"/{cluster}"))
            and (actor is None or e.actor == actor)
            and (after is None or e.at >= after)
            and (before is None or e.at < before)
        ]
        return sorted(found, key=lambda e: (e.at, e.id or 0), reverse=True)[:limit]

    # -- tracked operations --------------------------------------------------------------------

    async def add_operation(self, operation: TrackedOperation, owe: Sequence[Owed] = ()) -> None:
        self._reach()
        self.operations[operation.name] = copy.deepcopy(operation)
        self.owe_now(owe)

    async def get_operation(self, name: str) -> TrackedOperation | None:
        self._reach()
        found = self.operations.get(name)
        return copy.deepcopy(found) if found else None

    async def operation_of(self, request_id: str) -> TrackedOperation | None:
        self._reach()
        found = [o for o in self.operations.values() if o.request_id == request_id]
        return copy.deepcopy(found[0]) if found else None

    def _unposted(self) -> list[TrackedOperation]:
        found = [o for o in self.operations.values() if o.final != Final.POSTED]
        return sorted(found, key=lambda o: o.started_at)

    async def active_operations(self) -> list[TrackedOperation]:
        self._reach()
        return [copy.deepcopy(o) for o in self._unposted()]

    async def count_in_flight(self) -> int:
        self._reach()
        return len(self._unposted())

    async def update_operation(self, name: str, **changes: Unpack[OperationChanges]) -> None:
        self._reach()
        if name in self.operations:
            self.operations[name] = replace(self.operations[name], **changes)

    # -- leases and reports --------------------------------------------------------------------

    async def renew_leases(self, owner: str, now: float, lease: float) -> None:
        self._reach()
        for row in self.leases.values():
            if row["owner"] == owner:
                row["until"] = now + lease

    async def release_leases(self, owner: str) -> None:
        self._reach()
        for held in [*self.requests.values(), *self.owed.values()]:
            if held.owner == owner:
                held.owner, held.lease_until = None, 0.0
        for row in self.leases.values():
            if row["owner"] == owner:
                row["owner"], row["until"] = None, 0.0

    async def take_lease(
        self, name: str, owner: str, now: float, ttl: float, min_gap: float = 0.0
    ) -> bool:
        self._reach()
        row = self.leases.setdefault(name, {"owner": None, "until": 0.0, "last_finished": None})
        if not (row["until"] < now or row["owner"] == owner):
            return False
        if row["last_finished"] is not None and row["last_finished"] > now - min_gap:
            return False
        row["owner"], row["until"] = owner, now + ttl
        return True

    async def finish_lease(self, name: str, owner: str, now: float) -> None:
        self._reach()
        row = self.leases.get(name)
        if row is not None and row["owner"] == owner:
            row.update(owner=None, until=0.0, last_finished=now)

    async def save_report(self, at: float, report: str, *, kind: str = "latest") -> None:
        self._reach()
        self.reports[kind] = (at, report)

    async def latest_report(self, *, kind: str = "latest") -> tuple[float, str] | None:
        self._reach()
        return self.reports.get(kind)


class MemoryKept(Generic[R]):
    """One kind of record by compare-and-set, as ``bot.store.records.KeptRecords``."""

    def __init__(self, kind: RecordKind[R]) -> None:
        self.kind = kind
        self.rows: dict[str, tuple[R, int]] = {}

    async def get(self, cluster: str) -> tuple[R, int]:
        return self.rows.get(cluster, (self.kind.empty(cluster), 0))

    async def all(self) -> list[tuple[str, R]]:
        return [(cluster, record) for cluster, (record, _) in self.rows.items()]

    async def put(self, cluster: str, record: R, version: int, now: float) -> bool:
        if self.rows.get(cluster, (None, 0))[1] != version:
            return False
        self.rows[cluster] = (record, version + 1)
        return True

    async def get_many(self, clusters: Sequence[str]) -> dict[str, tuple[R, int]]:
        return {c: await self.get(c) for c in clusters}

    async def put_many(self, items: Sequence[tuple[str, R, int]], now: float) -> set[str]:
        return {c for c, r, v in items if not await self.put(c, r, v, now)}

    async def delete(self, cluster: str) -> None:
        self.rows.pop(cluster, None)


class MemoryIdleRecords(MemoryKept[IdleRecord]):
    """Idle records by compare-and-set, as ``bot.store.IdleRecords``."""

    def __init__(self) -> None:
        super().__init__(IDLE_RECORD)


class MemoryKeeper:
    """Every other capability's records, one ``MemoryKept`` per kind (``StoreKeeper``)."""

    def __init__(self) -> None:
        self.kept: dict[str, MemoryKept[Any]] = {}

    def of(self, kind: RecordKind[R]) -> keeping.Kept[R]:
        return self.kept.setdefault(kind.owner, MemoryKept(kind))


@dataclass
class Listing:
    target: Target
    clusters: list[Cluster] = field(default_factory=list)
    error: Any = None
    unreadable: list[Any] = field(default_factory=list)


@dataclass
class Kept:
    target: Target
    kept: list[Any] = field(default_factory=list)
    error: Any = None
    unreadable: list[Any] = field(default_factory=list)


@dataclass
class FakeControlPlane:
    """Clusters as models; a change starts an operation that ends when a test says so.

    ``patches`` and ``deletes`` count what was sent, as the simulator's request log does."""

    clusters: dict[str, Cluster] = field(default_factory=dict)
    operations: dict[str, Operation] = field(default_factory=dict)
    patches: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    creates: list[str] = field(default_factory=list)
    started: dict[str, tuple[str, str]] = field(default_factory=dict)  # operation: cluster, kind
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(self, document: dict[str, Any]) -> Cluster:
        cluster = Cluster.model_validate(document)
        self.clusters[cluster.name or ""] = cluster
        return cluster

    async def get_cluster(self, name: str | ClusterName, deadline: float | None = None) -> Cluster:
        found = self.clusters.get(str(name))
        if found is None:
            raise NotFoundError(f"cluster {name} not found")
        return found.model_copy(deep=True)

    async def list_targets(
        self, targets: Iterable[Target], deadline: float | None = None
    ) -> Sequence[Listing]:
        return [
            Listing(t, [c.model_copy(deep=True) for c in self.clusters.values() if c.target == t])
            for t in targets
        ]

    async def list_kept(
        self,
        targets: Iterable[Target],
        keep: Callable[[Cluster], Any],
        deadline: float | None = None,
    ) -> Sequence[Kept]:
        return [
            Kept(listing.target, [keep(c) for c in listing.clusters])
            for listing in await self.list_targets(targets, deadline)
        ]

    def _start(self, cluster: str, kind: str = "update") -> Operation:
        target = ClusterName.parse(cluster).target
        name = f"{target.parent}/operations/{next(self._ids)}"
        self.started[name] = (cluster, kind)
        operation = Operation(name=name, metadata={"progressMessage": "starting"})
        self.operations[name] = operation
        return operation.model_copy()

    async def update_cluster(self, cluster: Cluster, update_mask: Sequence[str]) -> Operation:
        name = cluster.name or ""
        self.patches.append((name, tuple(update_mask)))
        self.clusters[name] = cluster.model_copy(deep=True)
        return self._start(name)

    async def delete_cluster(self, name: str | ClusterName) -> Operation:
        self.deletes.append(str(name))
        return self._start(str(name), "delete")

    async def create_cluster(self, target: Target, cluster_id: str, cluster: Cluster) -> Operation:
        name = f"{target.parent}/modelDevelopmentClusters/{cluster_id}"
        self.creates.append(name)
        document = {**cluster.to_api(), "name": name, "clusterStatus": {"state": "PROVISIONING"}}
        self.clusters[name] = Cluster.model_validate(document)
        return self._start(name, "create")

    async def get_operation(self, name: str) -> Operation:
        return self.operations[name].model_copy()

    def finish(self, name: str, error: dict[str, Any] | None = None) -> None:
        """End an operation, with an error (a google.rpc.Status) or without."""
        ended = (
            {"name": name, "done": True, "error": error} if error else {"name": name, "done": True}
        )
        self.operations[name] = Operation.model_validate(ended)
        cluster, kind = self.started.get(name, ("", "update"))
        if error is None and kind == "delete":
            self.clusters.pop(cluster, None)
        if error is None and kind == "create" and cluster in self.clusters:
            status = self.clusters[cluster].cluster_status
            if status is not None:
                status.state = ClusterState.RUNNING

    def state(self, name: str) -> ClusterState | str | None:
        status = self.clusters[name].cluster_status
        return status.state if status else None


@dataclass
class FakeActivity:
    """What Slurm says per cluster; a cluster missing from ``queues`` is unreadable."""

    queues: dict[str, tuple[int, int]] = field(default_factory=dict)  # running, pending
    busy_nodes: dict[str, int] = field(default_factory=dict)

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        if cluster not in self.queues:
            raise SlurmUnreadableError("Slurm did not answer")
        running, pending = self.queues[cluster]
        return [_job(i, "RUNNING") for i in range(running)] + [
            _job(running + i, "PENDING") for i in range(pending)
        ]

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        if cluster not in self.queues:
            raise SlurmUnreadableError("Slurm did not answer")
        busy = self.busy_nodes.get(cluster, 0)
        return [SlurmNode(f"n{i}", frozenset({"ALLOCATED"}), "") for i in range(busy)]


def _job(index: int, state: str) -> SlurmJob:
    return SlurmJob(
        job_id=index + 1,
        name=f"job-{index}",
        user="researcher",
        account="default",
        partition="default",
        states=frozenset({state}),
        reason="None" if state == "RUNNING" else "Priority",
        priority=1,
        qos="normal",
        node_count=1,
        nodes="",
        submitted=None,
        started=None,
    )


@dataclass
class PolicyRoles:
    """Roles straight from the policy (no user groups)."""

    policy: Policy

    async def of(self, user: str) -> Role:
        return self.policy.role_of(user, frozenset())

    def known(self, user: str) -> Role | None:
        return self.policy.role_of(user, frozenset())
