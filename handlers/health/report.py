"""``/cluster health [CLUSTER]``: the last sweep's health of each cluster, at once: its nodes
out of service (Slurm's reason, who set it, since when), its state when it left RUNNING,
the jobs held up by unavailable nodes, and what the broken nodes cost while broken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from handlers.actions import HealthSweepNow
from handlers.costs import money
from handlers.grammar import arity, cluster_word
from handlers.replies import (
    Button,
    Buttons,
    Code,
    Heading,
    Note,
    Part,
    Reply,
    Strong,
    Table,
    Text,
    Time,
)
from handlers.sweep.alert import IdleEntry
from handlers.sweep.health import ClusterHealth
from handlers.words import duration, plural

HEALTH_USAGE = "/cluster health [CLUSTER]"

HEALTH = "broken nodes, clusters out of RUNNING and queues held up by them, from the last sweep"
ROWS = 25  # nodes shown for a cluster


@dataclass(frozen=True)
class Health:
    cluster: str | None = None


def parse_health(args: list[str]) -> Health:
    arity(args, HEALTH_USAGE, 0, 1)
    return Health(cluster_word(args[0], "health") if args else None)


def unhealthy(entries: Sequence[IdleEntry]) -> list[tuple[IdleEntry, ClusterHealth]]:
    """The swept clusters with a health problem, each with its health."""
    read = ((e, ClusterHealth.from_dict(e.health)) for e in entries if e.health)
    return [(e, h) for e, h in read if not h.healthy]


def health_reply(
    entries: Sequence[IdleEntry], cluster: str | None, now: float, swept_at: float | None
) -> Reply:
    reply = Reply("cluster health").add(Heading("Cluster health"))
    if swept_at is None:
        return reply.add(
            Text("No sweep has finished yet. Sweep now, or wait for the scheduled sweep."),
            Buttons((Button(HealthSweepNow(), "Sweep now", style="primary"),)),
        )
    chosen = [e for e in entries if cluster in (None, e.cluster, e.cluster_id)]
    if cluster is not None and not chosen:
        reply.add(Text(f"{cluster} was not in the last sweep."))
    sick = unhealthy(chosen)
    unread = [e.cluster_id for e in chosen if e.health is None]
    if not sick and chosen:
        reply.add(
            Text(
                "Healthy: no node out of service, no cluster out of RUNNING, no job held up "
                f"by unavailable nodes, in {plural(len(chosen) - len(unread), 'cluster')} read."
            )
        )
    for entry, health in sick:
        reply.add(*health_parts(entry.cluster_id, entry.target, health, now))
    if unread:
        reply.add(
            Note(
                "Not read this sweep (Slurm unreadable, or a change under way): ",
                ", ".join(unread[:20]),
                ".",
            )
        )
    return reply.add(
        Note("From the sweep ", Time(swept_at), "."),
        Buttons((Button(HealthSweepNow(), "Sweep now"),)),
    )


def health_parts(cluster_id: str, target: str, health: ClusterHealth, now: float) -> list[Part]:
    """What is wrong with one cluster: its broken nodes (reason, who, how long) and what they
    cost an hour while broken, its state out of RUNNING, the jobs held up."""
    said: list[str | Strong | Code] = [Strong(cluster_id), " (", Code(target), ")"]
    if health.nodes:
        cost = money(health.broken_hour)
        said.append(f": {plural(len(health.nodes), 'node')} out of service, {cost} while broken")
    parts: list[Part] = [Text(*said, ".")]
    if health.trouble is not None:
        parts.append(Text(f"State {health.trouble.state}: {health.trouble.message}."))
    if health.nodes:
        rows = [
            (
                n.name,
                str(n.trouble) + ("" if n.billed else " (no VM)"),
                n.reason[:60],
                n.by or "-",
                duration(now - n.since) if n.since else "-",
            )
            for n in health.nodes[:ROWS]
        ]
        parts.append(
            Table.of(("NODE", "STATE", "REASON", "SET BY", "FOR"), rows, right=frozenset({4}))
        )
    for job in health.blocked[:5]:
        slurm_says = job.text if job.text.startswith(job.reason) else f"{job.reason}: {job.text}"
        waits_on = f" on {', '.join(job.nodes)}" if job.nodes else ""
        parts.append(
            Text(
                f"Job {job.job_id} ({job.user}, {job.partition}) has waited "
                f"{duration(job.pending_for)}{waits_on}; Slurm says: {slurm_says.rstrip(': ')}."
            )
        )
    return parts
