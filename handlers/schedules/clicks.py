"""The action a night's notice carries: Skip tonight and Postpone 2 h, on the notice posted
shortly before a night's "off" (its clicks: ``handlers/schedules/capability.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from handlers.actions import ActionError

SKIP: Final = "schedule_skip"
POSTPONE: Final = "schedule_postpone"


@dataclass(frozen=True)
class Night:
    """Skip tonight's "off" of a schedule, or postpone it two hours (operators), from the
    notice posted shortly before it; ``off_at`` names the night, so a late click on an old
    notice does nothing to the next one."""

    schedule_id: str
    off_at: int  # epoch seconds of the "off" the notice was for
    postpone: bool = False

    @property
    def action_id(self) -> str:
        return POSTPONE if self.postpone else SKIP

    @property
    def value(self) -> str:
        return f"{self.schedule_id}|{self.off_at}"


def night(action_id: str, value: str) -> Night:
    schedule_id, _, off_at = value.partition("|")
    if not schedule_id or not off_at.isdigit():
        raise ActionError("That schedule's night is not one clusterbot offers.")
    return Night(schedule_id, int(off_at), postpone=action_id == POSTPONE)
