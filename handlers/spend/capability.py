"""Spend, declared: ``/cluster cost``, the spend ledger's report with its chart."""

from __future__ import annotations

from handlers.capability import Capability, Kernel
from handlers.commanding import Caller, Subcommand
from handlers.grammar import CommandError
from handlers.policy import Role
from handlers.replies import Reply
from handlers.spend.report import COST, COST_USAGE, Cost, SpendReport, parse_cost


def build(kernel: Kernel) -> SpendReport | None:
    spend: SpendReport | None = kernel.parts.get("spend")
    return spend


async def run_cost(spend: SpendReport | None, command: Cost, caller: Caller) -> Reply:
    if spend is None:
        raise CommandError("this clusterbot keeps no spend ledger", "cost")
    return await spend.cost(command, caller.channel)


SPEND = Capability(
    "spend",
    build,
    commands=(
        Subcommand(
            "cost",
            COST_USAGE,
            COST,
            Role.VIEWER,
            parse_cost,
            run_cost,
            heavy=True,
        ),
    ),
)
