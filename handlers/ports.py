"""What the core needs from the world, as Protocols; the adapters in ``bot/`` implement them.

The core may use the control plane's resource models and typed errors (``handlers.domain.models``,
``handlers.domain.facts`` and ``handlers.domain.errors``), which load no adapter library; everything
else comes in through these ports, built once in the composition root (``bot/app.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, Unpack, runtime_checkable

from handlers.domain.facts import ClusterFacts
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName, Target
from handlers.domain.operations import Operation, Share, SlurmJob, SlurmNode, SlurmReservation
from handlers.entities import (
    ApprovalRequest,
    AuditEntry,
    KeptSpec,
    OperationChanges,
    Release,
    ReleaseChanges,
    ReleaseState,
    RequestChanges,
    RequestState,
    Submission,
    TrackedOperation,
)
from handlers.keeping import Kept
from handlers.owed.model import Owed
from handlers.policy import Role
from handlers.sweep.gpus import GpuUse
from handlers.sweep.rules import IdleRecord

Clock = Callable[[], float]
CrashPoint = Callable[[str], None]


def no_crash(point: str) -> None:
    """The default crash hook: a named step passes by."""


class OpenRequestExistsError(Exception):
    """The cluster already has a request under way: a ``RequestStore`` refuses a second one
    (across replicas too), and the core answers that one must be decided first."""


class Listing(Protocol):
    """One target's clusters, or why they could not be listed (``TargetListing``)."""

    @property
    def target(self) -> Target: ...
    @property
    def clusters(self) -> list[Cluster]: ...
    @property
    def error(self) -> Any: ...
    @property
    def unreadable(self) -> Sequence[Any]: ...


K_co = TypeVar("K_co", covariant=True)


class TargetKept(Protocol[K_co]):
    """What was kept of each cluster of one target (``KeptListing`` in the client)."""

    @property
    def target(self) -> Target: ...
    @property
    def kept(self) -> Sequence[K_co]: ...
    @property
    def error(self) -> Any: ...
    @property
    def unreadable(self) -> Sequence[Any]: ...


K = TypeVar("K")


class ControlPlane(Protocol):
    async def get_cluster(
        self, name: str | ClusterName, deadline: float | None = None
    ) -> Cluster: ...

    async def list_targets(
        self, targets: Iterable[Target], deadline: float | None = None
    ) -> Sequence[Listing]: ...

    async def list_kept(
        self,
        targets: Iterable[Target],
        keep: Callable[[ClusterFacts], K],
        deadline: float | None = None,
    ) -> Sequence[TargetKept[K]]:
        """As ``list_targets``, keeping only ``keep(cluster)`` of each, page by page; the
        cluster may be read only as far as ``ClusterFacts`` goes."""
        ...

    async def update_cluster(self, cluster: Cluster, update_mask: Sequence[str]) -> Operation: ...

    async def delete_cluster(self, name: str | ClusterName) -> Operation: ...

    async def create_cluster(
        self, target: Target, cluster_id: str, cluster: Cluster
    ) -> Operation: ...

    async def get_operation(self, name: str) -> Operation: ...


class People(Protocol):
    """Who is a person on the chat platform, and how one is named in typed words. The
    platform's adapter knows its ids and its mention syntax; the core knows neither."""

    def is_person(self, principal: str) -> bool:
        """One person, who can be mentioned and told privately (not a pipeline's identity)."""
        ...

    def named(self, word: str) -> str | None:
        """The person a typed word names (a mention, or their id), or None."""
        ...

    def is_group(self, member: str) -> bool:
        """A policy member that names a group of people rather than one person."""
        ...


class RoleSource(Protocol):
    async def of(self, user: str) -> Role:
        """The user's role from the policy, with the groups they belong to resolved."""
        ...

    def known(self, user: str) -> Role | None:
        """The role when it is known without asking anyone (no groups in the policy, or
        their members still fresh); None when only ``of`` can tell."""
        ...


class ActivityReader(Protocol):
    """A cluster's Slurm, read through the control plane's proxy; each raises
    ``SlurmUnreadableError`` with the reason."""

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        """Every job slurmrestd lists to the bot (running, pending, ending)."""
        ...

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        """Every Slurm node, with its state and reason."""
        ...

    async def shares(self, cluster: str) -> list[Share]:
        """The fair-share tree: accounts and their users."""
        ...

    async def reservations(self, cluster: str) -> list[SlurmReservation]:
        """Slurm's reservations: maintenance windows, and those jobs wait for."""
        ...


class GpuSignal(Protocol):
    """GPU utilisation of a cluster's nodes (Cloud Monitoring's ``timeSeries.list``): one
    call per cluster, never raising; a failure is the ``GpuUse``'s ``problem``."""

    async def gpu_use(
        self, cluster: str, instances: Mapping[str, str], window: float, now: float
    ) -> GpuUse:
        """``instances`` maps each node's VM instance id to its name (its Slurm node)."""
        ...

    async def keep(self) -> None:
        """Keep what a sweep learned of each cluster's metric for the next sweep."""
        ...


class NodeUpdater(Protocol):
    """Sets a Slurm node's state through the control plane's proxy (slurmrestd's
    ``POST /slurm/vX/node/NAME``); ``SlurmRefusedError`` with slurmrestd's words when it
    refuses, ``SlurmUnreadableError`` when it cannot be reached."""

    async def update_node(
        self, cluster: str, node: str, states: Sequence[str], reason: str | None = None
    ) -> None: ...

    async def nodes(self, cluster: str) -> list[SlurmNode]: ...


@runtime_checkable
class ReleaseStore(Protocol):
    async def add_release(self, release: Release) -> None: ...
    async def open_releases(self) -> list[Release]: ...
    async def move_release(
        self,
        release_id: str,
        before: ReleaseState,
        after: ReleaseState,
        **changes: Unpack[ReleaseChanges],
    ) -> bool: ...
    async def update_release(self, release_id: str, **changes: Unpack[ReleaseChanges]) -> None: ...


class SubmissionStore(Protocol):
    async def receive_submission(self, submission: Submission) -> bool:
        """Keep a new submission; False when its key was taken before (a replay)."""
        ...

    async def submission_made(self, key: str) -> None: ...
    async def drop_submission(self, key: str) -> None: ...
    async def unfinished_submissions(self, owner: str, before: float) -> list[Submission]:
        """Submissions not yet made: ``owner``'s own, and anyone's received before
        ``before``."""
        ...

    async def forget_submissions(self, before: float) -> None:
        """Drop the made submissions received before ``before`` (past replay)."""
        ...


class KeptSpecStore(Protocol):
    async def keep_spec(self, kept: KeptSpec) -> None:
        """Keep a cluster's spec before it is deleted (replacing an older one)."""
        ...

    async def deleted_specs(self) -> list[KeptSpec]:
        """The specs of clusters whose delete finished, newest first."""
        ...


class RequestStore(KeptSpecStore, Protocol):
    async def add_request(self, request: ApprovalRequest, owe: Sequence[Owed] = ()) -> None:
        """Keep a new request, and what it makes owed (``owe``) in the same step; raises
        ``OpenRequestExistsError`` when its cluster has one open."""
        ...

    async def delete_request(self, request_id: str) -> None: ...
    async def get_request(self, request_id: str) -> ApprovalRequest | None: ...
    async def get_requests(self, request_ids: Sequence[str]) -> dict[str, ApprovalRequest]:
        """The requests with these ids that exist, by id, in a few statements."""
        ...

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
        """Move a request between states once (True for the caller that moved it), and in
        the same transaction record what that move makes owed (``owe``) and its audit entry
        (``audit``): a stop just after the move loses neither."""
        ...

    async def update_request(self, request_id: str, **changes: Unpack[RequestChanges]) -> None: ...
    async def expired_requests(self, now: float) -> list[ApprovalRequest]: ...
    async def stale_drafts(self, before: float) -> list[ApprovalRequest]: ...
    async def requests_in(self, states: Sequence[str]) -> list[ApprovalRequest]: ...

    async def requests_since(self, requester: str, since: float) -> list[ApprovalRequest]: ...

    async def asked_in(
        self, channel: str, origin: str, since: float, until: float
    ) -> list[tuple[str, RequestState]]:
        """Each request of ``origin`` asked in ``channel`` from ``since`` until before
        ``until``: its cluster and its state, oldest first."""
        ...

    async def open_requests(self, cluster: str) -> list[ApprovalRequest]: ...
    async def start_following(
        self, request_id: str, operation: TrackedOperation, owe: Sequence[Owed] = ()
    ) -> bool:
        """In one step: executing -> running, the operation to follow recorded, and its
        following owed (``owe``)."""
        ...

    async def audit(self, entry: AuditEntry) -> None: ...
    async def audit_log(
        self,
        cluster: str | None = None,
        limit: int = 20,
        *,
        actor: str | None = None,
        after: float | None = None,
        before: float | None = None,
    ) -> list[AuditEntry]:
        """Newest first; ``cluster`` a full name or a short id; ``after``/``before`` bound
        the time (strictly older than ``before``)."""
        ...


class OperationStore(Protocol):
    async def get_operation(self, name: str) -> TrackedOperation | None: ...
    async def active_operations(self) -> list[TrackedOperation]: ...
    async def update_operation(self, name: str, **changes: Unpack[OperationChanges]) -> None: ...


class LeaseStore(Protocol):
    async def take_lease(
        self, name: str, owner: str, now: float, ttl: float, min_gap: float = 0.0
    ) -> bool: ...
    async def finish_lease(self, name: str, owner: str, now: float) -> None: ...


class ReportStore(Protocol):
    async def save_report(self, at: float, report: str, *, kind: str = "latest") -> None:
        """Keep the last sweep's report (JSON text), replacing the one before; ``kind`` keeps
        another record of the sweep (its reach) beside it."""
        ...

    async def latest_report(self, *, kind: str = "latest") -> tuple[float, str] | None: ...


# the idle sweep's records of the clusters, by compare-and-set (``handlers/keeping.py``)
IdleRecordStore: TypeAlias = Kept[IdleRecord]
