"""Off-hours schedules by cluster label, in the spirit of Cloud Custodian's offhours tag: a
cluster labelled ``clusterbot-schedule: NAME`` is offered the policy's schedule NAME
(``[schedules.NAME]``: off, on, tz) on a card in the alert channel, approved once like any
schedule. Taking the label off, or naming another schedule, ends the one it gave (a cluster
asleep by it is woken first). A proposal that was rejected is not asked again while the
label stays the same.

The labels are those each sweep lists, handed to this look as the sweep's clusters (it is a
sweep listener): looking costs no call to the control plane, and acts only on labels just
read, never on what another replica's sweep may have changed since
(``handlers/schedules/sweeping.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from handlers.errors import UserError
from handlers.ports import Clock
from handlers.schedules.model import ScheduleState
from handlers.schedules.profiles import ScheduleProfile
from handlers.schedules.service import STANDING, Schedules

if TYPE_CHECKING:
    from handlers.sweep.observe import Seen

log = logging.getLogger(__name__)
LABEL = "clusterbot-schedule"
BY_LABEL = f"label {LABEL}"  # who asks, and ends, a schedule a label gave


class LabelSchedules:
    def __init__(
        self,
        *,
        schedules: Schedules,
        profiles: Mapping[str, ScheduleProfile],
        channel: str | None,
        clock: Clock,
    ) -> None:
        self.schedules = schedules
        self.profiles = profiles
        self.channel = channel
        self.clock = clock

    async def observed(self, seen: Sequence[Seen]) -> None:
        """Offer each labelled cluster of this sweep its schedule, and end one whose label
        went; a failure is logged and the next sweep looks again."""
        try:
            await self.look({item.cluster.name: item.cluster.labels for item in seen})
        except Exception:
            log.exception("looking at the clusters' schedule labels failed; the next sweep looks")

    async def look(self, labels: Mapping[str, tuple[tuple[str, str], ...]]) -> None:
        """Offer a labelled cluster its schedule, and end one whose label went."""
        if not self.profiles or self.channel is None:
            return
        rows = await self.schedules.store.schedules()
        for cluster, pairs in labels.items():
            value = dict(pairs).get(LABEL)
            given = [s for s in rows if s.cluster == cluster and s.label is not None]
            for schedule in given:
                if schedule.state in STANDING and schedule.label != value:
                    await self.schedules.stop(schedule.id, ScheduleState.ENDED, actor=BY_LABEL)
            offered = any(s.label == value for s in given)
            if value is not None and value in self.profiles and not offered:
                await self._offer(cluster, value)

    async def _offer(self, cluster: str, name: str) -> None:
        off, on, zone = self.profiles[name].times()
        try:
            asker, channel = f"{BY_LABEL}={name}", self.channel or ""
            await self.schedules.propose(asker, channel, cluster, None, off, on, zone, label=name)
        except UserError as error:  # asked again at the next look
            log.info("schedule %s not offered to %s yet: %s", name, cluster, error.said)
