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
5. *One alert per idle period*: an idle, paying cluster gets one alert; it is due again only
   when the cluster is still idle ``cooldown`` (24 h by default) after the last alert, and
   then said as a reminder in the alert's thread (``handlers/idle/alerts.py``). A busy
   observation ends the period; the next idle period gets its own alert. A change under way
   (UPDATING, PROVISIONING, STOPPING) leaves a posted alert open for what the change leaves.
6. *Snooze* silences alerts until a time; after it, a cluster still idle is alerted again.
7. *Keep* exempts a cluster until someone undoes it (from `/cluster idle`); so does the
   cluster label ``clusterbot-idle: exempt``. Exempt clusters are reported, never alerted on.
   Undoing a keep watches the cluster afresh: if it is still idle, the next sweep alerts.
   A cluster asleep on its off-hours schedule is exempt too, and not idle; an idle one with a
   schedule in force is told when the schedule takes it to zero anyway.
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

What Slurm says is ``handlers/sweep/demand.py``'s, each rule beside Slurm's own page.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from handlers.sweep.demand import NodeCensus as NodeCensus
from handlers.sweep.demand import QueueDemand as QueueDemand
from handlers.sweep.demand import Stall as Stall
from handlers.sweep.demand import StalledJobs as StalledJobs
from handlers.sweep.demand import node_census as node_census
from handlers.sweep.demand import node_notes
from handlers.sweep.demand import queue_demand as queue_demand
from handlers.sweep.gpus import IdleAllocation
from handlers.sweep.health import ClusterHealth
from handlers.sweep.history import Recommendation as Recommendation
from handlers.sweep.history import Run as Run
from handlers.sweep.history import recommend, record_history
from handlers.sweep.state import AutoAction as AutoAction
from handlers.sweep.state import IdleRecord as IdleRecord
from handlers.sweep.state import IdleRules as IdleRules
from handlers.sweep.state import Status as Status
from handlers.sweep.state import Verdict as Verdict
from handlers.words import duration, plural

EXEMPT_LABEL = ("clusterbot-idle", "exempt")
# clusterStatus.state while a change runs on the cluster (vertex-api.md: STOPPING is a delete)
CHANGING_STATES = frozenset({"UPDATING", "PROVISIONING", "STOPPING"})


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
    asleep: str | None = None  # asleep by its off-hours schedule: not idle
    health: ClusterHealth | None = None  # its broken nodes and stuck jobs (None: not read)
    scheduled: str | None = None  # when its schedule takes it to zero anyway
    # False when the nodes alone showed it busy and healthy, so its queue was not read
    jobs_read: bool = True
    # running jobs whose GPUs stayed idle for the window (handlers/sweep/gpus.py): not demand
    idle_allocations: tuple[IdleAllocation, ...] = ()

    @property
    def jobs_hidden(self) -> bool:
        """Nodes are working but no running job is visible to the bot's account."""
        return self.jobs_read and self.busy_nodes > 0 and not self.running_jobs

    def busy_reason(self) -> str | None:
        if self.tracked_operation:
            return "a change from clusterbot is running"
        if self.state != "RUNNING":
            return f"state is {self.state}"
        running, pending = self.running_jobs or 0, self.pending_jobs or 0
        if running or pending:
            return f"{running} running and {pending} pending Slurm jobs"
        if self.busy_nodes and not self.jobs_read:
            return f"{plural(self.busy_nodes, 'Slurm node')} allocated to jobs"
        if self.busy_nodes:
            return (
                f"{plural(self.busy_nodes, 'Slurm node')} allocated but no job visible to "
                "clusterbot: jobs may be hidden from its account (slurm.conf PrivateData)"
            )
        completing = plural(self.completing_nodes, "Slurm node")
        return f"{completing} completing a job (its epilog runs)" if self.completing_nodes else None

    def with_slurm(self, demand: QueueDemand | None, census: NodeCensus | None) -> Observation:
        """This observation with what Slurm said: its queue when read, and its nodes."""
        seen = (
            replace(self, running_jobs=None, pending_jobs=None, jobs_read=False)
            if demand is None
            else replace(
                self,
                running_jobs=demand.running,
                pending_jobs=demand.pending,
                queue_notes=tuple(group.words() for group in demand.stalled),
            )
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
    held = seen.idle_allocations
    jobs = f"no jobs{can}" if not held else f"only {plural(len(held), 'job')} holding idle GPUs"
    quiet = f"{jobs} for {duration(now - idle_since)}" + (
        f"; {seen.scheduled}" if seen.scheduled else ""
    )
    if seen.asleep or seen.exempt_label or record.kept_by:
        why = seen.asleep or ("label clusterbot-idle: exempt" if seen.exempt_label else "kept")
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
