"""The read side's subcommands: help, the clusters, one cluster, operations, the idle report,
the audit and the deleted clusters, each answered from the control plane, the store or the
last sweep."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from handlers.grammar import CLUSTER_HELP, CommandError, arity, echo
from handlers.replies import Code, FixedReply, Heading, Note, Reply, Table, Text

if TYPE_CHECKING:
    from handlers.commanding import Caller, Subcommand
    from handlers.reading.reports import Reports

HELP_USAGE = "/cluster help [SUBCOMMAND]"
LIST_USAGE = "/cluster list"
SHOW_USAGE = "/cluster show CLUSTER"
DELETED_USAGE = "/cluster deleted"
OPS_USAGE = "/cluster ops"
IDLE_USAGE = "/cluster idle"
AUDIT_USAGE = "/cluster audit [CLUSTER] [by USER] [since 7d]"


@dataclass(frozen=True)
class Reading:
    """What the read side's subcommands and clicks run on: the reports, and every declared
    subcommand (for help)."""

    reports: Reports
    commands: tuple[Subcommand[Any], ...]


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
class Ops:
    pass


@dataclass(frozen=True)
class Idle:
    pass


@dataclass(frozen=True)
class Deleted:
    pass


def parse_help(args: list[str]) -> Help:
    arity(args, HELP_USAGE, 0, 1)
    return Help(args[0].lower() if args else None)


async def run_help(reading: Reading, command: Help, caller: Caller) -> Reply:
    if command.topic and command.topic not in {e.name for e in reading.commands}:
        raise CommandError(f"there is no subcommand {echo(command.topic)}", "help")
    return help_reply(reading.commands, command.topic)


@functools.cache
def help_reply(commands: tuple[Subcommand[Any], ...], topic: str | None) -> Reply:
    """The help, built once for each topic (``FixedReply``: its rendering is kept)."""
    if topic:
        entry = next(e for e in commands if e.name == topic)
        reply = FixedReply(f"/cluster {topic}")
        return reply.add(Text(Code(entry.usage), "\n" + entry.summary), Note(CLUSTER_HELP))
    return FixedReply("clusterbot help").add(
        Heading("clusterbot: Vertex AI training clusters from Slack"),
        Table.of(("", ""), [(entry.usage, entry.summary) for entry in commands]),
        Note(CLUSTER_HELP),
        Note("Changes are posted as a card in the channel; a second person approves them."),
    )
