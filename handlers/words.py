"""Numbers and times in words, the same everywhere a person reads them."""

from __future__ import annotations

from datetime import UTC, datetime


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 day``, ``2 days``, ``0 nodes``; ``many`` for irregular plurals."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 days 4 h``."""
    total = max(0, round(seconds))
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{plural(days, 'day')} {hours} h" if hours else plural(days, "day")


def stamp(moment: datetime | float | None) -> str:
    """``2026-11-30 16:05 UTC`` for a datetime or an epoch time; ``?`` when unknown."""
    if moment is None:
        return "?"
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
