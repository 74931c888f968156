"""The core's object graph, built whole from its ports in one place: the composition root
(``bot/app.py``) hands it the real adapters, the unit tests hand it in-memory ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from handlers.capabilities import REGISTRY
from handlers.capability import Kernel
from handlers.changes.approvals import Approvals
from handlers.changes.effects import NODE_WINDOW, SEND_WINDOW
from handlers.changes.execution import Executor
from handlers.changes.ledger import RequestLedger
from handlers.changes.preapproved import Cards
from handlers.changes.release import Releases
from handlers.changes.tracking import POLLS_AT_ONCE, Tracker
from handlers.costs import PriceBook
from handlers.dispatch import Dispatcher
from handlers.domain.names import Target
from handlers.health.alerts import HealthAlerts
from handlers.health.clicks import HealthClicks
from handlers.idle.alerts import AlertBoard, IdleAlerts, Remedies
from handlers.idle.clicks import IdleClicks
from handlers.idle.observe import ActivityObserver
from handlers.idle.sweep import Sweeper
from handlers.intake import Intake
from handlers.messenger import Messenger
from handlers.owed.engine import LEASE, Engine, Room
from handlers.owed.posting import POST_WINDOW, Outbox
from handlers.owed.store import OwedStore
from handlers.policy import Policy
from handlers.ports import (
    ActivityReader,
    Calendar,
    Charts,
    Clock,
    ControlPlane,
    CrashPoint,
    IdleRecordStore,
    LeaseStore,
    NodeUpdater,
    OperationStore,
    People,
    ReleaseStore,
    ReportStore,
    RequestStore,
    RoleSource,
    ScheduleStore,
    SpendStore,
    SubmissionStore,
    no_crash,
)
from handlers.reading.clusters import READ_DEADLINE, ClusterDirectory
from handlers.reading.reports import Reports
from handlers.registry import Registry
from handlers.schedules.asking import NightAsking
from handlers.schedules.labels import LabelSchedules
from handlers.schedules.nights import Nights
from handlers.schedules.service import Schedules
from handlers.schedules.thread import ScheduleThread
from handlers.spend.digest import Digest, DigestStore, Firings
from handlers.spend.report import SpendReport


@dataclass(frozen=True)
class Ports:
    """Everything the core needs from the world."""

    requests: RequestStore
    operations: OperationStore
    leases: LeaseStore
    reports: ReportStore
    records: IdleRecordStore
    control_plane: ControlPlane
    activity: ActivityReader
    messenger: Messenger
    roles: RoleSource
    people: People  # who is a person on the platform, and how one is named
    clock: Clock
    owed: OwedStore  # what the bot owes the world, done by the engine
    releases: ReleaseStore | None = None  # the pipeline hook's state; None: no hook
    submissions: SubmissionStore | None = None  # form submissions; None: no forms
    spend: SpendStore | None = None  # the spend ledger; None: spend is not recorded
    schedules: ScheduleStore | None = None  # off-hours schedules; None: none can be set
    calendar: Calendar | None = None  # when a schedule's times come (with ``schedules``)
    charts: Charts | None = None  # draws the cost chart; None: the cost report is a table
    digests: DigestStore | None = None  # the weekly digest's firings; None: no digest
    nodes: NodeUpdater | None = None  # sets Slurm node states; None: no node changes


@dataclass(frozen=True)
class Options:
    owner: str  # this replica's name in leases
    targets: Sequence[Target]
    alert_channel: str | None  # None: no idle alerts are posted
    sweep_interval: float
    concurrency: int = 32  # control-plane calls at once (settings: vertex_concurrency)
    lease: float = LEASE
    read_deadline: float = READ_DEADLINE
    crash: CrashPoint = no_crash
    release_grace: float = 60.0  # seconds a drained queue stays empty before a release acts
    poll_stagger: float = 0.0  # seconds over which a batch of operation polls is started
    send_window: float = SEND_WINDOW  # seconds a change's call may be applied once sent
    node_window: float = NODE_WINDOW  # the same for a Slurm node update
    post_window: float = POST_WINDOW  # seconds a chat post may still arrive once sent
    patience: float = 2.0  # seconds a tick waits for the owed work it started
    digest_firings: Firings | None = None  # the digest's cron; None: fired only when asked


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
        digest=_digest(ports, options, spending, sweeper, engine),
        dispatcher=Dispatcher(
            _capability_services(
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
                    },
                ),
            ),
            directory,
            policy,
            ports.roles,
            registry=registry,
        ),
    )


def _capability_services(registry: Registry, kernel: Kernel) -> dict[str, object]:
    """Each capability's service, by its name, built from the kernel."""
    return {c.name: c.build(kernel) for c in registry.capabilities}


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
