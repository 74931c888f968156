"""Spend, declared: ``/cluster cost``, the spend ledger's report with its chart; and the
weekly digest, owed when its cron fires."""

from __future__ import annotations

from handlers.capability import Capability, Job, Kernel
from handlers.commanding import Caller, Subcommand
from handlers.grammar import CommandError
from handlers.policy import Role
from handlers.replies import Reply
from handlers.spend.digest import Digest
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


DIGEST_LOOK = 60.0  # seconds between looks for a digest firing that is due


def build_digest(kernel: Kernel) -> Digest | None:
    digest: Digest | None = kernel.parts.get("digest")
    return digest if digest is not None and digest.firings is not None else None


# each firing is owed when due, by any replica that looks, and done by the engine
DIGEST = Capability(
    "digest", build_digest, jobs=(Job("digest", lambda d: d.owe_due(), DIGEST_LOOK),)
)
