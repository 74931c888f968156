"""A capability plugs in: declared in one object and listed once, its subcommand, click and
periodic job are folded by the registry and run on its own service, built from the kernel;
two declarations of one name are refused when the registry is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.provision import provisions
from bot.store import Store
from handlers.actions import needs
from handlers.capabilities import CAPABILITIES, REGISTRY
from handlers.capability import Capability, Job, Kernel, Port
from handlers.changes.capability import CHANGES
from handlers.clicking import click
from handlers.commanding import Subcommand, one_cluster
from handlers.home import Home
from handlers.policy import Policy, Role
from handlers.registry import Registry
from handlers.replies import Heading, Reply, notice
from handlers.schedules.capability import CALENDAR
from handlers.schedules.ports import Calendar
from handlers.spend.capability import CHARTS, DIGEST_CRON, SPEND_LEDGER
from handlers.sweep.report import SweepReport
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_services_unit import POLICY, make_bot


@dataclass(frozen=True)
class Census:
    cluster: str


@dataclass(frozen=True)
class Ping:
    cluster: str

    @property
    def action_id(self) -> str:
        return "census_ping"

    @property
    def value(self) -> str:
        return self.cluster


@dataclass
class CensusService:
    """The capability's own service: it counts its job's runs, and reads the kernel's
    directory for its subcommand."""

    kernel: Kernel
    runs: list[str] = field(default_factory=list)

    async def census(self, key: str) -> Reply:
        cluster = await self.kernel.directory.resolve(key, "census")
        return notice("Census", ", ".join(p.id for p in cluster.node_pools))

    async def tick(self) -> None:
        self.runs.append("tick")

    async def home(self, reply: Reply, latest: SweepReport) -> None:
        reply.add(Heading(f"Census of {len(latest.entries)} clusters"))


CENSUS = Capability(
    "census",
    CensusService,
    commands=(
        Subcommand(
            "census",
            "/cluster census CLUSTER",
            "one cluster's node pools, counted",
            Role.VIEWER,
            one_cluster("/cluster census CLUSTER", Census),
            lambda s, c, who: s.census(c.cluster),
        ),
    ),
    clicks=(
        click(
            ("census_ping",),
            lambda i, v: Ping(needs(v)),
            Role.VIEWER,
            "Pinging",
            lambda s, c: s.census(c.action.cluster),
        ),
    ),
    jobs=(Job("census-tick", lambda s: s.tick(), every=5.0),),
    home=lambda s: s,
)


async def test_a_new_capability_is_its_declaration_and_one_line_in_the_list() -> None:
    registry = Registry((*CAPABILITIES, CENSUS))
    bot = make_bot(ManualClock(), Policy.model_validate(POLICY), registry=registry)
    assert "gpu" in text(await bot.ask("U0ALICE", "census c1"))
    assert "/cluster census CLUSTER" in text(await bot.ask("U0ALICE", "help"))
    said = text(await bot.ask("U0ALICE", "census"))  # its usage, from its own declaration
    assert "census needs CLUSTER" in said and "Usage: /cluster census CLUSTER" in said
    assert "did you mean 'census'" in text(await bot.ask("U0ALICE", "censu c1"))
    assert "gpu" in text(await bot.click("U0ALICE", "census_ping", "c1"))
    [job] = [j for j in bot.services.jobs if j.name == "census-tick"]
    assert job.seconds == 5.0
    await job.run()
    [service] = [s for s in _services(bot) if isinstance(s, CensusService)]
    assert service.runs == ["tick"]
    await bot.services.sweeper.sweep(force=True)  # its part of the Home tab, after health's
    home = Home(bot.services.reports, bot.store, Policy.model_validate(POLICY), bot.services.home)
    shown = text((await home.snapshot()).shared)
    assert "Census of 1 clusters" in shown
    assert shown.index("Health problems") < shown.index("Census of 1 clusters")


def _services(bot: object) -> list[object]:
    return list(bot.services.dispatcher.services.values())  # type: ignore[attr-defined]


def test_the_shipped_periodic_jobs_are_declared_by_their_capabilities() -> None:
    declared = {j.name for c in CAPABILITIES for j in c.jobs}
    assert {"schedules", "releases", "digest"} <= declared  # and any a new capability adds
    assert REGISTRY.capabilities == CAPABILITIES


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (CENSUS, "two capabilities of one name"),
        (Capability("more", CensusService, commands=CENSUS.commands), "two subcommands"),
        (Capability("more", CensusService, clicks=CENSUS.clicks), "two clicks"),
        (Capability("more", CensusService, kinds=CHANGES.kinds), "two kinds of change"),
    ],
)
def test_two_declarations_of_one_name_are_refused(extra: Capability, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Registry((*CAPABILITIES, CENSUS, extra))


def test_the_service_provides_every_port_the_capabilities_declare(tmp_path: Path) -> None:
    """The service gives its store for every declared port whose Protocol it meets, and the
    calendar, the chart drawer and the digest's cron by name: each shipped capability has
    all it needs, none of it missing or None."""
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}", REGISTRY.read_plan)
    provided = provisions(store, "0 9 * * mon", "UTC")
    assert set(provided) == set(REGISTRY.ports)
    assert all(given is not None for given in provided.values())
    named = {CALENDAR.name, CHARTS.name, DIGEST_CRON.name}
    assert {name for name, given in provided.items() if given is store} == set(
        REGISTRY.ports
    ) - named
    assert set(provisions(object(), "off", "UTC")) == named  # a store that meets none
    assert provisions(object(), "off", "UTC")[DIGEST_CRON.name] is None  # no cron: no firing


def test_a_provision_no_capability_declares_is_refused() -> None:
    with pytest.raises(ValueError, match="no capability declares the port digest_crn"):
        REGISTRY.provided(object(), digest_crn=lambda since, until: [])


def test_a_port_of_one_name_is_one_port() -> None:
    other = Capability("more", CensusService, ports=(Port(SPEND_LEDGER.name, Calendar),))
    with pytest.raises(ValueError, match="two ports are called spend"):
        Registry((*CAPABILITIES, other))
