"""``/cluster slurm``: the words that read a cluster's Slurm settings or ask to change them.

    slurm CLUSTER                                   the settings in full
    slurm CLUSTER set KEY=VALUE [KEY=VALUE…]        slurm.conf keys
    slurm CLUSTER unset KEY [KEY…]
    slurm CLUSTER partition add ID POOL[,POOL…]     partitions (appended: the default stays)
    slurm CLUSTER partition remove ID
    slurm CLUSTER partition default ID
    slurm CLUSTER login-pool POOL                   the pool the login nodes run in
    slurm CLUSTER prolog|epilog show N              one script, whole
    slurm CLUSTER prolog|epilog remove N | move N M remove or reorder (scripts run in order)

Every change goes to approval; parsing is pure, so it is tested without Slack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from handlers.changes.layout import plan_slurm_layout
from handlers.changes.plan import ChangePlan
from handlers.changes.scripts import plan_slurm_scripts
from handlers.changes.settings import plan_slurm_config
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.grammar import POOL_ID, CommandError, arity, cluster_word, echo
from handlers.policy import Role
from handlers.slurm.layout import LayoutAction
from handlers.slurm.scripts import ScriptAction

if TYPE_CHECKING:
    from handlers.changes.approvals import Approvals
    from handlers.commanding import Caller
    from handlers.reading.reports import Reports
    from handlers.replies import Reply

SLURM_USAGE = (
    "/cluster slurm CLUSTER [set KEY=VALUE… | unset KEY… | partition add ID POOL[,POOL] | "
    "partition remove ID | partition default ID | login-pool POOL | "
    "prolog|epilog show N | prolog|epilog remove N | prolog|epilog move N M]"
)
JOBS_USAGE = "/cluster jobs CLUSTER [user U] [partition P] [state running|pending]"
FAIRSHARE_USAGE = "/cluster fairshare CLUSTER"

# A Slurm partition name, kept to what the partitions of the docs' samples use (lowercase
# letters, digits, hyphens): slurm.conf PartitionName allows more, but a name that needs
# quoting in `sbatch --partition` is a trap for the people who type it.
PARTITION_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
VERBS = "set, unset, partition, login-pool, prolog or epilog"


@dataclass(frozen=True)
class SlurmDesk:
    """What Slurm's subcommands run on: the reports that read it, the approvals that
    change it."""

    reports: Reports
    approvals: Approvals


@dataclass(frozen=True)
class Slurm:
    cluster: str


@dataclass(frozen=True)
class SlurmConfig:
    """Set and unset slurm.conf keys, through approval."""

    cluster: str
    sets: tuple[tuple[str, str], ...] = ()
    unsets: tuple[str, ...] = ()
    subcommand: ClassVar[str] = "slurm"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_slurm_config(cluster, dict(self.sets), list(self.unsets), prices)


@dataclass(frozen=True)
class SlurmLayout:
    """Partitions, the default partition or the login pool, through approval: ``name`` is
    the partition's id, or the pool's for ``login-pool``."""

    cluster: str
    action: LayoutAction
    name: str
    pools: tuple[str, ...] = ()
    subcommand: ClassVar[str] = "slurm"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_slurm_layout(cluster, self.action, self.name, self.pools, prices)


@dataclass(frozen=True)
class SlurmScripts:
    """Show one prolog or epilog script whole (``action`` "show"), or remove, move, add or
    replace one through approval; places count from 1. A script to add or replace comes from
    a form (pasted or uploaded), never from a command's words."""

    cluster: str
    which: str  # "prolog" or "epilog"
    action: str  # "show", "remove", "move", "add" or "replace"
    index: int
    to: int | None = None
    content: str | None = None  # "add" and "replace": the script whole
    subcommand: ClassVar[str] = "slurm"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        action = ScriptAction(self.action)
        return plan_slurm_scripts(
            cluster, self.which, action, self.index, self.to, prices, self.content
        )

    @property
    def shows(self) -> bool:
        """Only reads the script (a viewer's); the other actions change it."""
        return self.action == "show"


def parse_slurm(args: list[str]) -> Slurm | SlurmConfig | SlurmLayout | SlurmScripts:
    arity(args, SLURM_USAGE, 1, len(args) or 1)
    cluster = cluster_word(args[0], "slurm")
    if len(args) == 1:
        return Slurm(cluster)
    verb, words = args[1].lower(), args[2:]
    if verb in ("set", "unset"):
        return _config(cluster, verb, words)
    if verb == "partition":
        return _partition(cluster, words)
    if verb in ("prolog", "epilog"):
        return _scripts(cluster, verb, words)
    if verb == "login-pool":
        if len(words) != 1:
            raise CommandError("slurm login-pool takes one POOL", "slurm")
        return SlurmLayout(cluster, LayoutAction.LOGIN_POOL, _pool(words[0]))
    raise CommandError(f"slurm does not take {echo(args[1])}: use {VERBS}", "slurm")


def _config(cluster: str, verb: str, words: list[str]) -> SlurmConfig:
    if not words:
        raise CommandError(f"slurm {verb} needs {'KEY=VALUE' if verb == 'set' else 'KEY'}", "slurm")
    if verb == "unset":
        return SlurmConfig(cluster, unsets=tuple(dict.fromkeys(words)))
    sets: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key or not value:
            raise CommandError(f"{echo(word)} is not KEY=VALUE", "slurm")
        if key.lower() in (k.lower() for k in sets):
            raise CommandError(f"{echo(key)} is given twice", "slurm")
        sets[key] = value
    return SlurmConfig(cluster, sets=tuple(sets.items()))


def _partition(cluster: str, words: list[str]) -> SlurmLayout:
    how = "use partition add ID POOL[,POOL], partition remove ID or partition default ID"
    if not words:
        raise CommandError(f"slurm partition needs what to do: {how}", "slurm")
    verb, rest = words[0].lower(), words[1:]
    wanted = {"add": 2, "remove": 1, "default": 1}
    if verb not in wanted:
        raise CommandError(f"slurm partition does not take {echo(words[0])}: {how}", "slurm")
    if len(rest) != wanted[verb]:
        raise CommandError(f"slurm partition {verb}: {how}", "slurm")
    name = rest[0]
    if not PARTITION_ID.match(name):
        raise CommandError(
            f"{echo(name)} is not a partition id: a lowercase letter, then lowercase letters, "
            "digits or hyphens",
            "slurm",
        )
    if verb != "add":
        action = {"remove": LayoutAction.PARTITION_REMOVE}.get(verb, LayoutAction.PARTITION_DEFAULT)
        return SlurmLayout(cluster, action, name)
    pools = [_pool(p) for p in rest[1].split(",")]
    if len(set(pools)) != len(pools):
        raise CommandError(f"{echo(rest[1])} names a pool twice", "slurm")
    return SlurmLayout(cluster, LayoutAction.PARTITION_ADD, name, tuple(pools))


def _scripts(cluster: str, which: str, words: list[str]) -> SlurmScripts:
    how = f"use {which} show N, {which} remove N or {which} move N M"
    if words and words[0].lower() in ("add", "replace"):
        raise CommandError(
            f"slurm {which} {words[0].lower()} takes the script in a form: type it in Slack, "
            "where a form opens to paste or upload it",
            "slurm",
        )
    wanted = {"show": 1, "remove": 1, "move": 2}
    if not words or words[0].lower() not in wanted:
        raise CommandError(f"slurm {which} needs what to do: {how}", "slurm")
    action, places = words[0].lower(), words[1:]
    if len(places) != wanted[action] or not all(p.isascii() and p.isdigit() for p in places):
        raise CommandError(f"slurm {which} {action}: {how} (N counts from 1)", "slurm")
    numbers = [int(p) for p in places]
    if min(numbers) < 1:
        raise CommandError(f"scripts are counted from 1: {how}", "slurm")
    return SlurmScripts(
        cluster, which, action, numbers[0], numbers[1] if action == "move" else None
    )


def _pool(word: str) -> str:
    if not POOL_ID.match(word):
        raise CommandError(f"{echo(word)} is not a node pool id", "slurm")
    return word


@dataclass(frozen=True)
class Jobs:
    cluster: str
    user: str | None = None
    partition: str | None = None
    state: str | None = None  # "running" or "pending"


@dataclass(frozen=True)
class Fairshare:
    cluster: str


# a Linux user name (useradd's default rule) and the states a person asks for
USER_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
STATES = ("running", "pending")


def parse_jobs(args: list[str]) -> Jobs:
    """``jobs CLUSTER [user U] [partition P] [state running|pending]``, filters in any order."""
    arity(args, JOBS_USAGE, 1, 7)
    cluster = cluster_word(args[0], "jobs")
    filters: dict[str, str] = {}
    rest = args[1:]
    if len(rest) % 2:
        raise CommandError(
            f"{echo(rest[-1])} needs a value: user U, partition P or state S", "jobs"
        )
    for key, value in zip(rest[::2], rest[1::2], strict=True):
        key = key.lower()
        if key not in ("user", "partition", "state"):
            raise CommandError(
                f"jobs does not take {echo(key)}: use user, partition or state", "jobs"
            )
        if key in filters:
            raise CommandError(f"{key} is given twice", "jobs")
        if key == "user" and not USER_NAME.match(value):
            raise CommandError(f"{echo(value)} is not a Linux user name", "jobs")
        if key == "partition" and not PARTITION_ID.match(value):
            raise CommandError(f"{echo(value)} is not a partition id", "jobs")
        if key == "state":
            value = value.lower()
            if value not in STATES:
                raise CommandError(f"state is running or pending, not {echo(value)}", "jobs")
        filters[key] = value
    return Jobs(cluster, filters.get("user"), filters.get("partition"), filters.get("state"))


def slurm_role(command: Slurm | SlurmConfig | SlurmLayout | SlurmScripts) -> Role:
    """Reading the settings or a script is a viewer's; changing them an operator's."""
    reads = isinstance(command, Slurm) or (isinstance(command, SlurmScripts) and command.shows)
    return Role.VIEWER if reads else Role.OPERATOR


async def run_slurm(
    services: SlurmDesk,
    command: Slurm | SlurmConfig | SlurmLayout | SlurmScripts,
    caller: Caller,
) -> Reply | None:
    if isinstance(command, Slurm):
        return await services.reports.slurm(command.cluster)
    if isinstance(command, SlurmScripts) and command.shows:
        return await services.reports.slurm_script(command.cluster, command.which, command.index)
    request = await services.approvals.request_change(caller.user, caller.channel, command)
    return await services.approvals.card_pending(request)  # the card is the answer
