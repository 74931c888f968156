"""Slurm's demand on a cluster, from its queue and its nodes: which jobs keep it busy,
which wait on something only a person can change, and which nodes work or are out of
service. Pure functions over the API's Slurm models, each rule beside Slurm's own page; the
idle rules (``handlers/sweep/rules.py``) and the off-hours schedules read them alike.

What Slurm says (``GET /slurm/vX/jobs/`` and ``/nodes/``; each rule cites Slurm's own page):

- *Demand* is a job that runs (RUNNING, CONFIGURING, COMPLETING, SUSPENDED, STAGE_OUT,
  RESIZING) or a pending job whose reason is on the allow-list of ``handlers/slurm/reasons.py``
  (Resources, Priority, None and the few others Slurm documents as starting on their own).
  Every other reason is not demand, and the report says what the job waits for; a reason not
  known there is shown as such, never counted as demand.
- *Held* is not demand (job_reason_codes.html: JobHeldUser "held by the user or an account
  coordinator", JobHeldAdmin "held by a privileged user"; JOB_INFO ``hold``; the job_state
  flags REQUEUE_HOLD, SPECIAL_EXIT and RESV_DEL_HOLD of squeue(1) JOB STATE CODES): it runs
  only once someone releases it (``scontrol release``).
- *A reservation not begun*: a job waiting with reason Reservation ("waiting for its
  advanced reservation to become available") is demand only from ``idle_after`` before its
  reservation (``resv_name``, read from ``GET /slurm/vX/reservations/``) starts.
- *Maintenance*: sinfo(1) MAINT, a node "in a reservation with a flag value of maintenance",
  runs nothing and is not broken: it is counted apart, with its window's end.
- *Not yet*: a pending job whose begin time (BeginTime, ``sbatch --begin``; JOB_INFO
  ``eligible_time``) lies more than ``idle_after`` ahead is not demand; it counts again once
  that time is within ``idle_after``.
- *Working nodes* (sinfo(1) NODE STATE CODES): ALLOCATED and MIXED run jobs; COMPLETING is
  a job's epilog still running; PLANNED is kept by the backfill scheduler for a pending job.
  Each is busy, whatever jobs are visible.
- *Out of service*: DOWN, DRAIN (drained or draining with no job), FAIL and NOT_RESPONDING
  run nothing; while their VM exists it is paid for. POWERED_DOWN is no VM: not paid for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.slurm.reasons import (
    HELD_AFTER_FAILED_LAUNCH,
    MAINTENANCE_FLAG,
    Reason,
    Wait,
    wait_of,
)
from handlers.words import plural

# squeue(1) JOB STATE CODES: a job in any of these holds nodes
RUNNING_STATES = frozenset(
    {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "RESIZING"}
)
# squeue(1) JOB STATE CODES: flags of a job that waits held
HELD_FLAGS = {
    "REQUEUE_HOLD": "held after a requeue",  # "Held job is being requeued"
    "SPECIAL_EXIT": "held after a special exit",  # "requeued in a special state ... held"
    "RESV_DEL_HOLD": "held since its reservation was deleted",
}
HOLD = Reason(Wait.HELD, "held")
# job_reason_codes.html: Reservation "The job is waiting for its advanced reservation to
# become available" (slurmctld sets WAIT_RESERVATION while the reservation is not active)
WAITS_FOR_RESERVATION = "Reservation"
# sinfo(1) NODE STATE CODES
WORKING_NODE_STATES = frozenset({"ALLOCATED", "MIXED", "PLANNED"})
OUT_OF_SERVICE = {
    "DOWN": "down",  # "unavailable for use"
    "DRAIN": "drained",  # "unavailable for use per system administrator request"
    "FAIL": "failing",  # "expected to fail soon and is unavailable for use"
    "NOT_RESPONDING": "not responding",
}


Stall = Wait  # why a pending job is not demand: any of Slurm's reasons but the allow-list's


def begins(job: SlurmJob, starts: Mapping[str, float | None] | None) -> float | None:
    """When the pending job may start at the earliest: its reservation's start for a job that
    waits for one (``starts``: reservation name -> start), else its begin time."""
    if job.reason == WAITS_FOR_RESERVATION and starts and job.reservation in starts:
        return starts[job.reservation]
    return job.eligible


def stall_of(
    job: SlurmJob, horizon: float, starts: Mapping[str, float | None] | None = None
) -> tuple[Wait, str, str] | None:
    """None when the pending job can start on its own; else why not, Slurm's word for it and
    what that means. ``horizon`` is the moment past which a begin time is not demand yet;
    ``starts`` the cluster's reservations, when read (None: not read)."""
    if job.reason == WAITS_FOR_RESERVATION and starts is not None and job.reservation:
        if job.reservation not in starts:
            return Wait.OTHER, job.reason, f"its reservation {job.reservation} is not listed"
        start = starts[job.reservation]
        if start is not None and start > horizon:
            return Wait.LATER, job.reason, f"for its reservation {job.reservation}"
        return None  # the reservation begins within idle_after: it will run then
    held = next((flag for flag in HELD_FLAGS if flag in job.states), None)
    if held is not None:
        return Wait.HELD, held, HELD_FLAGS[held]
    reason = wait_of(job.reason, job.reason_text)
    if reason.wait == Wait.HELD:
        return Wait.HELD, job.reason, reason.words
    if job.hold:
        return Wait.HELD, job.reason if job.reason != "None" else "hold", HOLD.words
    if reason.wait in (Wait.DEMAND, Wait.LATER):
        if job.eligible is not None and job.eligible > horizon:
            return Wait.LATER, job.reason if job.reason != "None" else "BeginTime", ""
        if reason.wait == Wait.LATER and job.eligible is None:
            return Wait.LATER, job.reason, ""  # a begin time Slurm does not give: not guessed
        return None
    return reason.wait, job.reason, reason.words


def _utc(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class StalledJobs:
    """Pending jobs of one user that are not demand, for one reason."""

    kind: Stall
    user: str
    cause: str  # Slurm's reason or state flag
    count: int
    until: float | None = None  # the earliest begin time, for jobs that start later
    meaning: str = ""  # the cause in plain words

    def words(self) -> tuple[str, ...]:
        """What the report says of them: plain words, with every second part a command."""
        jobs = plural(self.count, "job")
        if self.kind == Stall.HELD and self.meaning == HELD_AFTER_FAILED_LAUNCH.words:
            return (
                f"{jobs} of {self.user} {self.meaning} ({self.cause}): releasing "
                f"{'it' if self.count == 1 else 'them'} runs the same launch again; check the "
                "nodes with ",
                "/cluster health",
                " first",
            )
        if self.kind == Stall.HELD:
            how = self.meaning or "held"
            them = "it" if self.count == 1 else "them"
            return (
                f"{jobs} of {self.user} {how} ({self.cause}): ",
                "scontrol release",
                (f" lets {them} run"),
            )
        if self.kind == Stall.LATER:
            when = _utc(self.until) if self.until is not None else "later"
            if self.meaning:  # a reservation not begun
                said = f"{jobs} of {self.user} waiting {self.meaning}, which starts {when}"
                return (f"{said} ({self.cause})",)
            return (f"{jobs} of {self.user} not to start before {when} ({self.cause})",)
        words = self.meaning
        if self.kind == Stall.NEVER:
            return (f"{jobs} of {self.user} that cannot start: {words} ({self.cause})",)
        if self.kind == Stall.BLOCKED:
            return (f"{jobs} of {self.user} blocked: {words} ({self.cause})",)
        if self.kind == Stall.MAINTENANCE:
            return (f"{jobs} of {self.user} waiting: {words} ({self.cause})",)
        if self.kind == Stall.UNKNOWN:
            return (
                f"{jobs} of {self.user} waiting for a reason not known here ({self.cause}): "
                "not counted as demand",
            )
        return (f"{jobs} of {self.user} not counted as demand: {words} ({self.cause})",)


@dataclass(frozen=True)
class QueueDemand:
    """Slurm's queue, as the idle rules count it."""

    running: int = 0
    pending: int = 0  # pending jobs that can start (each task of an array counted)
    stalled: tuple[StalledJobs, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.running or self.pending)


def queue_demand(
    jobs: Iterable[SlurmJob],
    now: float,
    idle_after: float,
    starts: Mapping[str, float | None] | None = None,
) -> QueueDemand:
    """Count running jobs and pending demand; group the pending jobs that are not demand.
    ``starts``: the cluster's reservations and their starts, when read."""
    running = pending = 0
    stalled: Counter[tuple[Wait, str, str, str]] = Counter()
    until: dict[tuple[Wait, str, str, str], float] = {}
    for job in jobs:
        if job.pending:
            stall = stall_of(job, now + idle_after, starts)
            if stall is None:
                pending += job.tasks
                continue
            kind, cause, meaning = stall
            key = (kind, job.user or "an unknown user", cause, meaning)
            stalled[key] += job.tasks
            begin = begins(job, starts)
            if begin is not None:
                until[key] = min(until.get(key, begin), begin)
        elif RUNNING_STATES & job.states:
            running += 1
    groups = tuple(
        StalledJobs(kind, user, cause, count, until.get(key), meaning)
        for key, count in sorted(stalled.items())
        for kind, user, cause, meaning in [key]
    )
    return QueueDemand(running, pending, groups)


@dataclass(frozen=True)
class NodeCensus:
    """Slurm's nodes, as the idle rules count them."""

    working: int = 0  # ALLOCATED, MIXED or PLANNED
    completing: int = 0  # an epilog still running
    out_of_service: tuple[tuple[str, str, int], ...] = ()  # (state, reason, count), VMs that exist
    powered_down: int = 0
    total: int = 0
    maintenance: tuple[str, ...] = ()  # nodes in a maintenance reservation, VMs that exist

    @property
    def powered_up(self) -> int:
        return self.total - self.powered_down

    @property
    def busy(self) -> bool:
        """A node works (or finishes a job's epilog), whatever jobs are visible."""
        return bool(self.working or self.completing)


def node_census(nodes: Iterable[SlurmNode]) -> NodeCensus:
    working = completing = powered_down = total = 0
    broken: Counter[tuple[str, str]] = Counter()
    maintenance = []
    for node in nodes:
        total += 1
        if WORKING_NODE_STATES & node.states:
            working += 1
        elif "COMPLETING" in node.states:
            completing += 1
        elif "POWERED_DOWN" in node.states:
            powered_down += 1  # no VM: nothing to pay, whatever else it says
        elif MAINTENANCE_FLAG in node.states:
            maintenance.append(node.name)  # planned: not out of service, whatever it shows
        else:
            state = next((OUT_OF_SERVICE[s] for s in OUT_OF_SERVICE if s in node.states), None)
            if state is not None:
                broken[state, node.reason or "no reason given"] += 1
    out = tuple((state, reason, count) for (state, reason), count in sorted(broken.items()))
    return NodeCensus(working, completing, out, powered_down, total, tuple(maintenance))


def node_notes(census: NodeCensus, paying_nodes: int) -> tuple[tuple[str, ...], ...]:
    """What the report says of the nodes: those paid for that run nothing, and a count that
    Slurm and the control plane disagree on."""
    notes: list[tuple[str, ...]] = []
    if census.out_of_service:
        parts = [f"{count} {state} ({reason})" for state, reason, count in census.out_of_service]
        total = sum(count for _s, _r, count in census.out_of_service)
        notes.append(
            (
                f"{plural(total, 'node')} out of service, paid for, running nothing: "
                f"{', '.join(parts)}",
            )
        )
    if census.total and census.powered_up != paying_nodes:
        notes.append(
            (
                f"Slurm counts {plural(census.powered_up, 'node')} powered up where the control "
                f"plane lists {plural(paying_nodes, 'compute VM')}; the cost is that of the VMs",
            )
        )
    return tuple(notes)
