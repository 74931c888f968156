"""The core's calendar (``handlers.ports.Calendar``) on APScheduler's cron trigger, the same
trigger the service's periodic work runs on, in the schedule's IANA zone."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from handlers.schedules.times import Weekly


@functools.lru_cache(maxsize=1024)
def _trigger(when: Weekly, zone: str) -> CronTrigger:
    return CronTrigger(
        day_of_week=when.cron_days, hour=when.hour, minute=when.minute, timezone=ZoneInfo(zone)
    )


class CronCalendar:
    def next_time(self, when: Weekly, zone: str, after: float) -> float:
        trigger = _trigger(when, zone)
        moment = datetime.fromtimestamp(after, UTC) + timedelta(microseconds=1)
        while True:
            found = trigger.get_next_fire_time(None, moment)
            assert found is not None  # a weekly time always comes again
            if not _second_of_a_repeated_hour(found):
                return float(found.timestamp())
            # Clocks went back and the wall time came again: APScheduler would fire twice
            # (once in each offset); a schedule's time comes once a local day.
            moment = found.astimezone(UTC) + timedelta(seconds=1)


def _second_of_a_repeated_hour(moment: datetime) -> bool:
    """Whether the same wall time came earlier that night, in the zone's offset before the
    clocks went back."""
    wall = moment.replace(tzinfo=None)
    zone = moment.tzinfo
    assert isinstance(zone, ZoneInfo)
    first = wall.replace(tzinfo=zone, fold=0)
    return first.utcoffset() != moment.utcoffset() and first.timestamp() < moment.timestamp()
