"""google.longrunning.Operation, and what ``:callSlurmRestApi`` answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.vertex.models import ApiModel, Status


class Operation(ApiModel):
    """google.longrunning.Operation. ``done`` is absent, not false, while it runs."""

    name: str
    metadata: dict[str, Any] | None = None
    done: bool = False
    response: dict[str, Any] | None = None
    error: Status | None = None

    @property
    def progress_message(self) -> str | None:
        value = (self.metadata or {}).get("progressMessage")
        return value if isinstance(value, str) else None

    def _generic_time(self, key: str) -> datetime | None:
        generic = (self.metadata or {}).get("genericMetadata") or {}
        value = generic.get(key) if isinstance(generic, dict) else None
        if not isinstance(value, str):
            return None
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None

    @property
    def create_time(self) -> datetime | None:
        """When the operation started, from ``metadata.genericMetadata.createTime``."""
        return self._generic_time("createTime")

    @property
    def update_time(self) -> datetime | None:
        """Its last change (its end, once done), from ``genericMetadata.updateTime``."""
        return self._generic_time("updateTime")

    @property
    def succeeded(self) -> bool:
        return self.done and self.error is None


class SlurmResponse(ApiModel):
    """The reply of ``:callSlurmRestApi``: slurmrestd's status and its JSON body as a string."""

    status: int = 0
    body: str = ""


@dataclass(frozen=True)
class SlurmActivity:
    """What Slurm says a cluster is doing, read through ``:callSlurmRestApi``.

    Jobs can be hidden from the bot's own Linux account (slurm.conf PrivateData); nodes are
    not, so an allocated node is activity even when no job is visible.
    """

    running_jobs: int
    pending_jobs: int
    busy_nodes: int | None = None  # ALLOCATED, MIXED or COMPLETING; None when not asked
    nodes: int | None = None
    version: str = ""

    @property
    def jobs_hidden(self) -> bool:
        """Nodes are working but no running job is visible: jobs are hidden from the bot."""
        return bool(self.busy_nodes) and self.running_jobs == 0


@dataclass(frozen=True)
class SlurmJob:
    """One job as slurmrestd's ``GET /slurm/v0.0.42/jobs/`` lists it (JOB_INFO), the fields a
    person reads in ``squeue``; times are epoch seconds, None when slurmrestd has none."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    states: frozenset[str]
    reason: str  # state_reason: why it is pending ("None" once it runs)
    priority: int | None
    qos: str
    node_count: int
    nodes: str
    submitted: int | None
    started: int | None

    @property
    def pending(self) -> bool:
        return "PENDING" in self.states


@dataclass(frozen=True)
class Share:
    """One association in slurmrestd's ``GET /slurm/v0.0.42/shares`` (ASSOC_SHARES_OBJ_WRAP),
    what ``sshare`` prints: an account, or a user (``user`` set) within ``account``."""

    account: str
    user: str | None
    shares: int | None  # raw shares
    shares_normalized: float | None
    usage_normalized: float | None
    effective_usage: float | None
    fairshare: float | None  # the fair-share factor, 0 to 1 (1: far below its share)
