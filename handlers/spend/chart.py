"""The cost chart's data: each day's spend (busy and idle) and what was saved, summed from
the ledger and the savings exactly as the table is. The platform draws it (a PNG, with
matplotlib in ``bot/charts.py``) and shares it with the same numbers as a CSV beside it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.spend.runs import SpendRun
from handlers.spend.savings import Saving
from handlers.spend.totals import DAY, Tally

__all__ = ["DAY", "Chart", "Day", "chart_of", "daily"]
DAILY_BARS = 92  # days drawn a bar each; a longer period is drawn a bar a week


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

    @property
    def per(self) -> str:
        """What one bar of the drawing sums: a day, or a week over a long period."""
        return "day" if len(self.days) <= DAILY_BARS else "week"

    def bars(self) -> tuple[Day, ...]:
        """What is drawn: a bar a day, or a bar a week (each from its first day) when the
        period is longer than ``DAILY_BARS`` days, so that a drawing has 60 bars at most
        whatever the period (400 days: 58); the CSV keeps every day."""
        if self.per == "day":
            return self.days
        weeks = [self.days[at : at + 7] for at in range(0, len(self.days), 7)]
        return tuple(
            Day(
                week[0].start,
                sum(d.spend for d in week),
                sum(d.idle for d in week),
                sum(d.saved for d in week),
            )
            for week in weeks
        )

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
    runs: Iterable[SpendRun], saved: Sequence[Saving], since: float, until: float, title: str
) -> Chart:
    """Each UTC day from ``since``'s to ``until``'s, summed over the whole scope."""
    tally = Tally(since, until)
    tally.add(runs)
    return chart_of(tally, saved, title)


def chart_of(tally: Tally, saved: Sequence[Saving], title: str) -> Chart:
    """The chart of what ``tally`` has summed: one bar a day, in one pass over each run."""
    days = tuple(
        Day(start, spend.cost, spend.idle, spend.saved) for start, spend in tally.by_day(saved)
    )
    note = "Estimates at list prices; idle is spend after the idle threshold with no Slurm demand"
    return Chart(title, days, note)
