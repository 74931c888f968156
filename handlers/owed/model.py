"""What the bot owes the world, as recorded items: a change to send, a message to post, a
digest due at nine. Each is written before any of it is done, under a key that says what it
is, so that owing it twice is owing it once.

An item is ``due`` until a worker ends it (``done``) or gives it up (``dropped``). A worker
holds it under a lease that only the replica running it renews while it runs; a lease that
lapses hands it to whichever replica looks next. Before a call whose effect cannot be taken
back, the worker records until when that call may still be applied (``in_flight_until``):
nobody looks at the world for its outcome, let alone sends it again, before then.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

FIRST_RETRY = 5.0
LONGEST_RETRY = 300.0


class OwedState(StrEnum):
    DUE = "due"  # to be done (now, or at ``due_at``)
    DONE = "done"
    DROPPED = "dropped"  # given up, and said so


@dataclass
class Owed:
    key: str  # what it is, unique: "change:r-1a2b", "digest:1764579600"
    kind: str  # the worker that does it
    subject: dict[str, Any]  # what the worker needs to know (JSON)
    due_at: float
    created_at: float
    state: OwedState = OwedState.DUE
    owner: str | None = None  # the replica running it now
    lease_until: float = 0.0
    attempts: int = 0  # how many times a worker took it
    in_flight_until: float = 0.0  # a call sent for it may be applied until then (0: none)
    note: str | None = None  # why the last attempt did not end it, or how it ended
    done_at: float | None = None
    result: dict[str, Any] = field(default_factory=dict)  # what an attempt left for the next
    # owing it again makes it due again, even once done, at the sooner of the two times (a
    # summary drawn anew when what it sums changes); never stored
    again: bool = False


class OwedChanges(TypedDict, total=False):
    """What a worker may record on the item it holds."""

    in_flight_until: float
    result: dict[str, Any]
    subject: dict[str, Any]


@dataclass(frozen=True)
class Done:
    """It is done; ``note`` for the log."""

    note: str = ""


@dataclass(frozen=True)
class Later:
    """Not yet (a queue still busy, a look to take again): due again at ``at``. Not a failure:
    the attempt ended as it should."""

    at: float
    why: str = ""


@dataclass(frozen=True)
class GiveUp:
    """It cannot be done, and the worker has said so where it is owed."""

    why: str


Outcome = Done | Later | GiveUp


@dataclass(frozen=True)
class Room:
    """How many items of one kind a replica runs at a time, apart from the others (a kind
    with many short items, like the polls of a thousand operations), and over how many
    seconds a batch of them is started, so that they do not all start in one turn of the
    event loop. A room that ``leaves`` what its items owe (a change's end told, a line in a
    thread) leaves it to the next tick, which runs it in its own room: an attempt here never
    sends it itself (``Engine.run``), so that chat's rate limits never hold the room's
    places (a thousand operations ending together, each end waiting for Slack's room)."""

    at_once: int
    spread: float = 0.0
    leaves: bool = False


def retry_in(attempts: int, rng: random.Random) -> float:
    """The wait before the next attempt after ``attempts`` failed ones: 5 s doubling to at
    most 5 minutes, shortened by up to a fifth at random so that a crowd does not stay in
    step."""
    wait: float = min(LONGEST_RETRY, FIRST_RETRY * 2.0 ** min(max(0, attempts - 1), 10))
    return wait * rng.uniform(0.8, 1.0)
