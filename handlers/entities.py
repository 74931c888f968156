"""What the bot remembers: approval requests, the operations it tracks, the audit log."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

from handlers.changes.plan import ChangePlan


class RequestState(StrEnum):
    """Where a change request is. Every arrow between states is one conditional UPDATE.

    draft -> pending -> approved -> executing -> running -> succeeded | failed
    A draft is stored before its card is posted and becomes pending once the card exists; a
    draft whose card could not be posted is deleted, one left by a crash is abandoned.
    ``executing`` is written before the PATCH or DELETE is sent: a request found there after
    a crash is recovered by looking at the cluster, never by sending blindly.
    """

    DRAFT = "draft"  # stored; its card is being posted
    PENDING = "pending"  # waiting for an approver
    APPROVED = "approved"  # approved; nothing sent yet
    EXECUTING = "executing"  # the change is being sent (it may have reached the server)
    RUNNING = "running"  # an operation, or the cluster itself, is being followed
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the operation finished with an error
    REFUSED = "refused"  # not applied: the cluster changed, or the control plane refused
    UNKNOWN = "unknown"  # it may or may not have applied: check the cluster
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"  # the requester took it back
    EXPIRED = "expired"
    ABANDONED = "abandoned"  # its card was never confirmed posted (a crash while asking)

    @property
    def open(self) -> bool:
        """Still under way: the cluster takes no other request meanwhile."""
        return self in OPEN_STATES

    @property
    def in_flight(self) -> bool:
        """Approved and not finished: some replica must own it until it ends."""
        return self in (RequestState.APPROVED, RequestState.EXECUTING, RequestState.RUNNING)


OPEN_STATES = frozenset(
    {
        RequestState.DRAFT,
        RequestState.PENDING,
        RequestState.APPROVED,
        RequestState.EXECUTING,
        RequestState.RUNNING,
    }
)


class Origin(StrEnum):
    COMMAND = "command"  # typed by a person
    IDLE = "idle"  # a remedy clicked on an idle alert
    IDLE_AUTO = "idle-auto"  # the idle policy's auto-action
    PIPELINE = "pipeline"  # a pipeline's release, once its cluster's queue emptied
    SCHEDULE = "schedule"  # an off-hours schedule's off or on, approved with the schedule
    HEALTH = "health"  # a node's Resume or Drain clicked on a health alert


@dataclass
class ApprovalRequest:
    id: str
    plan: ChangePlan[Any]
    requester: str
    channel: str
    created_at: float
    expires_at: float
    state: RequestState = RequestState.PENDING
    card_message: str | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    operation: str | None = None
    outcome: str | None = None
    finished_at: float | None = None
    origin: Origin = Origin.COMMAND
    owner: str | None = None  # the replica acting on it while approved or executing
    lease_until: float = 0.0
    progress_message: str | None = None  # the thread message that shows progress and the end
    executing_at: float | None = None
    mention_message: str | None = None  # the thread reply that told the requester how it ended
    card_thread: str | None = None  # the thread its card is posted in (None: the channel)

    @property
    def kind(self) -> str:
        return self.plan.kind

    @property
    def lines_thread(self) -> str | None:
        """Where its lines go (progress, the end, the mention): the card's thread, or the
        thread the card itself is in (a chat thread is one level deep)."""
        return self.card_thread or self.card_message

    @property
    def cluster(self) -> str:
        return self.plan.cluster


class OperationKind(StrEnum):
    OPERATION = "operation"  # a google.longrunning.Operation, polled by name
    CLUSTER = "cluster"  # no operation is known: the cluster is watched until it settles


class Final(StrEnum):
    CLAIMED = "claimed"  # one poller owns the final message
    POSTED = "posted"


@dataclass
class TrackedOperation:
    name: str
    request_id: str
    cluster: str
    channel: str
    thread: str | None
    started_at: float
    next_poll_at: float  # the first poll; after it, the follow item's due time (handlers/owed)
    interval: float = 1.0
    progress: str | None = None
    shown_progress: str | None = None
    progress_message: str | None = None
    last_edit_at: float = 0.0
    done: bool = False
    error: str | None = None
    final: Final | None = None  # None, then CLAIMED (the outcome kept), then POSTED (told)
    kind: OperationKind = OperationKind.OPERATION
    done_at: float | None = None  # when it ended, by the control plane's clock if it says


@dataclass
class AuditEntry:
    at: float
    actor: str
    action: str
    cluster: str
    request_id: str | None = None
    details: str = ""
    id: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class KeptSpec:
    """A cluster's last full spec, kept before the bot deleted it (output-only fields left
    out), so that it can be created again."""

    cluster: str  # its full resource name when it was deleted
    spec: dict[str, object]
    kept_at: float
    request_id: str  # the delete request

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]


class ReleaseState(StrEnum):
    """A pipeline's release: waiting -> drained -> asking -> acted | cancelled | timed_out."""

    WAITING = "waiting"  # jobs are still queued or running
    DRAINED = "drained"  # the queue was seen empty; acting once it is seen empty again
    # the request's id is chosen and kept; the request may or may not exist yet, and the
    # next check finds out and finishes asking
    ASKING = "asking"
    ACTED = "acted"  # the change was asked (pre-approved, or on a card for an approver)
    CANCELLED = "cancelled"  # a job arrived before the action
    TIMED_OUT = "timed_out"  # the queue never emptied in time: nothing done
    FAILED = "failed"  # the change could not be asked (the message says why)

    @property
    def open(self) -> bool:
        return self in (ReleaseState.WAITING, ReleaseState.DRAINED, ReleaseState.ASKING)


@dataclass
class Release:
    """The last step of a pipeline: when the cluster's Slurm queue is empty, scale it to zero
    or delete it."""

    id: str
    cluster: str  # full name
    action: str  # "scale-to-zero" or "delete"
    caller: str  # the verified identity that asked (a service account's email)
    created_at: float
    deadline: float
    state: ReleaseState = ReleaseState.WAITING
    channel: str | None = None
    thread: str | None = None
    drained_at: float | None = None
    request_id: str | None = None
    outcome: str | None = None

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]


@dataclass
class Submission:
    """A form submission, kept from its first byte until its card is posted or its sender
    is told it was not: a stop or crash in between is finished by looking at what exists."""

    key: str  # the view's id and hash: one submission of one state of one form
    user: str
    channel: str  # where the card goes, and where the sender is told
    what: str  # "resize form", as the sender is told about it
    received_at: float
    owner: str  # the replica taking it
    made: bool = False  # its request was made (kept a while, so a replay makes nothing)


# What the stores may change of a stored row, by name and type: a misspelt or mistyped change
# is a type error where it is asked for, not a column SQL never heard of at run time.


class RequestChanges(TypedDict, total=False):
    """A request's fields that change once it is stored (never its plan, or who asked)."""

    card_message: str | None
    decided_by: str | None
    decided_at: float | None
    operation: str | None
    outcome: str | None
    finished_at: float | None
    progress_message: str | None
    executing_at: float | None
    mention_message: str | None


class Decision(TypedDict, total=False):
    """Who decided a request, and when, for an end that is a decision (reject, expire)."""

    decided_by: str | None
    decided_at: float | None


class OperationChanges(TypedDict, total=False):
    """A tracked operation's fields that change while it is followed."""

    thread: str | None
    interval: float
    progress: str | None
    shown_progress: str | None
    progress_message: str | None
    last_edit_at: float
    done: bool
    error: str | None
    final: Final | None
    done_at: float | None


class ReleaseChanges(TypedDict, total=False):
    """A release's fields that change as it waits and acts."""

    channel: str | None
    thread: str | None
    drained_at: float | None
    request_id: str | None
    outcome: str | None
