"""The cost chart's data: each day's spend (busy and idle) and what was saved, summed from
the ledger and the savings exactly as the table is. The platform draws it (a PNG, with
matplotlib in ``bot/charts.py``) and shares it with the same numbers as a CSV beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.spend.runs import SpendRun
from handlers.spend.savings import Saving
from handlers.spend.totals import totals

DAY = 24 * 3600.0


@dataclass(frozen=True)
class Day:
    start: float  # UTC midnight
    spend: float
    idle: float
    saved: float

    @property
    def label(self) -> str:
        return datetime.fromtimestamp(self.start, UTC).strftime("%d %b")

    @property
    def busy(self) -> float:
        return self.spend - self.idle


@dataclass(frozen=True)
class Chart:
    title: str
    days: tuple[Day, ...]
    note: str

    def csv(self) -> str:
        """The chart's numbers: one row a day, dollars at list prices."""
        lines = ["day,spend_usd,idle_usd,saved_usd"]
        for day in self.days:
            date = datetime.fromtimestamp(day.start, UTC).strftime("%Y-%m-%d")
            lines.append(f"{date},{day.spend:.2f},{day.idle:.2f},{day.saved:.2f}")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, object]:
        """What a golden file pins: the title and each day's three figures."""
        return {
            "title": self.title,
            "days": [
                [d.label, round(d.spend, 2), round(d.idle, 2), round(d.saved, 2)] for d in self.days
            ],
        }


def daily(
    runs: Sequence[SpendRun], saved: Sequence[Saving], since: float, until: float, title: str
) -> Chart:
    """Each UTC day from ``since``'s to ``until``'s, summed over the whole scope."""
    days = []
    start = since - since % DAY
    while start < until:
        end = min(start + DAY, until)
        whole = totals(runs, max(start, since), end, lambda _: ("all",), saved).get("all")
        spend, idle, kept = (whole.cost, whole.idle, whole.saved) if whole else (0.0, 0.0, 0.0)
        days.append(Day(start, spend, idle, kept))
        start += DAY
    note = "Estimates at list prices; idle is spend after the idle threshold with no Slurm demand"
    return Chart(title, tuple(days), note)
