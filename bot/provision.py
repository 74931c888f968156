"""What the service provides the capabilities' ports as: its store for every port whose
Protocol the store meets, and by name the calendar, the chart drawer and the digest's cron."""

from __future__ import annotations

from bot.calendar import CronCalendar
from bot.charts import AggCharts
from bot.jobs import digest_firings
from handlers.capabilities import REGISTRY
from handlers.schedules.capability import CALENDAR
from handlers.spend.capability import CHARTS, DIGEST_CRON


def provisions(store: object, digest_cron: str, digest_zone: str) -> dict[str, object]:
    """Every declared port's provision (the digest's cron is None when it is "off")."""
    named: dict[str, object] = {
        CALENDAR.name: CronCalendar(),
        CHARTS.name: AggCharts(),
        DIGEST_CRON.name: digest_firings(digest_cron, digest_zone),
    }
    return REGISTRY.provided(store, **named)
