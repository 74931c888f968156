"""A schedule as stored, and the phases of its nights.

Every move between phases is one conditional change in the store (``move_schedule``), so of
several replicas exactly one fires an "off" or an "on", and a crash between any two steps
leaves a phase the next check finishes by looking at the world:

- ``awake``: at its bounds; at ``next_off`` it becomes ``waiting``.
- ``waiting``: "off" is due; a queue with work keeps it up, looked at again at ``due_at``,
  up to a limit of looks, past which the night is skipped.
- ``going-off``: the scale to zero is asked under ``firing_request``, chosen before it is
  asked; the bounds it had are in ``kept``.
- ``asleep``: at zero; at ``next_on`` it becomes ``waking``.
- ``waking``: the kept bounds are asked back under ``firing_request``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypedDict

from handlers.schedules.times import Weekly, local


class ScheduleState(StrEnum):
    PROPOSED = "proposed"  # its card is out; approved, it becomes active
    ACTIVE = "active"
    PAUSED = "paused"  # no "off" fires; a cluster asleep is woken
    ENDED = "ended"  # ended, or its proposal was not approved


class Phase(StrEnum):
    AWAKE = "awake"
    WAITING = "waiting"
    GOING_OFF = "going-off"
    ASLEEP = "asleep"
    WAKING = "waking"


Bounds = dict[str, tuple[int, int]]  # pool id -> (min, max) node count


ACTOR = "schedule:"  # who asks a schedule's changes: ``schedule:ID``


def actor_of(schedule_id: str) -> str:
    return f"{ACTOR}{schedule_id}"


def schedule_of(principal: str) -> str | None:
    """The schedule a principal names, if it is a schedule's."""
    return principal.removeprefix(ACTOR) if principal.startswith(ACTOR) else None


@dataclass
class Schedule:
    id: str
    cluster: str
    pool: str | None  # None: every compute pool
    off: Weekly
    on: Weekly
    zone: str
    requested_by: str
    channel: str
    created_at: float
    request_id: str  # the approval of the schedule itself
    state: ScheduleState = ScheduleState.PROPOSED
    approved_by: str | None = None
    phase: Phase = Phase.AWAKE
    next_off: float | None = None
    next_on: float | None = None
    due_at: float | None = None  # waiting: when the queue is looked at again
    tries: int = 0  # waiting: looks at a busy queue for this "off"
    firing_request: str | None = None  # going-off, waking: the change asked
    kept: Bounds = field(default_factory=dict)  # the bounds it had when it went off
    slept_at: float | None = None  # when it reached zero
    noticed_for: float | None = None  # the "off" whose notice was posted
    thread: str | None = None  # the schedule's card: its thread tells each night
    freed_hour: float | None = None  # what the pools it took to zero cost an hour
    saved: float = 0.0  # dollars at list prices, over every night so far
    saved_hours: float = 0.0  # hours at zero, over every night so far
    label: str | None = None  # the policy's schedule its cluster's label names, if from one

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    @property
    def scope(self) -> str:
        """What it scales: ``train01`` or ``train01 / a4``."""
        return self.cluster_id if self.pool is None else f"{self.cluster_id} / {self.pool}"

    def note(self) -> tuple[str | None, str | None]:
        """What the idle sweep says of its cluster: asleep by it (not idle), or when it takes
        the cluster to zero anyway."""
        if self.sleeping:
            back = f" until {local(self.next_on, self.zone)}" if self.next_on else ""
            return f"asleep on its off-hours schedule {self.id}{back}", None
        if self.state == ScheduleState.ACTIVE and self.next_off is not None:
            when = local(self.next_off, self.zone)
            return None, f"its schedule {self.id} takes {self.scope} to zero at {when}"
        return None, None

    @property
    def sleeping(self) -> bool:
        """At zero, or on its way down or up: the idle alert leaves it be."""
        return self.phase in (Phase.GOING_OFF, Phase.ASLEEP, Phase.WAKING)


class ScheduleChanges(TypedDict, total=False):
    state: ScheduleState
    approved_by: str | None
    phase: Phase
    next_off: float | None
    next_on: float | None
    due_at: float | None
    tries: int
    firing_request: str | None
    kept: Bounds
    slept_at: float | None
    noticed_for: float | None
    thread: str | None
    freed_hour: float | None
    saved: float
    saved_hours: float
