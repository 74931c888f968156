"""The cost chart's data: each day's spend (busy and idle) and what was saved, summed from
the ledger and the savings exactly as the table is, and each day's spend of the groups the
table shows (the chart is grouped as the table is). The platform draws it (a PNG, with
matplotlib in ``bot/charts.py``) and shares it with the same numbers as a CSV beside it.

A day no sweep watched (before clusterbot began, or while it was stopped) is *not watched*:
drawn as such and left empty in the CSV, never a $0 day."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.spend.runs import DAY, SpendRun
from handlers.spend.savings import Saving
from handlers.spend.series import GroupDays
from handlers.spend.totals import Tally

__all__ = ["DAY", "Chart", "Day", "chart_of", "daily"]
DAILY_BARS = 92  # days drawn a bar each; a longer period is drawn a bar a week


@dataclass(frozen=True)
class Day:
    start: float  # UTC midnight
    spend: float
    idle: float
    saved: float
    watched: bool = True  # a sweep saw the fleet that day
    groups: tuple[float, ...] = ()  # the spend of each of the chart's series that day

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
    series: tuple[str, ...] = ()  # the groups stacked in each bar (the table's first ones)

    @property
    def per(self) -> str:
        """What one bar of the drawing sums: a day, or a week over a long period."""
        return "day" if len(self.days) <= DAILY_BARS else "week"

    @property
    def watched(self) -> int:
        return sum(d.watched for d in self.days)

    def labels(self, bars: Sequence[Day]) -> list[str]:
        """Each bar's date on the axis, with its year when the period spans two."""
        years = {datetime.fromtimestamp(d.start, UTC).year for d in bars}
        shape = "%d %b %Y" if len(years) > 1 else "%d %b"
        return [datetime.fromtimestamp(d.start, UTC).strftime(shape) for d in bars]

    def bars(self) -> tuple[Day, ...]:
        """What is drawn: a bar a day, or a bar a week (each from its first day) when the
        period is longer than ``DAILY_BARS`` days, so that a drawing has 60 bars at most
        whatever the period (400 days: 58); the CSV keeps every day. A week is watched
        when any of its days is."""
        if self.per == "day":
            return self.days
        weeks = [self.days[at : at + 7] for at in range(0, len(self.days), 7)]
        return tuple(
            Day(
                week[0].start,
                sum(d.spend for d in week),
                sum(d.idle for d in week),
                sum(d.saved for d in week),
                any(d.watched for d in week),
                tuple(sum(column) for column in zip(*(d.groups for d in week), strict=True)),
            )
            for week in weeks
        )

    def csv(self) -> str:
        """The chart's numbers: one row a day, dollars at list prices, each series' spend
        after; a day not watched has no figures."""
        head = ["day", "watched", "spend_usd", "idle_usd", "saved_usd"]
        lines = [",".join(head + [f"{_csv_name(s)}_usd" for s in self.series])]
        for day in self.days:
            date = datetime.fromtimestamp(day.start, UTC).strftime("%Y-%m-%d")
            if not day.watched:
                lines.append(",".join([date, "no"] + [""] * (len(head) - 2 + len(self.series))))
                continue
            figures = [day.spend, day.idle, day.saved, *day.groups]
            lines.append(",".join([date, "yes"] + [f"{f:.2f}" for f in figures]))
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, object]:
        """What a golden file pins: the title and each day's three figures."""
        return {
            "title": self.title,
            "days": [
                [d.label, round(d.spend, 2), round(d.idle, 2), round(d.saved, 2)]
                if d.watched
                else [d.label, None, None, None]
                for d in self.days
            ],
        }


def _csv_name(name: str) -> str:
    """A series' name as a CSV column: no commas, quotes or spaces (``c1 / gpu``: c1_gpu)."""
    return re.sub(r"[^A-Za-z0-9=._-]+", "_", name).strip("_")[:60] or "group"


def daily(
    runs: Iterable[SpendRun], saved: Sequence[Saving], since: float, until: float, title: str
) -> Chart:
    """Each UTC day from ``since``'s to ``until``'s, summed over the whole scope."""
    tally = Tally(since, until)
    tally.add(runs)
    return chart_of(tally, saved, title)


def chart_of(
    tally: Tally, saved: Sequence[Saving], title: str, groups: GroupDays | None = None
) -> Chart:
    """The chart of what ``tally`` has summed: one bar a day, in one pass over each run;
    with ``groups``, each day's spend of the table's first groups too."""
    series = groups.names() if groups is not None else ()
    days = tuple(
        Day(
            start,
            spend.cost,
            spend.idle,
            spend.saved,
            start in tally.watched,
            groups.of(start) if groups is not None else (),
        )
        for start, spend in tally.by_day(saved)
    )
    note = "Estimates at list prices; idle is spend after the idle threshold with no Slurm demand"
    if any(not d.watched for d in days):
        note += "; grey: not watched by clusterbot (no figures, not $0)"
    return Chart(title, days, note, series)
