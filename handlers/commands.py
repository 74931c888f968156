"""The ``/cluster`` grammar: text in, a typed command out, or a one-line reason with usage.

Pure and synchronous, so it is tested without Slack: ``parse("resize train01 a4 3")`` gives
``Resize(cluster="train01", pool="a4", min_nodes=3, max_nodes=3)``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

CLUSTER_ID = re.compile(r"^[a-z][a-z0-9]{0,9}$")
CLUSTER_NAME = re.compile(
    r"^projects/[^/\s]+/locations/[^/\s]+/modelDevelopmentClusters/[a-z][a-z0-9]{0,9}$"
)
POOL_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
MAX_NODES = 1000

USAGE = {
    "help": "/cluster help [SUBCOMMAND]",
    "list": "/cluster list",
    "show": "/cluster show CLUSTER",
    "resize": "/cluster resize CLUSTER POOL N   (or MIN:MAX)",
    "delete": "/cluster delete CLUSTER",
    "ops": "/cluster ops",
    "idle": "/cluster idle",
    "audit": "/cluster audit [CLUSTER]",
}
SUMMARY = {
    "help": "this help, or one subcommand's",
    "list": "every cluster of every target, with nodes and estimated cost",
    "show": "one cluster: pools, node states, partitions, Slurm settings, recent events",
    "resize": "ask to set a node pool's size (min and max node count); a second person approves",
    "delete": "ask to delete a cluster; an approver confirms",
    "ops": "operations in flight, with age and progress",
    "idle": "the idle report now",
    "audit": "recent requests, approvals and results",
}
CLUSTER_HELP = (
    "CLUSTER is a short id such as train01 (looked up in every target) or a full name "
    "projects/P/locations/R/modelDevelopmentClusters/ID."
)


ECHO = 100  # characters of a person's input quoted back to them


def echo(word: str) -> str:
    """A person's input quoted back in an error, cut to ``ECHO`` characters."""
    return repr(word if len(word) <= ECHO else word[:ECHO] + "…")


class CommandError(Exception):
    """Bad input: a one-line reason meant for the user, and the usage of the subcommand."""

    def __init__(self, reason: str, subcommand: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.subcommand = subcommand

    @property
    def usage(self) -> str | None:
        if self.subcommand in USAGE:
            return f"Usage: {USAGE[self.subcommand]}"
        return "Usage: /cluster " + " | ".join(USAGE) + "   (/cluster help for more)"


class Refused(CommandError):
    """Good input the bot cannot act on now (a request already open, a conversation it cannot
    post in): the reason alone, since the usage would not help."""

    @property
    def usage(self) -> str | None:
        return None


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


@dataclass(frozen=True)
class Delete:
    cluster: str


@dataclass(frozen=True)
class Ops:
    pass


@dataclass(frozen=True)
class Idle:
    pass


@dataclass(frozen=True)
class Audit:
    cluster: str | None = None


Command = Help | ListClusters | Show | Resize | Delete | Ops | Idle | Audit


def _cluster(word: str, subcommand: str) -> str:
    if CLUSTER_ID.match(word) or CLUSTER_NAME.match(word):
        return word
    raise CommandError(
        f"{echo(word)} is not a cluster: use a short id like train01 (a lowercase letter, then up "
        "to 9 lowercase letters or digits) or a full resource name",
        subcommand,
    )


def _count(word: str) -> int:
    if not word.isdigit():
        raise CommandError(f"{echo(word)} is not a node count: use a whole number", "resize")
    value = int(word)
    if value > MAX_NODES:
        raise CommandError(f"{value} nodes is more than the {MAX_NODES} allowed here", "resize")
    return value


def _arity(words: list[str], subcommand: str, low: int, high: int) -> None:
    given = len(words)
    if given < low:
        missing = USAGE[subcommand].split()[2 + given]
        raise CommandError(f"{subcommand} needs {missing}", subcommand)
    if given > high:
        extra = " ".join(words[high:])
        raise CommandError(f"{subcommand} does not take {echo(extra)}", subcommand)


def parse(text: str) -> Command:
    """Parse the text after ``/cluster``; raise ``CommandError`` on bad input."""
    words = text.split()
    if not words:
        return Help()
    name, args = words[0].lower(), words[1:]
    if name in ("help", "-h", "--help", "?"):
        _arity(args, "help", 0, 1)
        if args and args[0].lower() not in USAGE:
            raise CommandError(f"there is no subcommand {echo(args[0])}", "help")
        return Help(args[0].lower() if args else None)
    if name == "list":
        _arity(args, "list", 0, 0)
        return ListClusters()
    if name == "show":
        _arity(args, "show", 1, 1)
        return Show(_cluster(args[0], "show"))
    if name == "resize":
        _arity(args, "resize", 3, 3)
        cluster = _cluster(args[0], "resize")
        if not POOL_ID.match(args[1]):
            raise CommandError(f"{echo(args[1])} is not a node pool id", "resize")
        low_text, colon, high_text = args[2].partition(":")
        low = _count(low_text)
        high = _count(high_text) if colon else low
        if low > high:
            raise CommandError(f"MIN {low} is more than MAX {high}", "resize")
        return Resize(cluster, args[1], low, high)
    if name == "delete":
        _arity(args, "delete", 1, 1)
        return Delete(_cluster(args[0], "delete"))
    if name == "ops":
        _arity(args, "ops", 0, 0)
        return Ops()
    if name == "idle":
        _arity(args, "idle", 0, 0)
        return Idle()
    if name == "audit":
        _arity(args, "audit", 0, 1)
        return Audit(_cluster(args[0], "audit") if args else None)
    close = difflib.get_close_matches(name, list(USAGE), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise CommandError(f"there is no subcommand {echo(words[0])}{hint}")
