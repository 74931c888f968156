"""The words of ``/cluster`` every subcommand shares: cluster and pool ids, bad-input errors
with the usage of the subcommand at fault, and quoting a person's input back to them."""

from __future__ import annotations

import re
import unicodedata

from handlers.errors import UserError

CLUSTER_ID = re.compile(r"^[a-z][a-z0-9]{0,9}$")
CLUSTER_ID_RULE = "a lowercase letter, then up to 9 lowercase letters or digits"
CLUSTER_NAME = re.compile(
    r"^projects/[^/\s]+/locations/[^/\s]+/modelDevelopmentClusters/[a-z][a-z0-9]{0,9}$"
)
POOL_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # a Slurm NodeName: a host
MAX_NODES = 1000
CLUSTER_HELP = (
    "CLUSTER is a short id such as train01 (looked up in every target, in any case) or a full name "
    "projects/P/locations/R/modelDevelopmentClusters/ID. Full-width digits and letters (as a "
    "Japanese or Chinese input method types them: ３, ｔｒａｉｎ０１) are read as 3 and train01."
)
ECHO = 100  # characters of a person's input quoted back to them


def normal(text: str) -> str:
    """The command as read: Unicode NFKC, on purpose, so full-width digits and letters and the
    ideographic space count as their ASCII forms (``resize ｔｒａｉｎ０１ a4 ３`` is
    ``resize train01 a4 3``) instead of being refused, or worse, taken by ``int()`` unseen."""
    return unicodedata.normalize("NFKC", text)


def echo(word: str) -> str:
    """A person's input quoted back in an error, cut to ``ECHO`` characters."""
    return repr(word if len(word) <= ECHO else word[:ECHO] + "…")


class CommandError(UserError):
    """Bad input: a one-line reason meant for the user, and the usage of the subcommand."""

    def __init__(self, reason: str, subcommand: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.subcommand = subcommand

    @property
    def said(self) -> str:
        return self.reason

    shows_usage = True  # the answer quotes the subcommand's usage (``Registry.usage``)


class Refused(CommandError):
    """Good input the bot cannot act on now (a request already open, a conversation it cannot
    post in): the reason alone, since the usage would not help."""

    shows_usage = False


def cluster_word(word: str, subcommand: str) -> str:
    """A cluster id or full name; a short id is matched case-insensitively (``TRAIN01`` is
    train01: ids are lowercase by the API's pattern)."""
    if CLUSTER_ID.match(word) or CLUSTER_NAME.match(word):
        return word
    if CLUSTER_ID.match(word.lower()):
        return word.lower()
    raise CommandError(
        f"{echo(word)} is not a cluster: use a short id like train01 ({CLUSTER_ID_RULE}) or a "
        "full resource name",
        subcommand,
    )


def new_cluster_id(word: str, subcommand: str) -> str:
    """An id for a cluster to create, exactly as the API's pattern allows."""
    if not CLUSTER_ID.match(word):
        raise CommandError(f"{echo(word)} is not a cluster id: {CLUSTER_ID_RULE}", subcommand)
    return word


def arity(words: list[str], usage: str, low: int, high: int) -> None:
    """Between ``low`` and ``high`` words after the subcommand of ``usage`` (its line, as
    ``/cluster resize CLUSTER POOL N``): too few names the first one missing."""
    given = len(words)
    grammar = usage.split()
    subcommand = grammar[1]
    if given < low:
        raise CommandError(f"{subcommand} needs {grammar[2 + given]}", subcommand)
    if given > high:
        extra = " ".join(words[high:])
        raise CommandError(f"{subcommand} does not take {echo(extra)}", subcommand)


TIME_BACK = re.compile(r"^(\d{1,4})([mhdw])$")
TIME_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def time_back(word: str, subcommand: str, most: int | None = None) -> int:
    """``90m``, ``12h``, ``7d`` or ``2w`` in seconds, at most ``most`` seconds back (days, in
    what is said of it); ``CommandError`` for anything else."""
    found = TIME_BACK.match(word.lower())
    if found is None:
        raise CommandError(f"{echo(word)} is not a time back such as 7d or 12h", subcommand)
    seconds = int(found.group(1)) * TIME_UNITS[found.group(2)]
    if most is not None and seconds > most:
        days = most // 86400
        raise CommandError(
            f"since goes back {days} days at most ({days}d): {subcommand} reads no further",
            subcommand,
        )
    return seconds
