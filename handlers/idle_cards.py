"""The idle alert, redrawn as the cluster's situation changes, and the idle report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.vertex.models import Cluster
from handlers.cards import duration, slack_time
from handlers.costs import PRICES_AS_OF, money
from handlers.idle import IdleRecord, Status, Verdict
from handlers.replies import (
    Button,
    Buttons,
    Confirm,
    Fields,
    Heading,
    Note,
    Reply,
    Rule,
    Select,
    Table,
    Text,
    escape,
    mention,
)

SNOOZE_CHOICES = ((3600, "1 hour"), (8 * 3600, "8 hours"), (24 * 3600, "24 hours"))


@dataclass(frozen=True)
class IdleEntry:
    """One cluster's line in a sweep: what was seen and what it costs."""

    cluster: str  # full name
    target: str
    verdict: Verdict
    nodes: str  # e.g. "cpu: 4 x n2-standard-8"
    cost_hour: float | None
    record: IdleRecord

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    def spent(self, now: float) -> float | None:
        since = self.verdict.idle_since
        if self.cost_hour is None or since is None:
            return None
        return self.cost_hour * (now - since) / 3600


def paying_pools(cluster: Cluster) -> str:
    parts = []
    for pool in cluster.compute_pools():
        if pool.node_count:
            parts.append(f"{pool.id}: {pool.node_count} x {pool.machine_description}")
    return "; ".join(parts) or "no compute nodes"


def alert_card(entry: IdleEntry, now: float, auto_action: str) -> Reply:
    verdict = entry.verdict
    since = verdict.idle_since or now
    cluster = escape(entry.cluster_id)
    advice = "Scale to zero" if verdict.recommendation == "scale_to_zero" else "Delete"
    reply = Reply(f"Idle cluster {entry.cluster_id}: {money(entry.cost_hour)}", public=True)
    reply.add(
        Heading(f"Idle cluster: {entry.cluster_id}"),
        Text(
            f"*{cluster}* (`{escape(entry.target)}`) has had no Slurm jobs since "
            f"{slack_time(since)} ({duration(now - since)}) while paying for its nodes."
        ),
        Fields(
            (
                f"*Nodes*\n{escape(entry.nodes)}",
                f"*Estimated cost*\n{money(entry.cost_hour)}",
                f"*Spent idle so far*\n{money(entry.spent(now), per_hour=False)}",
                f"*Recommendation*\n{advice}",
            )
        ),
        Text(f"_{escape(verdict.recommendation_reason)}_"),
    )
    if entry.record.auto_action_at is not None and auto_action != "off":
        what = "scale to zero" if auto_action == "scale_to_zero" else "delete"
        reply.add(
            Note(
                f"*Auto-action*: clusterbot will {what} {cluster} at "
                f"{slack_time(entry.record.auto_action_at)} unless someone responds or jobs return."
            )
        )
    reply.add(
        Note(f"costs are estimates (list prices {PRICES_AS_OF}) · `{escape(entry.cluster)}`"),
        Rule(),
        Buttons(
            (
                Button("idle_scale_to_zero", "Scale to zero", entry.cluster, style="primary"),
                Button(
                    "idle_delete",
                    "Delete",
                    entry.cluster,
                    style="danger",
                    confirm=Confirm(
                        title=f"Delete {entry.cluster_id}?",
                        text=f"This asks to delete *{cluster}*: its nodes, Slurm controller and "
                        "queue. Home storage is kept.",
                        confirm="Ask to delete",
                        danger=True,
                    ),
                ),
                Button("idle_keep", "Keep", entry.cluster),
            ),
            block_id=f"idle:{entry.cluster_id}",
        ),
        Buttons(
            (
                Select(
                    "idle_snooze",
                    "Snooze…",
                    tuple(
                        (label, f"{seconds}|{entry.cluster}") for seconds, label in SNOOZE_CHOICES
                    ),
                ),
            ),
            block_id=f"snooze:{entry.cluster_id}",
        ),
    )
    return reply


def closed_alert(cluster: str, title: str, text: str) -> Reply:
    """An alert that no longer asks anything: its buttons are gone, with the reason why."""
    cluster_id = cluster.rsplit("/", 1)[-1]
    return Reply(f"{cluster_id}: {title}", public=True).add(
        Heading(f"Idle cluster: {cluster_id}"),
        Text(text),
        Note(f"`{escape(cluster)}`"),
    )


def report(entries: Sequence[IdleEntry], failures: Sequence[str], now: float) -> Reply:
    idle = [e for e in entries if e.verdict.status in (Status.IDLE, Status.SNOOZED)]
    waste = sum(e.cost_hour or 0.0 for e in idle)
    reply = Reply(f"Idle report: {len(idle)} idle clusters, {money(waste)}")
    reply.add(Heading(f"Idle report: {len(idle)} idle, {money(waste)} wasted"))
    if entries:
        rows = [f"{'CLUSTER':<10} {'STATUS':<8} {'SINCE':>12} {'$/H':>10}  WHY"]
        order = {s: i for i, s in enumerate(Status)}
        for entry in sorted(entries, key=lambda e: (order[e.verdict.status], e.cluster_id)):
            since = entry.verdict.idle_since
            age = duration(now - since) if since is not None else "-"
            why = entry.verdict.reason
            if entry.verdict.status == Status.EXEMPT and entry.record.kept_by:
                why = f"kept by {entry.record.kept_by}"
            if entry.verdict.status == Status.SNOOZED and entry.record.snoozed_until:
                left = duration(entry.record.snoozed_until - now)
                why = f"snoozed by {entry.record.snoozed_by} for {left}"
            rows.append(
                f"{entry.cluster_id:<10} {entry.verdict.status:<8} {age:>12} "
                f"{money(entry.cost_hour, per_hour=False):>10}  {why}"
            )
        reply.add(Table(tuple(escape(r) for r in rows)))
    else:
        reply.add(Text("No clusters in the configured targets."))
    for failure in failures:
        reply.add(Note(escape(failure)))
    kept = [e for e in entries if e.record.kept_by]
    for entry in kept[:20]:
        reply.add(
            Buttons(
                (Button("idle_unkeep", f"Stop keeping {entry.cluster_id}", entry.cluster),),
                block_id=f"unkeep:{entry.cluster_id}",
            )
        )
    reply.add(
        Note(
            "busy: jobs, an operation or not RUNNING · waiting: quiet, not yet idle · free: no "
            "compute nodes · unknown: activity could not be read, never alerted"
        )
    )
    return reply


def kept_text(record: IdleRecord) -> str:
    who = mention(record.kept_by) if record.kept_by else "someone"
    when = slack_time(record.kept_at) if record.kept_at else "earlier"
    return (
        f"*Kept* by {who} at {when}: no idle alerts for it until someone stops keeping it "
        "(`/cluster idle`)."
    )
