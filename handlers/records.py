"""What the bot remembers: approval requests, the operations it tracks, the audit log."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from handlers.plans import ChangePlan


class RequestState(StrEnum):
    PENDING = "pending"  # waiting for an approver
    APPROVED = "approved"  # approved; the change is being sent
    REJECTED = "rejected"
    EXPIRED = "expired"
    REFUSED = "refused"  # approved, but not sent: the cluster changed, or the call failed
    RUNNING = "running"  # the operation is in flight
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the operation finished with an error

    @property
    def open(self) -> bool:
        return self in (RequestState.PENDING, RequestState.APPROVED, RequestState.RUNNING)


@dataclass
class ApprovalRequest:
    id: str
    plan: ChangePlan
    requester: str
    channel: str
    created_at: float
    expires_at: float
    state: RequestState = RequestState.PENDING
    card_ts: str | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    operation: str | None = None
    outcome: str | None = None
    finished_at: float | None = None
    origin: str = "command"

    @property
    def kind(self) -> str:
        return self.plan.kind

    @property
    def cluster(self) -> str:
        return self.plan.cluster


@dataclass
class TrackedOperation:
    name: str
    request_id: str
    cluster: str
    channel: str
    thread_ts: str | None
    started_at: float
    next_poll_at: float
    interval: float = 1.0
    progress: str | None = None
    shown_progress: str | None = None
    progress_ts: str | None = None
    last_edit_at: float = 0.0
    done: bool = False
    error: str | None = None
    final: str | None = None  # None, "claimed" while the final message is sent, "posted"
    owner: str | None = None
    lease_until: float = 0.0


@dataclass
class AuditEntry:
    at: float
    actor: str
    action: str
    cluster: str
    request_id: str | None = None
    details: str = ""
    id: int | None = field(default=None, compare=False)
