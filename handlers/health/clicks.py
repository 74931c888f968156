"""A health alert's clicks, declared beside the service that answers them: Resume node and
Drain node ask for a change (a second person approves it on its card), Snooze holds back a
new health alert for the cluster for a while."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from handlers.changes.approvals import Approvals
from handlers.changes.plan import ChangePlan, PlanError
from handlers.costs import PriceBook
from handlers.domain.operations import SlurmNode
from handlers.entities import ApprovalRequest, Origin
from handlers.errors import UserError
from handlers.health.alert import (
    HealthSnooze,
    NodeAction,
)
from handlers.health.alerts import HealthAlerts
from handlers.health.episodes import HealthRecord
from handlers.health.kinds import plan_drain, plan_resume
from handlers.ports import ActivityReader, Clock
from handlers.reading.clusters import ClusterDirectory
from handlers.replies import Code, Field, Fields, Heading, Note, Reply, Time, UserRef, notice
from handlers.sweep.health import NodeTrouble, broken_nodes


class HealthClicks:
    """A node's detail, and its Resume or Drain asked for, from an alert or typed."""

    def __init__(
        self,
        *,
        alerts: HealthAlerts,
        directory: ClusterDirectory,
        approvals: Approvals,
        slurm: ActivityReader,
        prices: PriceBook,
        clock: Clock,
    ) -> None:
        self.alerts = alerts
        self.directory = directory
        self.approvals = approvals
        self.slurm = slurm
        self.prices = prices
        self.clock = clock

    async def node(self, user: str, action: NodeAction) -> Reply:
        """From an alert: ask on a card in the alert's channel, with the alert told."""
        verb = "Drain" if action.drain else "Resume"
        record, _ = await self.alerts.records.get(action.cluster)
        channel = self.alerts.channel_of(record)
        try:
            request = await self.ask(user, channel or "", action.cluster, action.node, action.drain)
        except UserError as error:
            return notice(f"{verb} node", f"Not asked: {error.said}")
        said = (f"{verb} {action.node} asked by ", UserRef(user), " (request ", Code(request.id))
        await self.alerts.note(action.cluster, (*said, "); its card is below."))
        return notice(f"{verb} node", f"Asked: request {request.id}; an approver decides.")

    async def ask(
        self, user: str, channel: str, key: str, node: str, drain: bool, reason: str = ""
    ) -> ApprovalRequest:
        """Plan the node's Resume or Drain on Slurm as it is now and post its card; raises
        ``PlanError`` (nothing to do, or it cannot be done) or ``CommandError``."""
        cluster = await self.directory.resolve(key, "node")
        found = await self._node(cluster.name or key, node)
        broken = broken_nodes([found])
        plan: ChangePlan[Any]
        if drain:
            if broken and broken[0].trouble in (NodeTrouble.DRAINED, NodeTrouble.DRAINING):
                raise PlanError(f"{node} is {broken[0].trouble} already")
            trouble = str(broken[0].trouble) if broken else ""
            said = reason or _reason(trouble or "drained", user)
            plan = plan_drain(cluster, node, said, self.prices, trouble)
        else:
            if not broken:
                raise PlanError(f"{node} is in service: there is nothing to resume")
            plan = plan_resume(cluster, broken[0], self.prices)
        return await self.approvals.submit(user, channel, plan, origin=Origin.HEALTH)

    async def _node(self, cluster: str, node: str) -> SlurmNode:
        for found in await self.slurm.nodes(cluster):
            if found.name == node:
                return found
        raise PlanError(f"Slurm has no node {node} in {cluster.rsplit('/', 1)[-1]}")

    async def show(self, key: str, node: str) -> Reply:
        """The node as slurmrestd lists it now: its state, its reason, who set it, since when."""
        try:
            cluster = await self.directory.resolve(key, "node")
            found = await self._node(cluster.name or key, node)
        except UserError as error:
            return notice(f"Node {node}", error.said)
        broken = next(iter(broken_nodes([found])), None)
        since = found.reason_at
        reply = Reply(f"{node}: {'+'.join(sorted(found.states))}").add(
            Heading(f"{node} of {cluster.cluster_id}"),
            Fields(
                (
                    Field("Slurm state", "+".join(sorted(found.states))),
                    Field("Partitions", ", ".join(found.partitions) or "-"),
                    Field("Reason", found.reason or "none"),
                    Field("Set by", found.reason_by or "-"),
                    Field("Since", *((Time(since),) if since else ("-",))),
                    Field("In service", "no: " + str(broken.trouble) if broken else "yes"),
                )
            ),
        )
        if broken is not None and broken.trouble != NodeTrouble.NOT_RESPONDING:
            reply.add(
                Note(
                    Code(f"/cluster node {cluster.cluster_id} {node} resume"),
                    " asks to return it to service.",
                )
            )
        return reply

    async def snooze(self, user: str, action: HealthSnooze) -> Reply:
        until = self.clock() + action.seconds

        def snoozed(record: HealthRecord) -> HealthRecord:
            if record.episode is None:
                return record
            return replace(record, episode=replace(record.episode, snoozed_until=until))

        record = await self.alerts.update(action.cluster, snoozed)
        if record.episode is None:
            return notice("Snooze", "This cluster has had no health problem to snooze.")
        await self.alerts.note(action.cluster, ("Snoozed by ", UserRef(user), "."))
        return notice("Snooze", "No new health alert for it until ", Time(until), ".")


def _reason(trouble: str, user: str) -> str:
    """The reason Slurm keeps on a node drained from an alert: what was wrong, and who."""
    return f"clusterbot: {trouble} (drained from the health alert by {user})"
