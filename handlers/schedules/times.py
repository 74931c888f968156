"""A schedule's times: "off" and "on" as weekdays and a wall-clock time in a time zone.

The words (``Mon-Fri 20:00``, ``Sat,Sun 09:30``, ``weekdays``, ``daily``) are parsed here,
purely. When a time next comes is the calendar's answer (``handlers.ports.Calendar``): the
service's is APScheduler's cron trigger in the schedule's zone, with its DST rules, and the
core never imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from handlers.grammar import CommandError, echo

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FULL_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DAY_SETS = {
    "daily": frozenset(range(7)),
    "weekdays": frozenset(range(5)),
    "weekends": frozenset({5, 6}),
}
CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
QUOTES = "\"'“”‘’"  # typed around a time, or put there by a phone's keyboard
MAX_ZONE = 64  # the longest name of the tz database is 32 characters


@dataclass(frozen=True)
class Weekly:
    """A time on some days of the week: weekday numbers (Monday 0), hour and minute."""

    days: frozenset[int]
    hour: int
    minute: int

    @property
    def cron_days(self) -> str:
        """The days as a cron ``day_of_week`` field: ``mon,tue,…`` (APScheduler's names)."""
        return ",".join(DAY_NAMES[d] for d in sorted(self.days))

    def __str__(self) -> str:
        return f"{days_text(self.days)} {self.hour:02d}:{self.minute:02d}"

    @property
    def stored(self) -> str:
        """As the store keeps it, read back by ``parse_weekly``: ``mon,tue 20:00``."""
        return f"{self.cron_days} {self.hour:02d}:{self.minute:02d}"

    @classmethod
    def read(cls, text: str) -> Weekly:
        return parse_weekly(text.split(), "schedule")


def days_text(days: frozenset[int]) -> str:
    """The days as a person writes them: ``Mon-Fri``, ``Sat,Sun``, ``daily``."""
    if days == DAY_SETS["daily"]:
        return "daily"
    ordered = sorted(days)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{_title(ordered[0])}-{_title(ordered[-1])}"
    return ",".join(_title(d) for d in ordered)


def _title(day: int) -> str:
    return DAY_NAMES[day].title()


def unquoted(words: list[str]) -> list[str]:
    """The words with quotes around them dropped: ``off "Mon-Fri 20:00"`` reads as
    ``off Mon-Fri 20:00``."""
    stripped = (word.strip(QUOTES) for word in words)
    return [word for word in stripped if word]


def parse_days(word: str, subcommand: str) -> frozenset[int]:
    """``Mon-Fri``, ``Fri-Mon`` (wrapping), ``Sat,Sun``, ``Mon``, ``daily``, ``weekdays``."""
    lowered = word.lower()
    if lowered in DAY_SETS:
        return DAY_SETS[lowered]
    days: set[int] = set()
    for part in lowered.split(","):
        first, _, last = part.partition("-")
        start, end = _day(first, word, subcommand), _day(last or first, word, subcommand)
        days.update(_span(start, end))
    return frozenset(days)


def _span(start: int, end: int) -> Iterator[int]:
    day = start
    yield day
    while day != end:
        day = (day + 1) % 7
        yield day


def _day(word: str, whole: str, subcommand: str) -> int:
    found = [i for i, full in enumerate(FULL_NAMES) if len(word) >= 3 and full.startswith(word)]
    if not found:
        raise CommandError(
            f"{echo(whole)} is not a set of days: write Mon-Fri, Sat,Sun, Mon, daily, "
            "weekdays or weekends",
            subcommand,
        )
    return found[0]


def parse_clock(word: str, subcommand: str) -> tuple[int, int]:
    found = CLOCK.match(word)
    if found is None:
        raise CommandError(
            f"{echo(word)} is not a time of day: write HH:MM, 00:00 to 23:59", subcommand
        )
    return int(found.group(1)), int(found.group(2))


def parse_weekly(words: list[str], subcommand: str) -> Weekly:
    """``DAYS HH:MM``, or ``HH:MM`` alone for every day."""
    if not words:
        raise CommandError("a time of day is missing: write HH:MM, or DAYS HH:MM", subcommand)
    if len(words) == 1:
        hour, minute = parse_clock(words[0], subcommand)
        return Weekly(DAY_SETS["daily"], hour, minute)
    days = parse_days(words[0], subcommand)
    hour, minute = parse_clock(words[1], subcommand)
    return Weekly(days, hour, minute)


@cache
def zone_names() -> dict[str, str]:
    """Every zone of the tz database, by its name in lower case. What a person types is only
    ever looked up here, never handed to the tz database as a path: a folder of it
    (``Europe``), a name too long for a file, or ``../`` are words it does not list."""
    return {name.lower(): name for name in available_timezones()}


def zone_named(word: str) -> str | None:
    """The tz database's name for ``word`` (in any case), or None."""
    return zone_names().get(word.lower()) if len(word) <= MAX_ZONE else None


def parse_zone(word: str, subcommand: str) -> str:
    """An IANA time zone (``Europe/Berlin``, ``UTC``), as the tz database names it, in any
    case; anything else is refused in one line."""
    found = zone_named(word)
    if found is not None:
        return found
    raise CommandError(
        f"{echo(word)} is not a time zone of the tz database: write one such as "
        "Europe/Berlin, America/New_York or UTC",
        subcommand,
    )


def local(moment: float, zone: str) -> str:
    """``Mon 2 Dec 20:00 CET``: a time as the schedule's people read it."""
    at = datetime.fromtimestamp(moment, ZoneInfo(zone))
    return f"{at:%a} {at.day} {at:%b %H:%M} {at.tzname()}"
