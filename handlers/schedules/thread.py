"""What a schedule's thread is told: each line owed in the ``Outbox``, with the phase move
that makes it true when there is one, so that a line is said once, whichever replica moves
the schedule and whatever dies after."""

from __future__ import annotations

from typing import Unpack

from handlers.owed.model import Owed
from handlers.owed.posting import Outbox
from handlers.replies import Button, Buttons, Line, Reply, Strong, Text, UserRef
from handlers.schedules.clicks import Night
from handlers.schedules.model import Phase, Schedule, ScheduleChanges
from handlers.schedules.ports import ScheduleStore
from handlers.schedules.times import local


class ScheduleThread:
    def __init__(self, store: ScheduleStore, outbox: Outbox) -> None:
        self.store = store
        self.outbox = outbox

    def line(
        self, schedule: Schedule, text: str, buttons: Buttons | None = None, by: str | None = None
    ) -> Owed:
        """A line owed in the schedule's thread (under its card); ``by``: who did it."""
        said: Line = (Strong(schedule.scope), f": {text}")
        if by is not None:
            said = (*said, ", by ", UserRef(by))
        reply = Reply(f"schedule {schedule.id} of {schedule.scope}", public=True).add(
            Text(*said, ".")
        )
        if buttons is not None:
            reply.add(buttons)
        return self.outbox.item(schedule.channel, reply, thread=schedule.thread)

    async def say(
        self, schedule: Schedule, text: str, buttons: Buttons | None = None, by: str | None = None
    ) -> None:
        """A line in the schedule's thread with no move behind it, owed and sent now."""
        await self.outbox.send(self.line(schedule, text, buttons, by))

    async def move(
        self,
        schedule: Schedule,
        before: Phase,
        after: Phase,
        text: str,
        *,
        if_due: float | None = None,
        **changes: Unpack[ScheduleChanges],
    ) -> bool:
        """Move the schedule a phase on and owe ``text`` with the move, in one step; False
        when another replica moved it first (and said it)."""
        said = self.line(schedule, text)
        moved = await self.store.move_schedule(
            schedule.id, before, after, if_due=if_due, owe=[said], **changes
        )
        if moved:
            await self.outbox.sent_now(said)
        return moved


def notice_of(schedule: Schedule, off: float) -> tuple[str, Buttons]:
    """The notice before an "off": when, and Skip tonight and Postpone 2 h."""
    text = (
        f"goes to zero at {local(off, schedule.zone)} unless Slurm has work then. "
        "Operators can skip tonight or postpone it"
    )
    buttons = Buttons(
        (
            Button(Night(schedule.id, int(off)), "Skip tonight"),
            Button(Night(schedule.id, int(off), postpone=True), "Postpone 2 h"),
        )
    )
    return text, buttons
