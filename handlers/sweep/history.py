"""Rule 9 of the idle policy (``handlers/sweep/rules.py``): seven days of busy and quiet time per
cluster, merged into runs, and the recommendation made from them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from handlers.words import duration, plural


class Often(Protocol):
    """The idle rule the recommendation reads (``IdleRules.often_days``)."""

    @property
    def often_days(self) -> int: ...


DAY = 86_400.0
WEEK = 7 * DAY


class Recommendation(StrEnum):
    SCALE_TO_ZERO = "scale_to_zero"
    DELETE = "delete"


@dataclass(frozen=True)
class Run:
    """A stretch of time the cluster was busy, or not."""

    start: float
    end: float
    busy: bool


def record_history(
    history: tuple[Run, ...], start: float, end: float, busy: bool
) -> tuple[Run, ...]:
    """Add a run and compact: merge with the last run when alike, drop what is older than 7 days."""
    runs = list(history)
    if end > start:
        if runs and runs[-1].busy == busy and abs(runs[-1].end - start) < 1e-6:
            runs[-1] = Run(runs[-1].start, end, busy)
        else:
            runs.append(Run(start, end, busy))
    horizon = end - WEEK
    kept = [Run(max(r.start, horizon), r.end, r.busy) for r in runs if r.end > horizon]
    return tuple(kept)


def recommend(history: tuple[Run, ...], now: float, rules: Often) -> tuple[Recommendation, str]:
    """Scale to zero or delete, and the reason in words."""
    days_used = {
        datetime.fromtimestamp(moment, UTC).date()
        for run in history
        if run.busy and run.end > now - WEEK
        for moment in _days_between(max(run.start, now - WEEK), run.end)
    }
    busy_hours = (
        sum(r.end - max(r.start, now - WEEK) for r in history if r.busy and r.end > now - WEEK)
        / 3600
    )
    watched = (now - history[0].start) / DAY if history else 0.0
    watched_note = "" if watched >= 6.9 else f" (watched for {duration(watched * DAY)} so far)"
    used = len(days_used)
    busy = duration(busy_hours * 3600)
    if used < rules.often_days and watched < 6.9:
        return (
            Recommendation.SCALE_TO_ZERO,
            f"used on {plural(used, 'day')}{watched_note}: scale to zero, which is easy to "
            "undo; deleting is advised only after a week of little use",
        )
    if used >= rules.often_days:
        return (
            Recommendation.SCALE_TO_ZERO,
            f"used on {used} of the last 7 days ({busy} busy){watched_note}: scale to zero, so "
            "it comes back quickly when jobs return",
        )
    return (
        Recommendation.DELETE,
        f"used on {used} of the last 7 days ({busy} busy){watched_note}: delete it, and "
        "create it again when it is needed",
    )


def _days_between(start: float, end: float) -> list[float]:
    moments = [start]
    day_start = (start // DAY + 1) * DAY
    while day_start < end:
        moments.append(day_start)
        day_start += DAY
    return moments
