"""How one click is declared: the action ids it answers and how its value is read back, the
role it needs (and what it is called when refused), whether its value names a cluster
(``CLUSTERBOT_TARGETS`` holds for it), whether its answer takes the clicked message's place,
and what it runs, handed its own capability's service. A capability declares its clicks in
its ``capability.py`` (``handlers/capability.py``); ``handlers.registry`` folds them into one
table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from handlers.actions import Action
from handlers.policy import Role

if TYPE_CHECKING:
    from handlers.replies import Reply

A = TypeVar("A")


@dataclass(frozen=True)
class Clicked(Generic[A]):
    """A click as read: the action, and who made it where."""

    action: A
    user: str
    role: Role
    card_message: str | None
    channel: str | None


Run = Callable[[Any, Clicked[Any]], Awaitable["Reply | None"]]


@dataclass(frozen=True)
class Click:
    ids: tuple[str, ...]
    read: Callable[[str, str], Action]
    role: Role
    doing: str  # "Deciding requests needs the viewer role; you are ..."
    run: Run
    names_cluster: bool = False  # its value names a cluster: the targets' boundary holds
    in_place: Callable[[Any], bool] = lambda _action: False  # its answer replaces the message


def click(
    ids: tuple[str, ...],
    read: Callable[[str, str], A],
    role: Role,
    doing: str,
    run: Callable[[Any, Clicked[A]], Awaitable[Reply | None]],
    *,
    names_cluster: bool = False,
    in_place: Callable[[A], bool] = lambda _action: False,
) -> Click:
    """One click, its ``run`` and ``in_place`` checked against the action ``read`` makes."""
    return Click(ids, read, role, doing, run, names_cluster, in_place)  # type: ignore[arg-type]
