"""A health alert's clicks, declared beside the service that answers them: Resume node and
Drain node ask for a change (a second person approves it on its card), Snooze holds back a
new health alert for the cluster for a while."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.vertex.errors import VertexError
from handlers.changes.approvals import Approvals
from handlers.changes.plan import ChangePlan, PlanError
from handlers.clicking import Click, Clicked, click
from handlers.costs import PriceBook
from handlers.desk import Desk
from handlers.entities import Origin
from handlers.grammar import CommandError
from handlers.health.alert import (
    DRAIN,
    RESUME,
    SNOOZE,
    HealthSnooze,
    NodeAction,
    health_snooze,
    node_action,
)
from handlers.health.alerts import HealthAlerts
from handlers.health.kinds import plan_drain, plan_resume
from handlers.health.rules import ClusterHealth
from handlers.idle.rules import IdleRecord
from handlers.policy import Role
from handlers.ports import Clock
from handlers.reading.clusters import ClusterDirectory
from handlers.replies import Code, Reply, Time, UserRef, notice


class HealthClicks:
    def __init__(
        self,
        *,
        alerts: HealthAlerts,
        directory: ClusterDirectory,
        approvals: Approvals,
        prices: PriceBook,
        clock: Clock,
    ) -> None:
        self.alerts = alerts
        self.directory = directory
        self.approvals = approvals
        self.prices = prices
        self.clock = clock

    async def node(self, user: str, action: NodeAction) -> Reply:
        """Ask for the node's Resume or Drain, on a card in the alert's channel."""
        verb = "Drain" if action.drain else "Resume"
        record, _ = await self.alerts.board.records.get(action.cluster)
        health = ClusterHealth.from_dict((record.episode and record.episode.health) or {})
        broken = next((n for n in health.nodes if n.name == action.node), None)
        if record.episode is None or not record.episode.open or broken is None:
            return notice(f"{verb} node", f"{action.node} was in service at the last sweep.")
        try:
            cluster = await self.directory.resolve(action.cluster, "health")
            plan: ChangePlan[Any] = (
                plan_drain(cluster, broken.name, _reason(broken.trouble, user), self.prices)
                if action.drain
                else plan_resume(cluster, broken, self.prices)
            )
            channel = record.episode.alert_channel or self.alerts.channel_for(cluster.cluster_id)
            request = await self.approvals.submit(user, channel or "", plan, origin=Origin.HEALTH)
        except (PlanError, CommandError, VertexError) as error:
            why = error.reason if isinstance(error, CommandError) else str(error)
            return notice(f"{verb} node", f"Not asked: {why}")
        said = (f"{verb} {broken.name} asked by ", UserRef(user), " (request ", Code(request.id))
        await self.alerts.note(
            action.cluster, plan.target, (*said, "); its card is in the channel.")
        )
        return notice(
            f"{verb} node", f"Asked: request {request.id}; an approver decides on its card."
        )

    async def snooze(self, user: str, action: HealthSnooze) -> Reply:
        until = self.clock() + action.seconds

        def snoozed(record: IdleRecord) -> IdleRecord:
            if record.episode is None:
                return record
            return replace(record, episode=replace(record.episode, snoozed_until=until))

        record = await self.alerts.board.update(action.cluster, snoozed)
        if record.episode is None:
            return notice("Snooze", "This cluster has had no health problem to snooze.")
        target = "/".join(action.cluster.split("/")[:4])
        await self.alerts.note(action.cluster, target, ("Snoozed by ", UserRef(user), "."))
        return notice("Snooze", "No new health alert for it until ", Time(until), ".")


def _reason(trouble: str, user: str) -> str:
    """The reason Slurm keeps on a node drained from an alert: what was wrong, and who."""
    return f"clusterbot: {trouble} (drained from the health alert by {user})"


async def _node(services: Desk, clicked: Clicked[NodeAction]) -> Reply:
    if services.health is None:
        return notice("Health", "This clusterbot posts no health alerts.")
    return await services.health.node(clicked.user, clicked.action)


async def _snooze(services: Desk, clicked: Clicked[HealthSnooze]) -> Reply:
    if services.health is None:
        return notice("Health", "This clusterbot posts no health alerts.")
    return await services.health.snooze(clicked.user, clicked.action)


CLICKS: tuple[Click, ...] = (
    click(
        (RESUME, DRAIN),
        node_action,
        Role.OPERATOR,  # asks; an approver decides on the card
        "Asking to resume or drain a node",
        _node,
        names_cluster=True,
    ),
    click(
        (SNOOZE,),
        health_snooze,
        Role.OPERATOR,
        "Snoozing health alerts",
        _snooze,
        names_cluster=True,
    ),
)
