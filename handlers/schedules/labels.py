"""Off-hours schedules by cluster label, in the spirit of Cloud Custodian's offhours tag: a
cluster labelled ``clusterbot-schedule: NAME`` is offered the policy's schedule NAME
(``[schedules.NAME]``: off, on, tz) on a card in the alert channel, approved once like any
schedule. Taking the label off, or naming another schedule, ends the one it gave (a cluster
asleep by it is woken first). A proposal that was rejected is not asked again while the
label stays the same.

The labels are read from the idle sweep's records, which keep each cluster's labels as the
sweep last listed them, so looking costs no call to the control plane.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from handlers.errors import UserError
from handlers.policy import ScheduleProfile
from handlers.ports import Clock, IdleRecordStore
from handlers.schedules.model import ScheduleState
from handlers.schedules.service import STANDING, Schedules

log = logging.getLogger(__name__)
LABEL = "clusterbot-schedule"
BY_LABEL = f"label {LABEL}"  # who asks, and ends, a schedule a label gave
LOOK_EVERY = 300.0  # seconds between looks at the labels (the sweep refreshes them)


class LabelSchedules:
    def __init__(
        self,
        *,
        schedules: Schedules,
        records: IdleRecordStore,
        profiles: Mapping[str, ScheduleProfile],
        channel: str | None,
        clock: Clock,
    ) -> None:
        self.schedules = schedules
        self.records = records
        self.profiles = profiles
        self.channel = channel
        self.clock = clock
        self._looked: float | None = None

    async def look(self) -> None:
        """Offer a labelled cluster its schedule, and end one whose label went."""
        now = self.clock()
        if not self.profiles or self.channel is None:
            return
        if self._looked is not None and now - self._looked < LOOK_EVERY:
            return
        self._looked = now
        rows = await self.schedules.store.schedules()
        for record in await self.records.all():
            value = dict(record.labels).get(LABEL)
            given = [s for s in rows if s.cluster == record.cluster and s.label is not None]
            for schedule in given:
                if schedule.state in STANDING and schedule.label != value:
                    await self.schedules.stop(schedule.id, ScheduleState.ENDED, actor=BY_LABEL)
            offered = any(s.label == value for s in given)
            if value is not None and value in self.profiles and not offered:
                await self._offer(record.cluster, value)

    async def _offer(self, cluster: str, name: str) -> None:
        off, on, zone = self.profiles[name].times()
        try:
            asker, channel = f"{BY_LABEL}={name}", self.channel or ""
            await self.schedules.propose(asker, channel, cluster, None, off, on, zone, label=name)
        except UserError as error:  # asked again at the next look
            log.info("schedule %s not offered to %s yet: %s", name, cluster, error.said)
