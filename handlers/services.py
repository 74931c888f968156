"""The core's object graph, built whole from its ports in one place: the composition root
(``bot/app.py``) hands it the real adapters, the unit tests hand it in-memory ones."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from handlers.capabilities import REGISTRY
from handlers.capability import Kernel, Options, Ports
from handlers.changes.approvals import Approvals
from handlers.changes.execution import Executor
from handlers.changes.ledger import RequestLedger
from handlers.changes.preapproved import Cards
from handlers.changes.release import Releases
from handlers.changes.tracking import POLLS_AT_ONCE, Tracker
from handlers.costs import PriceBook
from handlers.dispatch import Dispatcher
from handlers.health.alerts import HealthAlerts
from handlers.health.clicks import HealthClicks
from handlers.idle.alerts import AlertBoard, IdleAlerts, Remedies
from handlers.idle.clicks import IdleClicks
from handlers.idle.observe import ActivityObserver
from handlers.idle.sweep import Sweeper
from handlers.intake import Intake
from handlers.owed.engine import Engine, Room
from handlers.owed.posting import Outbox
from handlers.policy import Policy
from handlers.ports import (
    CrashPoint,
)
from handlers.reading.clusters import ClusterDirectory
from handlers.reading.reports import Reports
from handlers.registry import Registry
from handlers.schedules.asking import NightAsking
from handlers.schedules.labels import LabelSchedules
from handlers.schedules.nights import Nights
from handlers.schedules.service import Schedules
from handlers.schedules.thread import ScheduleThread
from handlers.spend.digest import Digest
from handlers.spend.report import SpendReport


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
    board: AlertBoard
    ledger: RequestLedger
    executor: Executor
    approvals: Approvals
    tracker: Tracker
    alerts: IdleAlerts
    clicks: IdleClicks
    sweeper: Sweeper
    reports: Reports
    dispatcher: Dispatcher
    releases: Releases | None = None
    intake: Intake | None = None
    schedules: Schedules | None = None
    spending: SpendReport | None = None
    digest: Digest | None = None
    jobs: tuple[BoundJob, ...] = ()  # every capability's periodic jobs


def build(
    ports: Ports, policy: Policy, options: Options, registry: Registry = REGISTRY
) -> Services:
    clock, owner, crash, lease = ports.clock, options.owner, options.crash, options.lease
    prices = PriceBook.with_overrides(policy.prices)
    directory = ClusterDirectory(ports.control_plane, options.targets, options.read_deadline)
    engine = Engine(
        store=ports.owed,
        clock=clock,
        owner=owner,
        crash=crash,
        lease=lease,
        patience=options.patience,
        post_window=options.post_window,
    )
    outbox = Outbox(
        engine=engine, messenger=ports.messenger, alert_channel=options.alert_channel, clock=clock
    )
    engine.add(outbox)
    board = AlertBoard(
        records=ports.records,
        messenger=ports.messenger if options.alert_channel else None,
        channel=options.alert_channel,
        rules=policy.idle,
        clock=clock,
        engine=engine,
    )
    health = HealthAlerts(
        board=board,
        messenger=ports.messenger,
        channel=options.alert_channel,
        policy=policy.health,
        clock=clock,
        engine=engine,
        outbox=outbox,
    )
    ledger = RequestLedger(
        store=ports.requests,
        messenger=ports.messenger,
        clock=clock,
        people=ports.people,
        engine=engine,
        on_ended=[board.remedy_ended, health.request_ended],
    )
    executor = Executor(
        store=ports.requests,
        vertex=ports.control_plane,
        ledger=ledger,
        clock=clock,
        nodes=ports.nodes,
        window=options.send_window,
        node_window=options.node_window,
    )
    engine.add(executor)
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
    engine.add(tracker, room=Room(POLLS_AT_ONCE, spread=options.poll_stagger))
    remedies = Remedies(board, approvals, ports.control_plane, prices)
    health_clicks = HealthClicks(
        alerts=health,
        directory=directory,
        approvals=approvals,
        slurm=ports.activity,
        prices=prices,
        clock=clock,
    )
    alerts = IdleAlerts(board, remedies, clock)
    clicks = IdleClicks(board, remedies, clock)
    sweeper = Sweeper(
        directory=directory,
        observer=ActivityObserver(
            ports.activity, clock, options.concurrency, policy.idle.idle_after
        ),
        records=ports.records,
        operations=ports.operations,
        reports=ports.reports,
        leases=ports.leases,
        alerts=alerts,
        rules=policy.idle,
        prices=prices,
        clock=clock,
        owner=owner,
        interval=options.sweep_interval,
        spend=ports.spend,
        schedules=ports.schedules,
        health=health,
        crash=crash,
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
    spending = None
    if ports.spend is not None:
        spending = SpendReport(
            store=ports.spend,
            records=ports.records,
            requests=ports.requests,
            clock=clock,
            interval=options.sweep_interval,
            messenger=ports.messenger,
            charts=ports.charts,
        )
    releases = None
    if ports.releases is not None:
        releases = Releases(
            store=ports.releases,
            activity=ports.activity,
            approvals=approvals,
            ledger=ledger,
            messenger=ports.messenger,
            policy=policy,
            clock=clock,
            channel=options.alert_channel,
            grace=options.release_grace,
            crash=crash,
        )
    cards = Cards(approvals, options.alert_channel)
    engine.add(cards)
    schedules = _schedules(ports, directory, approvals, ledger, crash, cards, outbox)
    if schedules is not None and policy.schedules:
        schedules.labels = LabelSchedules(
            schedules=schedules,
            records=ports.records,
            profiles=policy.schedules,
            channel=options.alert_channel,
            clock=clock,
        )
    digest = _digest(ports, options, spending, sweeper, engine)
    intake = None
    if ports.submissions is not None:
        intake = Intake(
            store=ports.submissions,
            requests=ports.requests,
            messenger=ports.messenger,
            clock=clock,
            owner=owner,
            crash=crash,
        )
    services = _capability_services(
        registry,
        Kernel(
            policy,
            prices,
            directory,
            approvals,
            reports,
            registry.commands,
            {
                "idle": clicks,
                "spend": spending,
                "schedules": schedules,
                "health": health_clicks,
                "releases": releases,
                "digest": digest,
            },
        ),
    )
    return Services(
        engine=engine,
        outbox=outbox,
        releases=releases,
        intake=intake,
        directory=directory,
        board=board,
        ledger=ledger,
        executor=executor,
        approvals=approvals,
        tracker=tracker,
        alerts=alerts,
        clicks=clicks,
        sweeper=sweeper,
        reports=reports,
        schedules=schedules,
        spending=spending,
        digest=digest,
        dispatcher=Dispatcher(services, directory, policy, ports.roles, registry=registry),
        jobs=tuple(_jobs(registry, services, options)),
    )


def _capability_services(registry: Registry, kernel: Kernel) -> dict[str, object]:
    """Each capability's service, by its name, built from the kernel."""
    return {c.name: c.build(kernel) for c in registry.capabilities}


def _jobs(
    registry: Registry, services: Mapping[str, object], options: Options
) -> Iterator[BoundJob]:
    """Each capability's periodic jobs on its service; none where the service is off."""
    for capability in registry.capabilities:
        service = services[capability.name]
        for job in capability.jobs if service is not None else ():
            seconds = options.checks.get(job.name, job.every)
            yield BoundJob(job.name, seconds, functools.partial(job.run, service))


def _digest(
    ports: Ports, options: Options, spending: SpendReport | None, sweeper: Sweeper, engine: Engine
) -> Digest | None:
    if spending is None or ports.digests is None or options.alert_channel is None:
        return None
    digest = Digest(
        spend=spending,
        store=ports.digests,
        sweeps=sweeper,
        schedules=ports.schedules,
        messenger=ports.messenger,
        channel=options.alert_channel,
        engine=engine,
        clock=ports.clock,
        firings=options.digest_firings,
    )
    engine.add(digest)
    return digest


def _schedules(
    ports: Ports,
    directory: ClusterDirectory,
    approvals: Approvals,
    ledger: RequestLedger,
    crash: CrashPoint,
    cards: Cards,
    outbox: Outbox,
) -> Schedules | None:
    if ports.schedules is None or ports.calendar is None:
        return None
    thread = ScheduleThread(ports.schedules, outbox)
    nights = Nights(
        store=ports.schedules,
        calendar=ports.calendar,
        directory=directory,
        activity=ports.activity,
        approvals=approvals,
        asking=NightAsking(approvals, cards, ports.roles, thread),
        thread=thread,
        clock=ports.clock,
        crash=crash,
    )
    return Schedules(nights=nights, approvals=approvals, ledger=ledger)
