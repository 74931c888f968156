"""Spend, declared: ``/cluster cost``, the spend ledger's report with its chart; and the
weekly digest, owed when its cron fires."""

from __future__ import annotations

from handlers.capability import Capability, Job, Kernel, Port
from handlers.commanding import Caller, Subcommand
from handlers.grammar import CommandError
from handlers.policy import Role
from handlers.replies import Reply
from handlers.schedules.capability import SCHEDULE_STORE
from handlers.spend.asked import COST, COST_USAGE, Cost, parse_cost
from handlers.spend.digest import Digest, DigestStore, Firings
from handlers.spend.home import SpendHome
from handlers.spend.keeper import SpendKeeper
from handlers.spend.ports import Charts, SpendStore
from handlers.spend.report import SpendReport
from handlers.spend.runs import SPEND_RECORD

SPEND_LEDGER: Port[SpendStore] = Port("spend", SpendStore)
CHARTS: Port[Charts] = Port("charts", Charts)  # None: the cost report is a table
DIGEST_FIRINGS: Port[DigestStore] = Port("digests", DigestStore)
# when the digest is due; None: only when asked (no cron)
DIGEST_CRON: Port[Firings] = Port("digest_cron", Firings)


def build(kernel: Kernel) -> SpendReport | None:
    """The cost report, where the store keeps a spend ledger."""
    ports = kernel.ports
    ledger = ports.port(SPEND_LEDGER)
    if ledger is None:
        return None
    keeper = SpendKeeper(
        records=ports.keeper.of(SPEND_RECORD),
        store=ledger,
        clock=ports.clock,
        interval=kernel.options.sweep_interval,
        crash=kernel.options.crash,
    )
    return SpendReport(
        store=ledger,
        keeper=keeper,
        requests=ports.requests,
        clock=ports.clock,
        interval=kernel.options.sweep_interval,
        messenger=ports.messenger,
        charts=ports.port(CHARTS),
    )


async def run_cost(spend: SpendReport | None, command: Cost, caller: Caller) -> Reply:
    if spend is None:
        raise CommandError("this clusterbot keeps no spend ledger", "cost")
    return await spend.cost(command, caller.channel)


SPEND = Capability(
    "spend",
    build,
    ports=(SPEND_LEDGER, CHARTS),
    home=lambda report: None if report is None else SpendHome(report),
    records=(SPEND_RECORD,),
    listener=lambda report: None if report is None else report.keeper,
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
    """The weekly digest, where there is a ledger, a store for its firings and a channel."""
    ports, options, spending = kernel.ports, kernel.options, build(kernel)
    firings = ports.port(DIGEST_FIRINGS)
    if spending is None or firings is None or options.alert_channel is None:
        return None
    digest = Digest(
        spend=spending,
        store=firings,
        sweeps=kernel.sweeper,
        schedules=ports.port(SCHEDULE_STORE),
        messenger=ports.messenger,
        channel=options.alert_channel,
        engine=kernel.engine,
        clock=ports.clock,
        firings=ports.port(DIGEST_CRON),
    )
    kernel.engine.add(digest)
    return digest


async def _owe_due(digest: Digest) -> None:
    """Each firing of the digest's cron, owed when due (by any replica that looks) and done
    by the engine; none without a cron (it is fired only when asked)."""
    if digest.firings is not None:
        await digest.owe_due()


DIGEST = Capability(
    "digest",
    build_digest,
    ports=(SPEND_LEDGER, DIGEST_FIRINGS, DIGEST_CRON, SCHEDULE_STORE),
    jobs=(Job("digest", _owe_due, DIGEST_LOOK),),
)
