"""What a capability adds, declared in one object, and what it is built from.

A capability is a package of the core (reading, changes, slurm, idle, health, schedules,
spend) that declares, in its ``capability.py``, everything it adds: its subcommands (with
their usage), its clicks, its kinds of change, its forms, its periodic jobs, its tables in
the policy file, the record it keeps of each cluster, what it does with a sweep's clusters
and with a request's end, and how its service is built from the kernel. One list names the
capabilities (``handlers/capabilities.py``); the registry (``handlers/registry.py``) folds their
declarations and refuses two of one name; the dispatcher hands each subcommand and click
its own capability's service. Nothing central names a capability.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from handlers.changes.effects import NODE_WINDOW, SEND_WINDOW
from handlers.owed.engine import LEASE
from handlers.owed.posting import POST_WINDOW
from handlers.ports import CrashPoint, no_crash
from handlers.reading.clusters import READ_DEADLINE

S = TypeVar("S")
P = TypeVar("P")

if TYPE_CHECKING:
    from handlers.changes.approvals import Approvals
    from handlers.changes.kind import ChangeKind
    from handlers.changes.ledger import RequestEnded, RequestLedger
    from handlers.changes.preapproved import Cards
    from handlers.clicking import Click
    from handlers.commanding import Subcommand
    from handlers.costs import PriceBook
    from handlers.domain.names import Target
    from handlers.forms.spec import FormKindSpec
    from handlers.home import HomePart
    from handlers.keeping import Keeper, RecordKind
    from handlers.messenger import Messenger
    from handlers.owed.engine import Engine
    from handlers.owed.posting import Outbox
    from handlers.owed.store import OwedStore
    from handlers.policy import Policy, Section
    from handlers.ports import (
        ActivityReader,
        Clock,
        ControlPlane,
        GpuSignal,
        IdleRecordStore,
        LeaseStore,
        NodeUpdater,
        OperationStore,
        People,
        ReportStore,
        RequestStore,
        RoleSource,
        SubmissionStore,
    )
    from handlers.reading.clusters import ClusterDirectory
    from handlers.reading.reports import Reports
    from handlers.sweep.observe import SweepListener
    from handlers.sweep.sweep import Sweeper


@dataclass(frozen=True)
class Kernel:
    """What every capability's service is built from: the ports and options, the policy,
    the prices, the cluster directory; the durable path (the engine, its outbox, the cards
    every request gets) and the change flow (approvals, the ledger); the sweep and the read
    side; and every declared subcommand (for help)."""

    ports: Ports
    options: Options
    policy: Policy
    prices: PriceBook
    directory: ClusterDirectory
    engine: Engine
    outbox: Outbox
    cards: Cards
    approvals: Approvals
    ledger: RequestLedger
    sweeper: Sweeper
    reports: Reports
    commands: tuple[Subcommand[Any], ...] = ()


@dataclass(frozen=True)
class Job:
    """Periodic work of a capability: ``run`` on its service (never while the service is
    off), every ``every`` seconds unless the options say otherwise for its name
    (``Options.checks``). The composition root schedules every capability's jobs."""

    name: str
    run: Callable[[Any], Awaitable[object]]
    every: float = 30.0


@dataclass(frozen=True)
class Port(Generic[P]):
    """What a capability needs from the shell beyond the kernel: its store (the spend
    ledger, the schedules, the release hook's state), a calendar, a chart drawer. Declared
    by the capabilities that use it, provided by the shell under its name (the shell's store
    gives every store port whose Protocol it meets); None where it is not: the capability is
    then off."""

    name: str
    protocol: Any  # the Protocol it meets (a Protocol is not a concrete class for type[P])


@dataclass(frozen=True)
class Capability(Generic[S]):
    name: str
    # its service, handed to its subcommands' and clicks' ``run``; None where it is off
    # (its subcommands then say so); ``Services.of(capability)`` gives it, typed
    build: Callable[[Kernel], S]
    commands: tuple[Subcommand[Any], ...] = ()
    clicks: tuple[Click, ...] = ()
    kinds: tuple[ChangeKind[Any], ...] = ()  # the kinds of change it plans
    forms: tuple[FormKindSpec, ...] = ()  # the forms its subcommands open
    jobs: tuple[Job, ...] = ()  # its periodic work
    # what it needs from the shell beyond the kernel (``Kernel.ports.port(PORT)`` gives one)
    ports: tuple[Port[Any], ...] = ()
    # its tables in the policy file (``Kernel.policy.section(SECTION)`` reads one)
    policy: tuple[Section[Any], ...] = ()
    # the record it keeps of each cluster (``Kernel.ports.keeper.of(kind)`` reads it)
    records: tuple[RecordKind[Any], ...] = ()
    # what the sweep hands each sweep's clusters to, made from its service (None: nothing)
    listener: Callable[[S], SweepListener | None] | None = None
    # what it does when a request ends (its alert says how), made from its service
    on_ended: Callable[[S], RequestEnded | None] | None = None
    # what it does the moment a request ends, before anything is said in chat
    on_settled: Callable[[S], RequestEnded | None] | None = None
    # its part of every Home tab, made from its service (None: none)
    home: Callable[[S], HomePart | None] | None = None


@dataclass(frozen=True)
class Ports:
    """Everything the core needs from the world."""

    requests: RequestStore
    operations: OperationStore
    leases: LeaseStore
    reports: ReportStore
    records: IdleRecordStore
    keeper: Keeper  # every other capability's record of each cluster
    control_plane: ControlPlane
    activity: ActivityReader
    messenger: Messenger
    roles: RoleSource
    people: People  # who is a person on the platform, and how one is named
    clock: Clock
    owed: OwedStore  # what the bot owes the world, done by the engine
    submissions: SubmissionStore | None = None  # form submissions; None: no forms
    nodes: NodeUpdater | None = None  # sets Slurm node states; None: no node changes
    gpus: GpuSignal | None = None  # GPU metrics of the nodes; None: allocations not judged
    # what the capabilities' declared ports are provided as, by the port's name
    provided: Mapping[str, object] = field(default_factory=dict)

    def port(self, port: Port[P]) -> P | None:
        """The shell's provision of a capability's port; None: not provided (it is off)."""
        found: P | None = self.provided.get(port.name)  # type: ignore[assignment]
        return found


@dataclass(frozen=True)
class Options:
    owner: str  # this replica's name in leases
    targets: Sequence[Target]
    alert_channel: str | None  # None: no idle alerts are posted
    sweep_interval: float
    concurrency: int = 32  # control-plane calls at once (settings: vertex_concurrency)
    # changes a minute per project and region that a crowd (a schedule's night) may send:
    # the control plane's write quota (settings: vertex_writes_per_minute); None: unpaced
    writes_per_minute: int | None = None
    lease: float = LEASE
    read_deadline: float = READ_DEADLINE
    crash: CrashPoint = no_crash
    release_grace: float = 60.0  # seconds a drained queue stays empty before a release acts
    poll_stagger: float = 0.0  # seconds over which a batch of operation polls is started
    send_window: float = SEND_WINDOW  # seconds a change's call may be applied once sent
    node_window: float = NODE_WINDOW  # the same for a Slurm node update
    post_window: float = POST_WINDOW  # seconds a chat post may still arrive once sent
    patience: float = 2.0  # seconds a tick waits for the owed work it started
    checks: Mapping[str, float] = field(default_factory=dict)  # a job's seconds, by its name
