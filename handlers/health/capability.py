"""Health, declared: the last sweep's health and one node (read, or asked to resume or
drain), and the clicks on a health alert (Resume, Drain, Show, Snooze)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from handlers.actions import ActionId, HealthSweepNow
from handlers.capability import Capability, Kernel
from handlers.changes.approvals import Approvals
from handlers.changes.plan import PlanError
from handlers.clicking import Click, Clicked, click
from handlers.commanding import Caller, Subcommand
from handlers.domain.errors import SlurmUnreadableError
from handlers.grammar import CommandError
from handlers.health.alert import (
    DRAIN,
    RESUME,
    SHOW,
    SNOOZE,
    HealthSnooze,
    NodeAction,
    ShowNode,
    health_snooze,
    node_action,
    show_node,
)
from handlers.health.alerts import HealthAlerts
from handlers.health.channels import HEALTH_TABLE
from handlers.health.clicks import HealthClicks
from handlers.health.commands import NODE, NODE_USAGE, NodeCommand, node_form, node_role, parse_node
from handlers.health.episodes import HEALTH_RECORD
from handlers.health.form import DRAIN_FORM
from handlers.health.home import HealthHome
from handlers.health.kinds import NODE_DRAIN, NODE_RESUME
from handlers.health.report import HEALTH, HEALTH_USAGE, Health, health_reply, parse_health
from handlers.policy import Role
from handlers.ports import Clock
from handlers.reading.reports import NO_IDLE, Sweeps
from handlers.replies import Reply, Text, notice


class HealthReports(Protocol):
    """What health reads of the read side: the last sweep, and a sweep at once."""

    sweeper: Sweeps | None
    clock: Clock

    async def sweep_now(self, then: Callable[[], Awaitable[Reply]] | None = None) -> Reply: ...


@dataclass(frozen=True)
class HealthDesk:
    """What health's subcommands and clicks run on: the reports (the last sweep's health),
    the health alerts' clicks (None where none are posted) and the approvals a node change
    goes through."""

    reports: HealthReports
    approvals: Approvals
    health: HealthClicks | None

    async def read(self, cluster: str | None) -> Reply:
        """The last sweep's health of every cluster, or of one, at once."""
        if self.reports.sweeper is None:
            return Reply("Cluster health").add(Text(NO_IDLE))
        latest = await self.reports.sweeper.latest()
        entries = latest.entries if latest is not None else []
        swept = latest.finished if latest is not None else None
        return health_reply(entries, cluster, self.reports.clock(), swept)


async def _node(services: HealthDesk, clicked: Clicked[NodeAction]) -> Reply:
    if services.health is None:
        return notice("Health", "This clusterbot posts no health alerts.")
    return await services.health.node(clicked.user, clicked.action)


async def _show(services: HealthDesk, clicked: Clicked[ShowNode]) -> Reply:
    if services.health is None:
        return notice("Health", "This clusterbot reads no Slurm nodes.")
    return await services.health.show(clicked.action.cluster, clicked.action.node)


async def _snooze(services: HealthDesk, clicked: Clicked[HealthSnooze]) -> Reply:
    if services.health is None:
        return notice("Health", "This clusterbot posts no health alerts.")
    return await services.health.snooze(clicked.user, clicked.action)


async def _sweep_now(services: HealthDesk, clicked: Clicked[HealthSweepNow]) -> Reply:
    """Sweep at once, and the clusters' health from it (in place of the one clicked)."""
    return await services.reports.sweep_now(lambda: services.read(None))


CLICKS: tuple[Click, ...] = (
    click(
        (RESUME, DRAIN),
        node_action,
        Role.OPERATOR,  # asks; an approver decides on the card
        "Asking to resume or drain a node",
        _node,
        names_cluster=True,
    ),
    click((SHOW,), show_node, Role.VIEWER, "Reading a node", _show, names_cluster=True),
    click(
        (ActionId.HEALTH_SWEEP_NOW,),
        lambda i, v: HealthSweepNow(),
        Role.VIEWER,
        "Sweeping",
        _sweep_now,
        in_place=lambda _a: True,  # the new health takes the place of the one clicked
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


async def run_node(services: HealthDesk, command: NodeCommand, caller: Caller) -> Reply | None:
    if services.health is None:
        return notice("Node", "This clusterbot reads no Slurm nodes.")
    if command.verb is None:
        return await services.health.show(command.cluster, command.node)
    drain = command.verb == "drain"
    try:
        request = await services.health.ask(
            caller.user, caller.channel, command.cluster, command.node, drain, command.reason
        )
    except PlanError as error:
        raise CommandError(str(error), "node") from None
    except SlurmUnreadableError as error:
        raise CommandError(f"Slurm could not be read: {error.reason}", "node") from None
    return await services.approvals.card_pending(request)  # the card is the answer


async def run_health(services: HealthDesk, command: Health, caller: Caller) -> Reply:
    return await services.read(command.cluster)


def build(kernel: Kernel) -> HealthDesk:
    ports, options = kernel.ports, kernel.options
    alerts = HealthAlerts(
        records=ports.keeper.of(HEALTH_RECORD),
        messenger=ports.messenger,
        channel=options.alert_channel,
        policy=kernel.policy.section(HEALTH_TABLE),
        clock=ports.clock,
        engine=kernel.engine,
        outbox=kernel.outbox,
        interval=options.sweep_interval,
    )
    clicks = HealthClicks(
        alerts=alerts,
        directory=kernel.directory,
        approvals=kernel.approvals,
        slurm=kernel.ports.activity,
        prices=kernel.prices,
        clock=kernel.ports.clock,
    )
    return HealthDesk(kernel.reports, kernel.approvals, clicks)


HEALTH_CAPABILITY = Capability(
    "health",
    build,
    policy=(HEALTH_TABLE,),
    records=(HEALTH_RECORD,),
    listener=lambda d: None if d.health is None else d.health.alerts,
    on_ended=lambda d: None if d.health is None else d.health.alerts.request_ended,
    home=lambda d: HealthHome(),
    commands=(
        Subcommand("health", HEALTH_USAGE, HEALTH, Role.VIEWER, parse_health, run_health),
        Subcommand(
            "node",
            NODE_USAGE,
            NODE,
            Role.VIEWER,
            parse_node,
            run_node,
            role_for=node_role,
            form=node_form,
        ),
    ),
    kinds=(NODE_RESUME, NODE_DRAIN),
    forms=(DRAIN_FORM,),
    clicks=CLICKS,
)
