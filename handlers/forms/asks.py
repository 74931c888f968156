"""The forms a command opens when words are missing: what each form is, and, for each
subcommand that has one, how its words say so. The registry declares each reader beside its
subcommand (``Subcommand.form``), and the dispatcher reads a command's words once for both.
A platform that has no forms answers the same words with the usage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from handlers.grammar import POOL_ID, CommandError, cluster_word
from handlers.policy import Role


class FormKind:
    RESIZE = "resize"
    DELETE = "delete"
    SCRIPT = "script"
    SETTING = "setting"  # one slurm.conf key


EVERY_POOL = "*"  # a schedule form's pool choice for every compute pool


@dataclass(frozen=True)
class FormAsk:
    """A command that asks for a form, with what its words already gave."""

    kind: str
    cluster: str | None = None
    pool: str | None = None
    which: str | None = None  # SCRIPT: "prolog" or "epilog"; DRAIN: the node
    replace: int | None = None  # SCRIPT: the place of the script to replace
    place: int | None = None  # SCRIPT: where to add (None: at the end)

    @property
    def role(self) -> Role:
        """Every form asks for a change: an operator's (reading needs no form)."""
        return Role.OPERATOR


def guarded(read: Callable[[list[str]], FormAsk | None]) -> Callable[[list[str]], FormAsk | None]:
    """A reader that answers None (no form: the parser says what is wrong) for bad words."""

    def reader(args: list[str]) -> FormAsk | None:
        try:
            return read(args)
        except CommandError:
            return None

    return reader


def on_a_pool(kind: str, args: list[str]) -> FormAsk | None:
    """``[CLUSTER [POOL]]``: a form on what they name; more words, or a bad pool, none."""
    if len(args) >= 3:
        return None
    cluster = cluster_word(args[0], kind) if args else None
    pool = args[1] if len(args) > 1 and POOL_ID.match(args[1]) else None
    if len(args) > 1 and pool is None:
        return None
    return FormAsk(kind, cluster, pool)


@guarded
def resize_form(args: list[str]) -> FormAsk | None:
    """``resize [CLUSTER [POOL]]``: the pool's bounds, and what is not given, in a form."""
    return on_a_pool(FormKind.RESIZE, args)


def delete_form(args: list[str]) -> FormAsk | None:
    """``delete``: which cluster, in a form."""
    return None if args else FormAsk(FormKind.DELETE)


@guarded
def slurm_form(args: list[str]) -> FormAsk | None:
    """``slurm CLUSTER set`` (a key and its value), ``slurm CLUSTER prolog|epilog add [N]``
    and ``… replace N`` (the script pasted or uploaded), in a form."""
    if len(args) == 2 and args[1].lower() == "set":
        return FormAsk(FormKind.SETTING, cluster_word(args[0], "slurm"))
    if len(args) not in (3, 4) or args[1].lower() not in ("prolog", "epilog"):
        return None
    verb, rest = args[2].lower(), args[3:]
    if verb not in ("add", "replace") or (rest and not rest[0].isdigit()):
        return None
    number = int(rest[0]) if rest else None
    if verb == "replace" and number is None:
        return None
    cluster, which = cluster_word(args[0], "slurm"), args[1].lower()
    if verb == "replace":
        return FormAsk(FormKind.SCRIPT, cluster, which=which, replace=number)
    return FormAsk(FormKind.SCRIPT, cluster, which=which, place=number)
