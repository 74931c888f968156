"""The idle policy: a pure function of (what we knew, what we see now, the time).

The rules, all of them:

1. *Busy*: a cluster is busy at an observation if its state is not RUNNING (PROVISIONING,
   UPDATING, STOPPING and ERROR are never alerted on), or the bot is tracking an operation on
   it, or Slurm reports demand: a running job, a pending job that can start, or a node that
   works (see *What Slurm says*, below). Nodes count because Slurm may hide other users' jobs
   from the bot's account (PrivateData): empty jobs with allocated nodes is busy, and is
   reported as hidden jobs.
2. *Unknown*: when activity cannot be read (Slurm's proxy fails, slurmrestd errs), the
   observation is unknown. An unknown cluster is never alerted on, and the idle clock starts
   again afterwards: continuity cannot be shown across a gap.
3. *The idle clock* starts at the first not-busy observation, never backdated, and is reset by
   any busy or unknown observation. A cluster is *idle* once it has been observed not busy,
   continuously, for ``idle_after`` (2 h by default); before that it is *waiting*.
4. *Paying*: an idle cluster costs money only while its compute pools (every pool but the
   login pool) have nodes (counted from the VMs that exist, ``clusterStatus.nodesStatus``,
   not from the pools' minimum); DOWN and drained nodes that exist are paid for too, and the
   report says how many and why. One that has none is *free*, whether or not it has been
   quiet long, and is never alerted on. Where Slurm counts another number of powered-up
   nodes than the control plane lists VMs, the report says so and the VMs are priced.
5. *One alert per idle period*: an idle, paying cluster gets one alert; it is repeated only
   when the cluster is still idle ``cooldown`` (24 h by default) after the last alert. A busy
   observation ends the period; the next idle period gets its own alert. A change under way
   (UPDATING, PROVISIONING, STOPPING) leaves a posted alert open for what the change leaves.
6. *Snooze* silences alerts until a time; after it, a cluster still idle is alerted again.
7. *Keep* exempts a cluster until someone undoes it (from `/cluster idle`); so does the
   cluster label ``clusterbot-idle: exempt``. Exempt clusters are reported, never alerted on.
   Undoing a keep watches the cluster afresh: if it is still idle, the next sweep alerts.
8. *Auto-action* (off by default): an alert may announce an action (scale to zero, or delete)
   due ``grace`` after the alert. Any click on the alert, a snooze, a keep, or the cluster
   becoming busy cancels it. It is due only while the cluster is still idle and paying.
9. *History*: seven days of busy/not-busy time per cluster are kept, merged into runs. The
   recommendation, made only for a quiet cluster that pays for nodes (never for a busy,
   free, exempt or unknown one), is to scale to zero a cluster used (busy at some point) on
   at least ``often_days`` (2) of the last seven days, since it comes back quickly, and to
   delete one used less, since it is cheaper to re-create when needed. Deleting is
   recommended only with a full week of history: until then, scaling to zero, which is easy
   to undo.

What Slurm says (``GET /slurm/vX/jobs/`` and ``/nodes/``; each rule cites Slurm's own page):

- *Demand* is a job that runs (RUNNING, CONFIGURING, COMPLETING, SUSPENDED, STAGE_OUT,
  RESIZING) or a pending job that can start on its own: one waiting on Resources, Priority,
  Dependency, a QOS or association limit, a license, or a reservation.
- *Held* is not demand (job_reason_codes.html: JobHeldUser "held by the user or an account
  coordinator", JobHeldAdmin "held by a privileged user"; JOB_INFO ``hold``; the job_state
  flags REQUEUE_HOLD, SPECIAL_EXIT and RESV_DEL_HOLD of squeue(1) JOB STATE CODES): it runs
  only once someone releases it (``scontrol release``).
- *Never* is not demand: reasons job_reason_codes.html gives for a job that cannot start
  as things stand (DependencyNeverSatisfied, InvalidAccount, InvalidQOS, AccountNotAllowed,
  BadConstraints, ReservationDeleted, PartitionDown, PartitionInactive).
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
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from bot.vertex.operations import SlurmJob, SlurmNode
from handlers.idle.history import Recommendation as Recommendation
from handlers.idle.history import Run as Run
from handlers.idle.history import recommend, record_history
from handlers.idle.state import AutoAction as AutoAction
from handlers.idle.state import IdleRecord as IdleRecord
from handlers.idle.state import IdleRules as IdleRules
from handlers.idle.state import Status as Status
from handlers.idle.state import Verdict as Verdict
from handlers.words import duration, plural

EXEMPT_LABEL = ("clusterbot-idle", "exempt")
# clusterStatus.state while a change runs on the cluster (vertex-api.md: STOPPING is a delete)
CHANGING_STATES = frozenset({"UPDATING", "PROVISIONING", "STOPPING"})

# squeue(1) JOB STATE CODES: a job in any of these holds nodes
RUNNING_STATES = frozenset(
    {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "RESIZING"}
)
# job_reason_codes.html: held jobs run only once released
HELD_REASONS = {
    "JobHeldUser": "held by its user",  # "held by the user or an account coordinator"
    "JobHeldAdmin": "held by an administrator",  # "held by a privileged user"
}
# squeue(1) JOB STATE CODES: flags of a job that waits held
HELD_FLAGS = {
    "REQUEUE_HOLD": "held after a requeue",  # "Held job is being requeued"
    "SPECIAL_EXIT": "held after a special exit",  # "requeued in a special state ... held"
    "RESV_DEL_HOLD": "held since its reservation was deleted",
}
# job_reason_codes.html: what keeps a job from starting until someone changes something
NEVER_REASONS = {
    "DependencyNeverSatisfied": "a job it depends on will never satisfy it",
    "InvalidAccount": "its account is invalid",
    "InvalidQOS": "its QOS is invalid",
    "AccountNotAllowed": "its account is not allowed in its partition",
    "BadConstraints": "its requirements cannot be satisfied",
    "ReservationDeleted": "the reservation it asked for no longer exists",
    "PartitionDown": "its partition is DOWN",
    "PartitionInactive": "its partition is INACTIVE",
}
# sinfo(1) NODE STATE CODES
WORKING_NODE_STATES = frozenset({"ALLOCATED", "MIXED", "PLANNED"})
OUT_OF_SERVICE = {
    "DOWN": "down",  # "unavailable for use"
    "DRAIN": "drained",  # "unavailable for use per system administrator request"
    "FAIL": "failing",  # "expected to fail soon and is unavailable for use"
    "NOT_RESPONDING": "not responding",
}


class Stall(StrEnum):
    """Why a pending job is not demand."""

    HELD = "held"
    NEVER = "never"
    LATER = "later"


def stall_of(job: SlurmJob, horizon: float) -> tuple[Stall, str] | None:
    """None when the pending job can start on its own; else why not, and Slurm's word for it.
    ``horizon`` is the moment past which a begin time does not count as demand yet."""
    held = next((flag for flag in HELD_FLAGS if flag in job.states), None)
    if held is not None:
        return Stall.HELD, held
    if job.reason in HELD_REASONS:
        return Stall.HELD, job.reason
    if job.hold:
        return Stall.HELD, job.reason if job.reason != "None" else "hold"
    if job.reason in NEVER_REASONS:
        return Stall.NEVER, job.reason
    if job.eligible is not None and job.eligible > horizon:
        return Stall.LATER, job.reason if job.reason != "None" else "BeginTime"
    return None


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

    def words(self) -> tuple[str, ...]:
        """What the report says of them: plain words, with every second part a command."""
        jobs = plural(self.count, "job")
        if self.kind == Stall.HELD:
            how = HELD_REASONS.get(self.cause) or HELD_FLAGS.get(self.cause) or "held"
            them = "it" if self.count == 1 else "them"
            return (
                f"{jobs} of {self.user} {how} ({self.cause}): ",
                "scontrol release",
                (f" lets {them} run"),
            )
        if self.kind == Stall.NEVER:
            return (
                f"{jobs} of {self.user} that cannot start: {NEVER_REASONS[self.cause]} "
                f"({self.cause})",
            )
        when = _utc(self.until) if self.until is not None else "later"
        return (f"{jobs} of {self.user} not to start before {when} ({self.cause})",)


@dataclass(frozen=True)
class QueueDemand:
    """Slurm's queue, as the idle rules count it."""

    running: int = 0
    pending: int = 0  # pending jobs that can start
    stalled: tuple[StalledJobs, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.running or self.pending)


def queue_demand(jobs: Iterable[SlurmJob], now: float, idle_after: float) -> QueueDemand:
    """Count running jobs and pending demand; group the pending jobs that are not demand."""
    running = pending = 0
    stalled: Counter[tuple[Stall, str, str]] = Counter()
    until: dict[tuple[Stall, str, str], float] = {}
    for job in jobs:
        if job.pending:
            stall = stall_of(job, now + idle_after)
            if stall is None:
                pending += 1
                continue
            key = (stall[0], job.user or "an unknown user", stall[1])
            stalled[key] += 1
            if job.eligible is not None:
                until[key] = min(until.get(key, job.eligible), job.eligible)
        elif RUNNING_STATES & job.states:
            running += 1
    groups = tuple(
        StalledJobs(kind, user, cause, count, until.get((kind, user, cause)))
        for (kind, user, cause), count in sorted(stalled.items())
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
    for node in nodes:
        total += 1
        if WORKING_NODE_STATES & node.states:
            working += 1
        elif "COMPLETING" in node.states:
            completing += 1
        elif "POWERED_DOWN" in node.states:
            powered_down += 1  # no VM: nothing to pay, whatever else it says
        else:
            state = next((OUT_OF_SERVICE[s] for s in OUT_OF_SERVICE if s in node.states), None)
            if state is not None:
                broken[state, node.reason or "no reason given"] += 1
    out = tuple((state, reason, count) for (state, reason), count in sorted(broken.items()))
    return NodeCensus(working, completing, out, powered_down, total)


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


@dataclass(frozen=True)
class Observation:
    at: float
    state: str
    tracked_operation: bool = False
    running_jobs: int | None = 0
    pending_jobs: int | None = 0
    paying_nodes: int = 0
    exempt_label: bool = False
    unknown_reason: str | None = None  # set when activity could not be read
    busy_nodes: int = 0  # Slurm nodes ALLOCATED, MIXED or PLANNED
    completing_nodes: int = 0  # Slurm nodes whose epilog still runs
    queue_notes: tuple[tuple[str, ...], ...] = ()  # pending jobs that are not demand
    node_notes: tuple[tuple[str, ...], ...] = ()  # nodes paid for that run nothing

    @property
    def jobs_hidden(self) -> bool:
        """Nodes are working but no running job is visible to the bot's account."""
        return self.busy_nodes > 0 and not self.running_jobs

    def busy_reason(self) -> str | None:
        if self.tracked_operation:
            return "a change from clusterbot is running"
        if self.state != "RUNNING":
            return f"state is {self.state}"
        running, pending = self.running_jobs or 0, self.pending_jobs or 0
        if running or pending:
            return f"{running} running and {pending} pending Slurm jobs"
        if self.busy_nodes:
            return (
                f"{plural(self.busy_nodes, 'Slurm node')} allocated but no job visible to "
                "clusterbot: jobs may be hidden from its account (slurm.conf PrivateData)"
            )
        completing = plural(self.completing_nodes, "Slurm node")
        return f"{completing} completing a job (its epilog runs)" if self.completing_nodes else None

    def with_slurm(self, demand: QueueDemand, census: NodeCensus | None) -> Observation:
        """This observation with what Slurm said: its queue, and its nodes when read."""
        seen = replace(
            self,
            running_jobs=demand.running,
            pending_jobs=demand.pending,
            queue_notes=tuple(group.words() for group in demand.stalled),
        )
        if census is None:
            return seen
        return replace(
            seen,
            busy_nodes=census.working,
            completing_nodes=census.completing,
            node_notes=node_notes(census, self.paying_nodes),
        )


def assess(record: IdleRecord, seen: Observation, rules: IdleRules) -> tuple[IdleRecord, Verdict]:
    """Apply the rules to one observation; returns the new record and the verdict."""
    now = seen.at
    busy_reason = seen.busy_reason()
    unknown = seen.unknown_reason is not None and busy_reason is None
    history = record.history
    if record.last_seen is not None and not unknown:
        history = record_history(history, record.last_seen, now, busy_reason is not None)
    base = replace(record, last_seen=None if unknown else now, history=history)

    def verdict(status: Status, reason: str, **extra: object) -> Verdict:
        if status in (Status.WAITING, Status.IDLE, Status.SNOOZED):  # quiet and paying
            advice, advice_reason = recommend(history, now, rules)
            extra.update(recommendation=advice, recommendation_reason=advice_reason)
        return Verdict(status, reason, **extra)  # type: ignore[arg-type]

    if unknown:
        ended = "activity can no longer be read" if record.alert_message else None
        return (
            replace(base, idle_since=None, alerted_at=None, auto_action_at=None),
            verdict(Status.UNKNOWN, seen.unknown_reason or "unknown", ended_alert=ended),
        )
    if busy_reason is not None:
        # A change under way (the bot's own, one not yet recorded, another's) keeps the alert
        # open: what the change leaves decides (the remedy's end, or the cluster gone).
        changing = seen.tracked_operation or seen.state in CHANGING_STATES
        ended = f"busy again: {busy_reason}" if record.alert_message and not changing else None
        return (
            replace(base, idle_since=None, alerted_at=None, auto_action_at=None),
            verdict(Status.BUSY, busy_reason, ended_alert=ended),
        )
    idle_since = record.idle_since if record.idle_since is not None else now
    base = replace(base, idle_since=idle_since)
    can = " that can run" if seen.queue_notes else ""  # the notes name what cannot start
    quiet = f"no jobs{can} for {duration(now - idle_since)}"
    if seen.exempt_label or record.kept_by:
        why = "label clusterbot-idle: exempt" if seen.exempt_label else "kept"
        return replace(base, auto_action_at=None), verdict(
            Status.EXEMPT, why, idle_since=idle_since
        )
    if seen.paying_nodes == 0:
        ended = "its compute pools have no nodes" if record.alert_message else None
        return replace(base, auto_action_at=None), verdict(
            Status.FREE,
            f"{quiet}, and no compute nodes to pay for",
            idle_since=idle_since,
            ended_alert=ended,
        )
    if now - idle_since < rules.idle_after:
        return base, verdict(Status.WAITING, quiet, idle_since=idle_since)
    if record.snoozed_until is not None and now < record.snoozed_until:
        return base, verdict(Status.SNOOZED, "snoozed", idle_since=idle_since)
    due = record.alerted_at is None or now - record.alerted_at >= rules.cooldown
    if record.snoozed_until is not None and now >= record.snoozed_until:
        due = True  # a snooze that ran out: tell again
        base = replace(base, snoozed_until=None, snoozed_by=None)
    acting = rules.auto_action != AutoAction.OFF
    auto_due = (
        not due and acting and record.auto_action_at is not None and now >= record.auto_action_at
    )
    if due:
        auto_at = now + rules.grace if acting else None
        return replace(base, alerted_at=now, auto_action_at=auto_at), verdict(
            Status.IDLE, quiet, alert=True, idle_since=idle_since
        )
    return base, verdict(Status.IDLE, quiet, idle_since=idle_since, auto_action_due=auto_due)
