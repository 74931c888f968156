"""The core's object graph, built whole from its ports in one place: the composition root
(``bot/app.py``) hands it the real adapters, the unit tests hand it in-memory ones."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from handlers.capabilities import REGISTRY
from handlers.capability import Capability, Kernel, Options, Ports
from handlers.changes.approvals import Approvals
from handlers.changes.execution import Executor
from handlers.changes.ledger import RequestLedger
from handlers.changes.preapproved import Cards
from handlers.changes.tracking import POLLS_AT_ONCE, Tracker
from handlers.costs import PriceBook
from handlers.dispatch import Dispatcher
from handlers.home import HomePart
from handlers.intake import Intake
from handlers.owed.engine import AT_ONCE, Engine
from handlers.owed.model import Room
from handlers.owed.posting import Outbox
from handlers.pacing import WriteQuota
from handlers.policy import Policy
from handlers.reading.clusters import ClusterDirectory
from handlers.reading.reports import Reports
from handlers.registry import Registry
from handlers.sweep.gpus import GPU_IDLE
from handlers.sweep.observe import ActivityObserver
from handlers.sweep.state import IDLE_RULES
from handlers.sweep.sweep import Sweeper, SweepStores

S = TypeVar("S")


@dataclass(frozen=True)
class BoundJob:
    """A capability's periodic job, on its service: what the composition root schedules."""

    name: str
    seconds: float
    run: Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Services:
    engine: Engine
    outbox: Outbox
    directory: ClusterDirectory
    ledger: RequestLedger
    executor: Executor
    approvals: Approvals
    tracker: Tracker
    sweeper: Sweeper
    reports: Reports
    dispatcher: Dispatcher
    intake: Intake | None = None
    jobs: tuple[BoundJob, ...] = ()  # every capability's periodic jobs
    # each capability's service, by its name (None where it is off)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    home: tuple[HomePart, ...] = ()  # the capabilities' parts of the Home tab, in order

    def of(self, capability: Capability[S]) -> S:
        """The capability's service, typed as its ``build`` makes it."""
        made: S = self.capabilities[capability.name]
        return made


def build(
    ports: Ports, policy: Policy, options: Options, registry: Registry = REGISTRY
) -> Services:
    problems = policy.problems(registry.sections.values())
    if problems:
        raise ValueError(f"the policy is not whole: {'; '.join(problems)}")
    prices = PriceBook.with_overrides(policy.prices)
    directory = ClusterDirectory(ports.control_plane, options.targets, options.read_deadline)
    core = _core(ports, policy, options, directory, prices)
    swept = _sweep(ports, policy, options, core, prices)
    cards = Cards(core.approvals, options.alert_channel)  # every request's card, owed
    core.engine.add(cards)
    kernel = Kernel(
        ports=ports,
        options=options,
        policy=policy,
        prices=prices,
        directory=directory,
        engine=core.engine,
        outbox=core.outbox,
        cards=cards,
        approvals=core.approvals,
        ledger=core.ledger,
        sweeper=swept.sweeper,
        reports=swept.reports,
        commands=registry.commands,
    )
    services = {c.name: c.build(kernel) for c in registry.capabilities}
    capabilities = [(c, services[c.name]) for c in registry.capabilities]
    # what the sweep hands its clusters to, and what a request's end is told to: each
    # capability's own, made from its service; the sweep and the ledger name none of them
    listeners = [c.listener(made) for c, made in capabilities if c.listener]
    swept.sweeper.listeners = tuple(listener for listener in listeners if listener is not None)
    ended = [c.on_ended(made) for c, made in capabilities if c.on_ended]
    core.ledger.on_ended.extend(hook for hook in ended if hook is not None)
    settled = [c.on_settled(made) for c, made in capabilities if c.on_settled]
    core.ledger.on_settled.extend(hook for hook in settled if hook is not None)
    parts = [c.home(made) for c, made in capabilities if c.home]
    return Services(
        engine=core.engine,
        outbox=core.outbox,
        intake=_intake(ports, options),
        directory=directory,
        ledger=core.ledger,
        executor=core.executor,
        approvals=core.approvals,
        tracker=core.tracker,
        sweeper=swept.sweeper,
        reports=swept.reports,
        capabilities=services,
        home=tuple(part for part in parts if part is not None),
        dispatcher=Dispatcher(services, directory, policy, ports.roles, registry=registry),
        jobs=tuple(_jobs(registry, services, options)),
    )


@dataclass(frozen=True)
class _Core:
    """The durable path and the change flow every capability shares."""

    engine: Engine
    outbox: Outbox
    ledger: RequestLedger
    executor: Executor
    approvals: Approvals
    tracker: Tracker


def _core(
    ports: Ports, policy: Policy, options: Options, directory: ClusterDirectory, prices: PriceBook
) -> _Core:
    clock, owner, crash = ports.clock, options.owner, options.crash
    engine = Engine(
        store=ports.owed,
        clock=clock,
        owner=owner,
        crash=crash,
        lease=options.lease,
        patience=options.patience,
        post_window=options.post_window,
    )
    outbox = Outbox(
        engine=engine, messenger=ports.messenger, alert_channel=options.alert_channel, clock=clock
    )
    engine.add(outbox)
    ledger = RequestLedger(
        store=ports.requests,
        messenger=ports.messenger,
        clock=clock,
        people=ports.people,
        engine=engine,
    )
    executor = Executor(
        store=ports.requests,
        vertex=ports.control_plane,
        ledger=ledger,
        clock=clock,
        nodes=ports.nodes,
        window=options.send_window,
        node_window=options.node_window,
        quota=None
        if options.writes_per_minute is None
        else WriteQuota(options.writes_per_minute, clock),
    )
    # changes in a room of their own: a change whose quota slot has come never waits behind
    # a crowd of chat items due earlier (a fleet's night owes a card and lines per cluster);
    # twice the shared room's places, so that the changes a minute's quota frees go in a
    # few ticks (each change a read and a PATCH)
    engine.add(executor, room=Room(2 * AT_ONCE))
    approvals = Approvals(
        store=ports.requests,
        directory=directory,
        policy=policy,
        prices=prices,
        messenger=ports.messenger,
        ledger=ledger,
        engine=engine,
        clock=clock,
        owner=owner,
        crash=crash,
    )
    tracker = Tracker(
        store=ports.operations,
        requests=ports.requests,
        vertex=ports.control_plane,
        messenger=ports.messenger,
        ledger=ledger,
        clock=clock,
    )
    engine.add(tracker, room=Room(POLLS_AT_ONCE, spread=options.poll_stagger, leaves=True))
    return _Core(engine, outbox, ledger, executor, approvals, tracker)


@dataclass(frozen=True)
class _Swept:
    """The sweep (the core's look at every cluster, ``handlers/sweep/``), and the read side
    on it."""

    sweeper: Sweeper
    reports: Reports


def _sweep(
    ports: Ports, policy: Policy, options: Options, core: _Core, prices: PriceBook
) -> _Swept:
    clock, directory = ports.clock, core.approvals.directory
    rules = policy.section(IDLE_RULES)
    observer = ActivityObserver(
        ports.activity,
        clock,
        options.concurrency,
        rules.idle_after,
        gpus=ports.gpus,
        gpu_rules=policy.section(GPU_IDLE),
    )
    stores = SweepStores(ports.records, ports.operations, ports.reports, ports.leases)
    sweeper = Sweeper(
        directory=directory,
        observer=observer,
        stores=stores,
        rules=rules,
        prices=prices,
        clock=clock,
        owner=options.owner,
        interval=options.sweep_interval,
        crash=options.crash,  # its listeners: what the capabilities declare (``build``)
    )
    reports = Reports(
        directory=directory,
        requests=ports.requests,
        operations=ports.operations,
        prices=prices,
        clock=clock,
        activity=ports.activity,
        sweeper=sweeper,
        messenger=ports.messenger,
        people=ports.people,
    )
    return _Swept(sweeper, reports)


def _intake(ports: Ports, options: Options) -> Intake | None:
    if ports.submissions is None:
        return None
    return Intake(
        store=ports.submissions,
        requests=ports.requests,
        messenger=ports.messenger,
        clock=ports.clock,
        owner=options.owner,
        crash=options.crash,
    )


def _jobs(
    registry: Registry, services: Mapping[str, object], options: Options
) -> Iterator[BoundJob]:
    """Each capability's periodic jobs on its service; none where the service is off."""
    for capability in registry.capabilities:
        service = services[capability.name]
        for job in capability.jobs if service is not None else ():
            seconds = options.checks.get(job.name, job.every)
            yield BoundJob(job.name, seconds, functools.partial(job.run, service))
