"""The schedules' part in a sweep: before it judges the clusters, each cluster asleep by its
schedule is said to be (it is not idle), and each one a schedule takes to zero anyway says
when; after, the label schedules look at the labels the sweep just listed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from handlers.schedules.model import ScheduleState
from handlers.schedules.service import Schedules

if TYPE_CHECKING:
    from handlers.sweep.observe import Note, Seen


class ScheduleSweep:
    def __init__(self, schedules: Schedules) -> None:
        self.schedules = schedules

    async def notes(self) -> Mapping[str, Note]:
        """Each scheduled cluster's note: asleep by its schedule, or when it goes off."""
        standing = await self.schedules.store.schedules(
            [ScheduleState.ACTIVE, ScheduleState.PAUSED]
        )
        notes: dict[str, Note] = {}
        for schedule in standing:
            asleep, coming = schedule.note()
            before = notes.get(schedule.cluster, (None, None))
            notes[schedule.cluster] = (before[0] or asleep, before[1] or coming)
        return notes

    async def observed(self, seen: Sequence[Seen]) -> None:
        if self.schedules.labels is not None:
            await self.schedules.labels.observed(seen)

    async def swept(self, seen: Sequence[Seen]) -> int:
        return 0  # its cards are owed by the approvals, not counted as alerts

    async def gone(self, cluster: str) -> None:
        """Nothing kept of a cluster: a deleted cluster's schedule ends with its next night."""
