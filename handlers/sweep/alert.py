"""The idle alert, redrawn as the cluster's situation changes, and the idle report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from handlers.actions import SNOOZE_CHOICES, Keep, Remedy, Snooze, SweepNow
from handlers.costs import PRICES_AS_OF, money
from handlers.reading.clusters import console_link
from handlers.replies import (
    Button,
    Buttons,
    Code,
    Confirm,
    Em,
    Field,
    Fields,
    Heading,
    Line,
    Note,
    Reply,
    Rule,
    Select,
    Strong,
    Table,
    Text,
    Time,
    UserRef,
    joined,
)
from handlers.sweep.rules import AutoAction, IdleRecord, Recommendation, Status, Verdict
from handlers.words import duration, plural

IDLE_PAYING = (Status.IDLE,)


@dataclass(frozen=True)
class IdleEntry:
    """One cluster's line in a sweep: what was seen and what it costs. Plain data, so a
    sweep's report can be kept in the database and shown again on any replica."""

    cluster: str  # full name
    target: str
    status: Status
    reason: str
    nodes: str  # e.g. "cpu: 4 x n2-standard-8"
    cost_hour: float | None  # the compute nodes that exist now
    freed_hour: float | None = None  # what scaling to zero stops paying (reserved: nothing)
    idle_since: float | None = None
    recommendation: Recommendation | None = None
    recommendation_reason: str = ""
    reservations: tuple[str, ...] = ()
    jobs_hidden: bool = False
    # what holds the queue and which nodes run nothing, every second part a command
    notes: tuple[tuple[str, ...], ...] = ()
    kept_by: str | None = None
    kept_at: float | None = None
    snoozed_by: str | None = None
    snoozed_until: float | None = None
    auto_action_at: float | None = None
    health: dict[str, Any] | None = None  # ClusterHealth.to_dict() as the sweep saw it
    idle_allocations: tuple[dict[str, Any], ...] = ()  # IdleAllocation.to_dict(), each

    @classmethod
    def of(
        cls,
        cluster: str,
        target: str,
        verdict: Verdict,
        record: IdleRecord,
        *,
        nodes: str,
        cost_hour: float | None,
        freed_hour: float | None,
        reservations: tuple[str, ...] = (),
        jobs_hidden: bool = False,
        notes: tuple[tuple[str, ...], ...] = (),
        health: dict[str, Any] | None = None,
        allocations: tuple[dict[str, Any], ...] = (),
    ) -> IdleEntry:
        return cls(
            cluster=cluster,
            target=target,
            status=verdict.status,
            reason=verdict.reason,
            nodes=nodes,
            cost_hour=cost_hour,
            freed_hour=freed_hour,
            idle_since=verdict.idle_since,
            recommendation=verdict.recommendation,
            recommendation_reason=verdict.recommendation_reason,
            reservations=reservations,
            jobs_hidden=jobs_hidden,
            notes=notes,
            kept_by=record.kept_by,
            kept_at=record.kept_at,
            snoozed_by=record.snoozed_by,
            snoozed_until=record.snoozed_until,
            auto_action_at=record.auto_action_at,
            health=health,
            idle_allocations=allocations,
        )

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    def spent(self, now: float) -> float | None:
        if self.cost_hour is None or self.idle_since is None:
            return None
        return self.cost_hour * (now - self.idle_since) / 3600

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _ENTRY_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IdleEntry:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values["status"])
        if values.get("recommendation"):
            values["recommendation"] = Recommendation(values["recommendation"])
        values["reservations"] = tuple(values.get("reservations") or ())
        values["notes"] = tuple(tuple(str(p) for p in n) for n in values.get("notes") or ())
        values["idle_allocations"] = tuple(values.get("idle_allocations") or ())
        return cls(**values)


_ENTRY_FIELDS = tuple(f.name for f in fields(IdleEntry))


def note_line(parts: tuple[str, ...]) -> Line:
    """A kept note as a line: every second part is a command."""
    return tuple(Code(part) if index % 2 else part for index, part in enumerate(parts) if part)


def _reservations(entry: IdleEntry) -> Line:
    return joined([Code(r) for r in entry.reservations])


def _saving(entry: IdleEntry) -> Line:
    if entry.reservations and not entry.freed_hour:
        return ("~$0.00/h until the reservation ", *_reservations(entry), " is released")
    return (money(entry.freed_hour),)


def alert_card(entry: IdleEntry, now: float, auto_action: AutoAction, note: Line = ()) -> Reply:
    """The alert with its remedies; ``note`` says what happened to an earlier remedy."""
    since = entry.idle_since or now
    cluster = entry.cluster_id
    advice = "Delete" if entry.recommendation == Recommendation.DELETE else "Scale to zero"
    reply = Reply(f"Idle cluster {cluster}: {money(entry.cost_hour)}", public=True)
    reply.add(
        Heading(f"Idle cluster: {cluster}"),
        Text(
            Strong(cluster),
            " (",
            Code(entry.target),
            ") has had only jobs holding idle GPUs since "
            if entry.idle_allocations
            else ") has had no Slurm jobs that run or can start since ",
            Time(since),
            f" ({duration(now - since)}) while paying for its nodes.",
        ),
        Fields(
            (
                Field("Nodes", entry.nodes),
                Field("Estimated cost", money(entry.cost_hour)),
                Field("Spent idle so far", money(entry.spent(now), per_hour=False)),
                Field("Scaling to zero saves", *_saving(entry)),
                Field("Recommendation", advice),
            )
        ),
        Text(Em(entry.recommendation_reason)),
    )
    for parts in entry.notes:
        reply.add(Note(*note_line(parts), "."))
    if entry.recommendation == Recommendation.DELETE:
        reply.add(
            Note(
                "A delete is not the end: clusterbot keeps the cluster's spec, and ",
                Code(f"/cluster restore {cluster}"),
                " creates it again, after approval.",
            )
        )
    if entry.reservations:
        reply.add(
            Note(
                "Reserved capacity (",
                *_reservations(entry),
                ") is billed whether its nodes run or not: scaling to zero frees the nodes for "
                "other work but no money until the reservation is released.",
            )
        )
    if entry.auto_action_at is not None and auto_action != AutoAction.OFF:
        what = "scale to zero" if auto_action == AutoAction.SCALE_TO_ZERO else "delete"
        reply.add(
            Note(
                Strong("Auto-action"),
                f": clusterbot will {what} {cluster} at ",
                Time(entry.auto_action_at),
                " unless someone responds or jobs return.",
            )
        )
    if note:
        reply.add(Text(*note))
    return _remedies(reply, entry)


def _remedies(reply: Reply, entry: IdleEntry) -> Reply:
    """The alert's foot: where its costs come from, and its buttons."""
    cluster = entry.cluster_id
    reply.add(
        Note(
            f"costs are estimates (list prices {PRICES_AS_OF}) · ",
            Code(entry.cluster),
            " · ",
            console_link(entry.cluster),
        ),
        Rule(),
        Buttons(
            (
                Button(Remedy(entry.cluster), "Scale to zero", style="primary"),
                Button(
                    Remedy(entry.cluster, delete=True),
                    "Ask to delete",
                    style="danger",
                    confirm=Confirm(
                        title=f"Ask to delete {cluster}?",
                        text=(
                            "This posts a request to delete ",
                            Strong(cluster),
                            " (its nodes, Slurm controller and queue; home storage is kept). "
                            "A second person must approve it before anything is deleted.",
                        ),
                        confirm="Post the request",
                        danger=True,
                    ),
                ),
                Button(Keep(entry.cluster), "Keep"),
            ),
        ),
        Buttons(
            (
                Select(
                    "Snooze…",
                    tuple((label, Snooze(entry.cluster, s)) for s, label in SNOOZE_CHOICES),
                ),
            ),
        ),
        Note(
            "Scale to zero: an approver's click scales it down now (undo it with /cluster "
            "resize); anyone else's posts a request for an approver."
        ),
    )
    return reply


def closed_alert(cluster: str, title: str, text: Line, undo: Button | None = None) -> Reply:
    """An alert that no longer asks anything: its buttons are gone, with the reason why, and
    at most one button that takes it back (Un-snooze, Stop keeping)."""
    cluster_id = cluster.rsplit("/", 1)[-1]
    reply = Reply(f"{cluster_id}: {title}", public=True).add(
        Heading(f"Idle cluster: {cluster_id}"),
        Text(*text),
    )
    if undo is not None:
        reply.add(Buttons((undo,)))
    return reply.add(Note(Code(cluster)))


def reminder(entry: IdleEntry, now: float) -> Reply:
    """The reply in an alert's thread when the same idle period is due again."""
    since = entry.idle_since or now
    cluster = entry.cluster_id
    return Reply(f"{cluster} is still idle", public=True).add(
        Text(
            Strong("Still idle"),
            f": {cluster} has run nothing since ",
            Time(since),
            f" ({duration(now - since)}); ",
            money(entry.spent(now), per_hour=False),
            f" spent idle so far, {money(entry.cost_hour)} now. The alert above has the remedies.",
        )
    )


def _why(entry: IdleEntry, now: float) -> str:
    """A table's cell: who kept or snoozed it is a mention, which a table cannot hold, so
    it is said in a note under the table."""
    if entry.status == Status.EXEMPT and entry.kept_by:
        return "kept (below)"
    if entry.status == Status.SNOOZED and entry.snoozed_until:
        return f"snoozed for {duration(entry.snoozed_until - now)} (below)"
    return entry.reason


def _who(entry: IdleEntry) -> Note | None:
    if entry.status == Status.EXEMPT and entry.kept_by:
        when: Line = (" at ", Time(entry.kept_at)) if entry.kept_at else ()
        return Note(f"{entry.cluster_id}: kept by ", UserRef(entry.kept_by), *when, ".")
    if entry.status == Status.SNOOZED and entry.snoozed_until:
        who = UserRef(entry.snoozed_by) if entry.snoozed_by else "someone"
        return Note(
            f"{entry.cluster_id}: snoozed by ", who, " until ", Time(entry.snoozed_until), "."
        )
    return None


def report(
    entries: Sequence[IdleEntry],
    failures: Sequence[str],
    now: float,
    *,
    swept_at: float | None = None,
    sweep_button: bool = False,
) -> Reply:
    """The idle report. Its header counts only clusters that are idle and paying now."""
    idle = [e for e in entries if e.status in IDLE_PAYING]
    snoozed = [e for e in entries if e.status == Status.SNOOZED]
    waste = sum(e.cost_hour or 0.0 for e in idle)
    header = f"Idle report: {plural(len(idle), 'idle cluster')} paying {money(waste)}"
    reply = Reply(header)
    reply.add(Heading(header))
    if swept_at is not None:
        reply.add(Note(f"From the sweep {duration(now - swept_at)} ago (", Time(swept_at), ")."))
    if entries:
        order = {s: i for i, s in enumerate(Status)}
        rows = []
        # quiet for as long as the sweep saw it, which is the length its reason gives too
        seen_at = swept_at if swept_at is not None else now
        for entry in sorted(entries, key=lambda e: (order[e.status], e.cluster_id)):
            since = entry.idle_since
            rows.append(
                (
                    entry.cluster_id,
                    str(entry.status),
                    duration(seen_at - since) if since is not None else "-",
                    money(entry.cost_hour, per_hour=False),
                    _why(entry, now),
                )
            )
        reply.add(
            Table.of(("CLUSTER", "STATUS", "QUIET FOR", "$/H", "WHY"), rows, frozenset({2, 3}))
        )
    else:
        reply.add(Text("No clusters in the configured targets."))
    if snoozed:
        reply.add(Note(f"Snoozed, not counted above: {', '.join(e.cluster_id for e in snoozed)}."))
    for entry in entries:
        who = _who(entry)
        if who is not None:
            reply.add(who)
        for parts in entry.notes:
            reply.add(Note(f"{entry.cluster_id}: ", *note_line(parts), "."))
        if entry.jobs_hidden:
            reply.add(
                Note(
                    f"{entry.cluster_id}: Slurm nodes are allocated but no job is "
                    "visible to clusterbot's account; slurm.conf PrivateData may hide other "
                    "users' jobs. It is counted as busy."
                )
            )
    for failure in failures:
        reply.add(Note(failure))
    kept = [e for e in entries if e.kept_by]
    buttons: list[Button | Select] = [
        Button(Keep(e.cluster, keep=False), f"Stop keeping {e.cluster_id}") for e in kept[:20]
    ]
    if sweep_button:
        buttons.append(Button(SweepNow(), "Sweep now", style="primary"))
    if buttons:
        reply.add(Buttons(tuple(buttons[:25])))
    reply.add(
        Note(
            "busy: jobs that run or can start, working nodes, an operation or not RUNNING · "
            "held jobs and jobs that cannot start are not busy · waiting: quiet, not yet idle · "
            "free: no compute nodes · unknown: activity could not be read, never alerted"
        )
    )
    return reply


def kept_text(record: IdleRecord) -> Line:
    who = UserRef(record.kept_by) if record.kept_by else "someone"
    when = Time(record.kept_at) if record.kept_at else "earlier"
    return (
        Strong("Kept"),
        " by ",
        who,
        " at ",
        when,
        ": no idle alerts for it until someone stops keeping it (",
        Code("/cluster idle"),
        ").",
    )
