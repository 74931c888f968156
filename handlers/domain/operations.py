"""google.longrunning.Operation, and what ``:callSlurmRestApi`` answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from handlers.domain.models import RpcStatus
from handlers.domain.pools import ApiModel


class Operation(ApiModel):
    """google.longrunning.Operation. ``done`` is absent, not false, while it runs."""

    name: str
    metadata: dict[str, Any] | None = None
    done: bool = False
    response: dict[str, Any] | None = None
    error: RpcStatus | None = None

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
    started: int | None  # for a pending job, Slurm's forecast of its start, when it has one
    hold: bool = False  # JOB_INFO ``hold``: held by its user or an administrator
    eligible: int | None = None  # JOB_INFO ``eligible_time``: its begin time while pending
    # JOB_INFO ``state_description``: the reason's detail, such as the nodes of
    # "ReqNodeNotAvail, UnavailableNodes:cn[1-2]" ("" when Slurm gives none)
    reason_text: str = ""
    # JOB_INFO ``array_job_id``, ``array_task_id`` and ``array_task_string``: a task of an
    # array, or the array's meta record standing for its tasks not yet started ("412-9999")
    array_id: int | None = None
    array_task: int | None = None
    array_tasks: str = ""
    reservation: str = ""  # JOB_INFO ``resv_name``: the reservation it runs in, or asked for
    time_limit: int | None = None  # JOB_INFO ``time_limit``, minutes; None: unlimited or unsaid

    @property
    def pending(self) -> bool:
        return "PENDING" in self.states

    @property
    def tasks(self) -> int:
        """How many jobs this record stands for: an array's meta record, every task its
        ``array_task_string`` names (squeue shows them as one line, ``7725337_[412-9999]``);
        any other job, itself. A task string that cannot be read counts as one."""
        return task_count(self.array_tasks) if self.array_tasks else 1

    @property
    def shown_id(self) -> str:
        """The job's id as squeue shows it: ``7725337_[412-9999]``, ``7725337_411``, ``42``."""
        if self.array_id and self.array_tasks:
            return f"{self.array_id}_[{self.array_tasks}]"
        if self.array_id and self.array_task is not None:
            return f"{self.array_id}_{self.array_task}"
        return str(self.job_id)


def task_count(tasks: str) -> int:
    """The tasks of a Slurm array's task string (sbatch(1) --array: ``0-15``, ``1,3,5-7``,
    ``0-15:4``, each with an optional ``%LIMIT`` of tasks at once); 1 when it is unreadable."""
    count = 0
    for part in tasks.split("%", 1)[0].split(","):
        bounds, _, step_text = part.partition(":")
        first, _, last = bounds.partition("-")
        try:
            start, end = int(first), int(last or first)
            step = int(step_text or 1)
        except ValueError:
            return 1
        if end < start or step < 1:
            return 1
        count += (end - start) // step + 1
    return max(count, 1)


@dataclass(frozen=True)
class SlurmNode:
    """One node as slurmrestd's ``GET /slurm/v0.0.42/nodes/`` lists it (NODE): its state is
    a base state and flags (``["IDLE", "DRAIN"]``), and ``reason`` is why an administrator or
    Slurm took it out of service."""

    name: str
    states: frozenset[str]
    reason: str
    partitions: tuple[str, ...] = ()
    reason_by: str = ""  # reason_set_by_user: who took it out of service ("root", "slurm")
    reason_at: float | None = None  # reason_changed_at: since when, epoch seconds


@dataclass(frozen=True)
class SlurmReservation:
    """One reservation as slurmrestd's ``GET /slurm/v0.0.42/reservations/`` lists it
    (RESERVATION_INFO): what ``scontrol show reservation`` prints. ``flags`` are Slurm's
    (``MAINT`` for a maintenance window); times are epoch seconds, None when not set."""

    name: str
    start: float | None
    end: float | None
    nodes: str  # node_list: a host list (``a4-[0-3]``)
    flags: frozenset[str] = frozenset()
    partition: str = ""
    node_count: int = 0

    @property
    def maintenance(self) -> bool:
        return "MAINT" in self.flags

    def active(self, now: float) -> bool:
        return (self.start is None or self.start <= now) and (self.end is None or now < self.end)


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
