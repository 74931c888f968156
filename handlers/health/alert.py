"""A health episode's alert: what is wrong with a cluster, for how long, what its broken nodes
cost while broken, and a fix on a button; edited as the episode changes and when it heals.

Buttons (action ids of the design's contract): ``health_resume`` (Resume node: Slurm's
RESUME, a change a second person approves), ``health_drain`` (Drain node: for a node that
fails or does not respond while Slurm still schedules onto it), ``health_snooze`` (no new
health alert for the cluster for a while; this one is still edited); and ``health_show``
(the node as slurmrestd lists it now, told to whoever clicked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from handlers.actions import ActionError, offered
from handlers.costs import money
from handlers.grammar import NODE_NAME
from handlers.health.episodes import Episode
from handlers.health.report import health_parts
from handlers.replies import (
    Button,
    Buttons,
    Code,
    Field,
    Fields,
    Heading,
    Line,
    Note,
    Reply,
    Select,
    Strong,
    Text,
    Time,
)
from handlers.sweep.health import BrokenNode, ClusterHealth, NodeTrouble
from handlers.words import duration, plural

RESUME: Final = "health_resume"
DRAIN: Final = "health_drain"
SNOOZE: Final = "health_snooze"
SHOW: Final = "health_show"
SNOOZES = ((4 * 3600, "4 hours"), (24 * 3600, "1 day"), (7 * 24 * 3600, "1 week"))
RESUMABLE = frozenset({NodeTrouble.DOWN, NodeTrouble.DRAINED, NodeTrouble.DRAINING})
DRAINABLE = frozenset({NodeTrouble.FAILING, NodeTrouble.NOT_RESPONDING})
MENU = 25  # nodes offered in a menu


@dataclass(frozen=True)
class NodeAction:
    """Resume or drain one node of a cluster, from its health alert."""

    cluster: str
    node: str
    drain: bool = False

    @property
    def action_id(self) -> str:
        return DRAIN if self.drain else RESUME

    @property
    def value(self) -> str:
        return f"{self.cluster}|{self.node}"


def node_action(action_id: str, value: str) -> NodeAction:
    cluster, _, node = value.rpartition("|")
    if not cluster or not NODE_NAME.match(node):
        raise ActionError("That node is not one clusterbot offers.")
    return NodeAction(cluster, node, drain=action_id == DRAIN)


@dataclass(frozen=True)
class ShowNode:
    """One node as slurmrestd lists it now, told to whoever clicked."""

    cluster: str
    node: str
    action_id = SHOW

    @property
    def value(self) -> str:
        return f"{self.cluster}|{self.node}"


def show_node(action_id: str, value: str) -> ShowNode:
    picked = node_action(action_id, value)
    return ShowNode(picked.cluster, picked.node)


@dataclass(frozen=True)
class HealthSnooze:
    cluster: str
    seconds: int
    action_id = SNOOZE

    @property
    def value(self) -> str:
        return f"{self.seconds}|{self.cluster}"


def health_snooze(action_id: str, value: str) -> HealthSnooze:
    return HealthSnooze(*offered(value, SNOOZES))


def health_card(
    episode: Episode, cluster_id: str, target: str, now: float, note: Line = ()
) -> Reply:
    """The episode's alert as it is now; ``note`` says what happened to a fix asked from it."""
    health = ClusterHealth.from_dict(episode.health or {})
    if not episode.open:
        return _healed(episode, cluster_id, target, note)
    what = summary(health)
    reply = Reply(f"Health: {cluster_id}: {what}", public=True).add(
        Heading(f"Health: {cluster_id}"),
        *health_parts(cluster_id, target, health, now),
        Fields(
            (
                Field("Broken since", Time(_since(episode, health))),
                Field("Broken nodes cost", money(health.broken_hour)),
                Field("Cost since alerted", money(episode.cost, per_hour=False)),
            )
        ),
    )
    if any(n.trouble == NodeTrouble.DOWN for n in health.nodes):
        reply.add(
            Note(
                "Vertex AI has no call that replaces one node: for a fresh VM, resize its pool "
                "down and up again (",
                Code(f"/cluster resize {cluster_id} POOL N"),
                ").",
            )
        )
    if note:
        reply.add(Note(*note))
    if episode.snoozed_until and episode.snoozed_until > now:
        reply.add(Note("No new health alert for it until ", Time(episode.snoozed_until), "."))
    controls = _controls(episode.cluster, health)
    return reply.add(
        Note("This message is edited as the problem changes, and when it heals."),
        Buttons(tuple(controls)),
    )


def _since(episode: Episode, health: ClusterHealth) -> float:
    """When it broke: the earliest reason Slurm dates, else when clusterbot first saw it."""
    dated = [n.since for n in health.nodes if n.since]
    return min([*dated, episode.opened_at])


def summary(health: ClusterHealth) -> str:
    """What is wrong, in a few words: ``2 nodes down/drained, 3 jobs held up``."""
    parts = []
    if health.nodes:
        troubles = sorted({str(n.trouble) for n in health.nodes})
        parts.append(f"{plural(len(health.nodes), 'node')} {'/'.join(troubles)}")
    if health.trouble is not None:
        parts.append(f"state {health.trouble.state}")
    if health.blocked:
        parts.append(f"{plural(len(health.blocked), 'job')} held up")
    return ", ".join(parts) or "a problem"


def _controls(cluster: str, health: ClusterHealth) -> list[Button | Select]:
    controls: list[Button | Select] = []
    for drain, allowed, verb in ((False, RESUMABLE, "Resume"), (True, DRAINABLE, "Drain")):
        nodes = [n for n in health.nodes if n.trouble in allowed][:MENU]
        if len(nodes) == 1:
            action = NodeAction(cluster, nodes[0].name, drain=drain)
            controls.append(Button(action, f"{verb} {nodes[0].name}", style="primary"))
        elif nodes:
            options = tuple((_label(n), NodeAction(cluster, n.name, drain=drain)) for n in nodes)
            controls.append(Select(f"{verb} a node…", options))
    shown = health.nodes[:MENU]
    if len(shown) == 1:
        controls.append(Button(ShowNode(cluster, shown[0].name), f"Show {shown[0].name}"))
    elif shown:
        controls.append(
            Select("Show a node…", tuple((_label(n), ShowNode(cluster, n.name)) for n in shown))
        )
    snoozes = tuple((label, HealthSnooze(cluster, seconds)) for seconds, label in SNOOZES)
    controls.append(Select("Snooze…", snoozes))
    return controls


def _label(node: BrokenNode) -> str:
    return f"{node.name} ({node.trouble})"[:75]


def _healed(episode: Episode, cluster_id: str, target: str, note: Line) -> Reply:
    healed = episode.healed_at or episode.seen_at
    reply = Reply(f"Health: {cluster_id} healed", public=True).add(
        Heading(f"Health: {cluster_id}"),
        Text(
            Strong("Healed"),
            f": {cluster_id} (",
            Code(target),
            ") has had no broken node, no state out of RUNNING and no job held up since ",
            Time(healed),
            f", {duration(healed - episode.opened_at)} after it was alerted.",
        ),
        Fields((Field("Broken nodes cost", money(episode.cost, per_hour=False)),)),
    )
    if note:
        reply.add(Note(*note))
    return reply


def gone_card(cluster_id: str) -> Reply:
    """The alert of a cluster that no longer exists: nothing left to fix."""
    return Reply(f"Health: {cluster_id} deleted", public=True).add(
        Heading(f"Health: {cluster_id}"),
        Text(Strong("Deleted"), f": {cluster_id} no longer exists, nor its nodes."),
    )
