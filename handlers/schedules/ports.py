"""What the schedules capability needs from the world: its store and a calendar
(``bot/store/schedules.py`` and ``bot/calendar.py`` implement them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Unpack, runtime_checkable

from handlers.owed.model import Owed
from handlers.schedules.model import Phase, Schedule, ScheduleChanges, ScheduleState
from handlers.schedules.times import Weekly


class Calendar(Protocol):
    """When a weekly time next comes in a time zone, DST included (the service's is
    APScheduler's cron trigger: ``bot/calendar.py``)."""

    def next_time(self, when: Weekly, zone: str, after: float) -> float:
        """The first moment strictly after ``after`` (epoch seconds) that ``when`` comes in
        ``zone``: once a local day, so a wall time that comes twice as clocks go back comes
        once, and one the clocks skip comes when they land past it."""
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    async def add_schedule(self, schedule: Schedule) -> bool:
        """Keep a new schedule; False when its id is taken (another replica made it)."""
        ...

    async def drop_schedule(self, schedule_id: str) -> None: ...
    async def get_schedule(self, schedule_id: str) -> Schedule | None: ...
    async def schedules(self, states: Sequence[ScheduleState] | None = None) -> list[Schedule]:
        """Schedules in ``states`` (every one when None), and any other still asleep or on
        its way, oldest first."""
        ...

    async def move_schedule(
        self,
        schedule_id: str,
        before: Phase,
        after: Phase,
        *,
        if_due: float | None = None,
        owe: Sequence[Owed] = (),
        **changes: Unpack[ScheduleChanges],
    ) -> bool:
        """``before`` -> ``after`` (while its ``due_at`` is ``if_due``, when given); False
        when another replica moved it first. ``owe``: recorded with the move, if it wins."""
        ...

    async def claim_notice(self, schedule_id: str, off_at: float, owe: Sequence[Owed] = ()) -> bool:
        """Whether this call is the one to post the notice for the "off" at ``off_at``."""
        ...

    async def set_schedule_state(
        self,
        schedule_id: str,
        before: Sequence[ScheduleState],
        after: ScheduleState,
        owe: Sequence[Owed] = (),
        **changes: Unpack[ScheduleChanges],
    ) -> bool: ...
    async def update_schedule(
        self, schedule_id: str, **changes: Unpack[ScheduleChanges]
    ) -> None: ...
