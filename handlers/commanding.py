"""How one subcommand is declared: its name and usage, what it does in a line, the role it
needs, how its words parse into a typed command and what runs it. A capability declares its
subcommands beside its commands (``handlers/<capability>/capability.py``); the registry
(``handlers.registry``) folds every capability's into one, refusing two of one name.

A subcommand's ``run`` is handed its own capability's service (what the capability's
``build`` made), the typed command and who asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from handlers.grammar import arity, cluster_word
from handlers.policy import Role

if TYPE_CHECKING:
    from handlers.forms.asks import FormAsk
    from handlers.replies import Reply

C = TypeVar("C")  # a typed command


@dataclass(frozen=True)
class Caller:
    """Who asked, where, and the role the policy gives them."""

    user: str
    channel: str
    role: Role


@dataclass(frozen=True)
class Subcommand(Generic[C]):
    name: str
    usage: str  # "/cluster NAME ARGS…": the grammar, quoted by help and by bad-input errors
    summary: str
    role: Role
    parse: Callable[[list[str]], C]
    run: Callable[[Any, C, Caller], Awaitable[Reply | None]]
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

    def needed(self, command: C) -> Role:
        return self.role if self.role_for is None else self.role_for(command)


def nothing(usage: str, made: Callable[[], C]) -> Callable[[list[str]], C]:
    """The parser of a subcommand that takes no words (its usage: ``/cluster NAME``)."""

    def parse_words(args: list[str]) -> C:
        arity(args, usage, 0, 0)
        return made()

    return parse_words


def one_cluster(usage: str, made: Callable[[str], C]) -> Callable[[list[str]], C]:
    """The parser of a subcommand that takes one cluster (``/cluster NAME CLUSTER``)."""

    def parse_words(args: list[str]) -> C:
        arity(args, usage, 1, 1)
        return made(cluster_word(args[0], usage.split()[1]))

    return parse_words
