"""Idle alerts, declared: the clicks on an idle alert (Scale to zero, Delete, Snooze,
Unsnooze, Keep and its undoing)."""

from __future__ import annotations

from handlers.actions import ActionId, Keep, Remedy, Unsnooze, needs, snooze
from handlers.capability import Capability, Kernel
from handlers.clicking import click
from handlers.idle.alerts import AlertBoard, IdleAlerts, Remedies
from handlers.idle.clicks import IdleClicks
from handlers.idle.home import IdleHome
from handlers.policy import Role
from handlers.reading.reports import NO_IDLE
from handlers.replies import Reply, notice
from handlers.sweep.state import IDLE_RULES


def build(kernel: Kernel) -> IdleClicks:
    """The idle alerts on the sweep's idle records (posted where there is an alert channel)
    and their clicks, whose remedies go through the approvals."""
    ports, channel = kernel.ports, kernel.options.alert_channel
    board = AlertBoard(
        records=ports.records,
        messenger=ports.messenger if channel else None,
        channel=channel,
        rules=kernel.policy.section(IDLE_RULES),
        clock=ports.clock,
        engine=kernel.engine,
        outbox=kernel.outbox,
    )
    remedies = Remedies(board, kernel.approvals, ports.control_plane, kernel.prices)
    return IdleClicks(board, remedies, ports.clock)


async def _no_idle() -> Reply:
    return notice("Idle report", NO_IDLE)


IDLE = Capability(
    "idle",
    build,
    listener=lambda c: None if c is None else IdleAlerts(c.board, c.remedies, c.clock),
    on_ended=lambda c: None if c is None else c.board.remedy_ended,
    home=lambda c: IdleHome(c.clock),
    clicks=(
        click(
            (ActionId.SCALE_TO_ZERO, ActionId.DELETE),
            lambda i, v: Remedy(needs(v), delete=i == ActionId.DELETE),
            Role.OPERATOR,
            "Acting on idle alerts",
            lambda s, c: _no_idle() if s is None else s.remedy(c.user, c.role, c.action),
            names_cluster=True,
        ),
        click(
            (ActionId.SNOOZE,),
            lambda i, v: snooze(v),
            Role.OPERATOR,
            "Acting on idle alerts",
            lambda s, c: _no_idle() if s is None else s.snooze(c.user, c.action),
            names_cluster=True,
        ),
        click(
            (ActionId.UNSNOOZE,),
            lambda i, v: Unsnooze(needs(v)),
            Role.OPERATOR,
            "Acting on idle alerts",
            lambda s, c: _no_idle() if s is None else s.unsnooze(c.user, c.action),
            names_cluster=True,
        ),
        click(
            (ActionId.KEEP, ActionId.UNKEEP),
            lambda i, v: Keep(needs(v), keep=i == ActionId.KEEP),
            Role.OPERATOR,
            "Acting on idle alerts",
            lambda s, c: _no_idle() if s is None else s.keep(c.user, c.action),
            names_cluster=True,
        ),
    ),
)
