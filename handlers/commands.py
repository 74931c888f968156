"""The ``/cluster`` grammar and its one registry: each subcommand is one entry (name, usage,
summary, the role it needs, how its words parse, what runs it). Help, typo suggestions and
the authorization in ``handlers.dispatch`` all read the registry.

Parsing is pure and synchronous, so it is tested without Slack:
``parse("resize train01 a4 3")`` gives ``Resize(cluster="train01", pool="a4", min_nodes=3,
max_nodes=3)``.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from handlers.changes.delete import plan_delete
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import plan_resize
from handlers.costs import PriceBook
from handlers.desk import Desk
from handlers.domain.models import Cluster
from handlers.forms.asks import FormAsk, delete_form, resize_form, schedule_form, slurm_form
from handlers.grammar import (
    CLUSTER_HELP,
    MAX_NODES,
    POOL_ID,
    USAGE,
    CommandError,
    arity,
    cluster_word,
    echo,
    new_cluster_id,
)
from handlers.health.commands import NODE, node_form, node_role, parse_node, run_node
from handlers.health.report import HEALTH, parse_health, run_health
from handlers.policy import Role
from handlers.reading.audit import Audit, parse_audit
from handlers.replies import Code, FixedReply, Heading, Note, Reply, Table, Text
from handlers.schedules.commands import (
    SCHEDULE,
    SCHEDULES,
    parse_schedule,
    parse_schedules,
    run_schedule,
    run_schedules,
)
from handlers.slurm.commands import (
    Fairshare,
    Jobs,
    Slurm,
    SlurmConfig,
    SlurmLayout,
    SlurmScripts,
    parse_jobs,
    parse_slurm,
    run_slurm,
    slurm_role,
)
from handlers.spend.report import COST, Cost, parse_cost

C = TypeVar("C")  # a typed command


# -- the typed commands -------------------------------------------------------------------------


@dataclass(frozen=True)
class Help:
    topic: str | None = None


@dataclass(frozen=True)
class ListClusters:
    pass


@dataclass(frozen=True)
class Show:
    cluster: str


@dataclass(frozen=True)
class Resize:
    cluster: str
    pool: str
    min_nodes: int
    max_nodes: int
    subcommand: ClassVar[str] = "resize"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_resize(cluster, self.pool, self.min_nodes, self.max_nodes, prices)


@dataclass(frozen=True)
class Delete:
    cluster: str
    subcommand: ClassVar[str] = "delete"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_delete(cluster, prices)


@dataclass(frozen=True)
class Ops:
    pass


@dataclass(frozen=True)
class Idle:
    pass


@dataclass(frozen=True)
class Restore:
    """Create a deleted cluster again from its kept spec, under its own id or ``new_id``."""

    cluster: str
    new_id: str | None = None


@dataclass(frozen=True)
class Deleted:
    pass


Command = (
    Help | ListClusters | Show | Slurm | SlurmConfig | SlurmLayout | Resize | Delete | Ops | Idle
) | (Audit | Jobs | Fairshare | Restore | Deleted | SlurmScripts | Cost)


# -- words ---------------------------------------------------------------------------------------


def _count(word: str) -> int:
    if not word.isdigit():
        raise CommandError(f"{echo(word)} is not a node count: use a whole number", "resize")
    value = int(word)
    if value > MAX_NODES:
        raise CommandError(f"{value} nodes is more than the {MAX_NODES} allowed here", "resize")
    return value


def _help(args: list[str]) -> Help:
    arity(args, "help", 0, 1)
    if args and args[0].lower() not in USAGE:
        raise CommandError(f"there is no subcommand {echo(args[0])}", "help")
    return Help(args[0].lower() if args else None)


def _resize(args: list[str]) -> Resize:
    arity(args, "resize", 3, 3)
    cluster = cluster_word(args[0], "resize")
    if not POOL_ID.match(args[1]):
        raise CommandError(f"{echo(args[1])} is not a node pool id", "resize")
    low_text, colon, high_text = args[2].partition(":")
    low = _count(low_text)
    high = _count(high_text) if colon else low
    if low > high:
        raise CommandError(f"MIN {low} is more than MAX {high}", "resize")
    return Resize(cluster, args[1], low, high)


def _nothing(name: str, made: Callable[[], C]) -> Callable[[list[str]], C]:
    def parse_words(args: list[str]) -> C:
        arity(args, name, 0, 0)
        return made()

    return parse_words


def _one_cluster(name: str, made: Callable[[str], C]) -> Callable[[list[str]], C]:
    def parse_words(args: list[str]) -> C:
        arity(args, name, 1, 1)
        return made(cluster_word(args[0], name))

    return parse_words


def _restore(args: list[str]) -> Restore:
    arity(args, "restore", 1, 3)
    cluster = cluster_word(args[0], "restore")
    if len(args) == 1:
        return Restore(cluster)
    if len(args) == 2 or args[1].lower() != "as":
        raise CommandError(f"restore takes {echo(' '.join(args[1:]))}: use as NEW_ID", "restore")
    return Restore(cluster, new_cluster_id(args[2], "restore"))


# -- the registry --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who asked, where, and the role the policy gives them."""

    user: str
    channel: str
    role: Role


@dataclass(frozen=True)
class Subcommand(Generic[C]):
    name: str
    summary: str
    role: Role
    parse: Callable[[list[str]], C]
    run: Callable[[Desk, C, Caller], Awaitable[Reply | None]]
    # the role a parsed command needs, when it depends on the command (reading the Slurm
    # settings is a viewer's, changing them an operator's)
    role_for: Callable[[C], Role] | None = None
    # answered from what is at hand (no control plane, no store, no Slack): the answer can
    # go back in the command's own HTTP response
    instant: bool = False
    # the form its words open when some are missing (where the platform has forms)
    form: Callable[[list[str]], FormAsk | None] | None = None
    # reads much (months of the ledger, a queue of thousands): a few at a time, one a person
    heavy: bool = False

    @property
    def usage(self) -> str:
        return USAGE[self.name]

    def needed(self, command: C) -> Role:
        return self.role if self.role_for is None else self.role_for(command)


async def _run_help(services: Desk, command: Help, caller: Caller) -> Reply:
    return help_reply(command.topic)


async def _run_restore(services: Desk, command: Restore, caller: Caller) -> Reply | None:
    """The approval card is the answer (or, while it is owed, word that it comes)."""
    request = await services.approvals.request_restore(
        caller.user, caller.channel, command.cluster, command.new_id
    )
    return await services.approvals.card_pending(request)


async def _run_cost(services: Desk, command: Cost, caller: Caller) -> Reply:
    if services.spend is None:
        raise CommandError("this clusterbot keeps no spend ledger", "cost")
    return await services.spend.cost(command, caller.channel)


async def _run_change(services: Desk, command: Resize | Delete, caller: Caller) -> Reply | None:
    """The approval card is the answer, posted in the channel for everyone (or, while it is
    owed, word that it comes)."""
    request = await services.approvals.request_change(caller.user, caller.channel, command)
    return await services.approvals.card_pending(request)


REGISTRY: tuple[Subcommand[Any], ...] = (
    Subcommand(
        "help",
        "this help, or one subcommand's",
        Role.VIEWER,
        _help,
        _run_help,
        instant=True,
    ),
    Subcommand(
        "list",
        "every cluster of every target, with nodes and estimated cost",
        Role.VIEWER,
        _nothing("list", ListClusters),
        lambda s, c, who: s.reports.clusters(),
    ),
    Subcommand(
        "show",
        "one cluster: pools, node states, partitions, Slurm settings, recent events",
        Role.VIEWER,
        _one_cluster("show", Show),
        lambda s, c, who: s.reports.cluster(c.cluster),
    ),
    Subcommand(
        "slurm",
        "the Slurm settings in full, or one script whole; change slurm.conf keys, partitions, "
        "the login pool or the prolog/epilog scripts (a second person approves)",
        Role.VIEWER,
        parse_slurm,
        run_slurm,
        role_for=slurm_role,
        form=slurm_form,
    ),
    Subcommand(
        "jobs",
        "Slurm's queue: running and pending jobs, why each waits, priority and fair share",
        Role.VIEWER,
        parse_jobs,
        lambda s, c, who: s.reports.jobs(c.cluster, c.user, c.partition, c.state),
        heavy=True,
    ),
    Subcommand(
        "fairshare",
        "each account's and user's shares, usage and fair-share factor, like sshare",
        Role.VIEWER,
        _one_cluster("fairshare", Fairshare),
        lambda s, c, who: s.reports.fairshare(c.cluster),
        heavy=True,
    ),
    Subcommand(
        "resize",
        "ask to set a node pool's size (min and max node count); a second person approves",
        Role.OPERATOR,
        _resize,
        _run_change,
        form=resize_form,
    ),
    Subcommand(
        "delete",
        "ask to delete a cluster; an approver confirms",
        Role.OPERATOR,
        _one_cluster("delete", Delete),
        _run_change,
        form=delete_form,
    ),
    Subcommand(
        "restore",
        "ask to create a deleted cluster again from the spec kept when it was deleted",
        Role.OPERATOR,
        _restore,
        _run_restore,
    ),
    Subcommand(
        "deleted",
        "the deleted clusters clusterbot can restore, with their pools and cost",
        Role.VIEWER,
        _nothing("deleted", Deleted),
        lambda s, c, who: s.reports.deleted(),
    ),
    Subcommand(
        "ops",
        "operations in flight, with age and progress",
        Role.VIEWER,
        _nothing("ops", Ops),
        lambda s, c, who: s.reports.ops(),
    ),
    Subcommand(
        "idle",
        "the idle report now",
        Role.VIEWER,
        _nothing("idle", Idle),
        lambda s, c, who: s.reports.idle(),
    ),
    Subcommand(
        "audit",
        "who asked, approved or ended what, newest first, with Older for more",
        Role.VIEWER,
        parse_audit,
        lambda s, c, who: s.reports.audit(c),
        heavy=True,
    ),
    Subcommand("cost", COST, Role.VIEWER, parse_cost, _run_cost, heavy=True),
    Subcommand(
        "schedule", SCHEDULE, Role.OPERATOR, parse_schedule, run_schedule, form=schedule_form
    ),
    Subcommand("schedules", SCHEDULES, Role.VIEWER, parse_schedules, run_schedules),
    Subcommand("health", HEALTH, Role.VIEWER, parse_health, run_health),
    Subcommand("node", NODE, Role.VIEWER, parse_node, run_node, role_for=node_role, form=node_form),
)
BY_NAME = {entry.name: entry for entry in REGISTRY}
ALIASES = {"-h": "help", "--help": "help", "?": "help"}
SUMMARY = {entry.name: entry.summary for entry in REGISTRY}


def entry_for(word: str) -> Subcommand[Any]:
    """The registry entry a subcommand's word names; raise ``CommandError``, with the
    nearest subcommand for a typo, when none."""
    entry = BY_NAME.get(ALIASES.get(word.lower(), word.lower()))
    if entry is None:
        close = difflib.get_close_matches(word.lower(), list(BY_NAME), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise CommandError(f"there is no subcommand {echo(word)}{hint}")
    return entry


@functools.cache
def help_reply(topic: str | None) -> Reply:
    """The help, built once for each topic (``FixedReply``: its rendering is kept)."""
    if topic:
        entry = BY_NAME[topic]
        reply = FixedReply(f"/cluster {topic}")
        return reply.add(Text(Code(entry.usage), "\n" + entry.summary), Note(CLUSTER_HELP))
    return FixedReply("clusterbot help").add(
        Heading("clusterbot: Vertex AI training clusters from Slack"),
        Table.of(("", ""), [(entry.usage, entry.summary) for entry in REGISTRY]),
        Note(CLUSTER_HELP),
        Note("Changes are posted as a card in the channel; a second person approves them."),
    )
