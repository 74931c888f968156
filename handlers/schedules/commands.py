"""``/cluster schedule`` and ``/cluster schedules``: their words, parsed purely, and what runs
them. ``schedule train01 a4 off Mon-Fri 20:00 on Mon-Fri 08:00 tz Europe/Berlin`` asks for a
schedule; ``schedule pause|resume|end ID`` changes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from handlers.grammar import POOL_ID, CommandError, arity, cluster_word, echo
from handlers.schedules.times import Weekly, parse_weekly, parse_zone, unquoted

if TYPE_CHECKING:
    from handlers.commanding import Caller
    from handlers.replies import Reply
    from handlers.schedules.service import Schedules

SCHEDULE_USAGE = (
    "/cluster schedule CLUSTER [POOL] off [DAYS] HH:MM on [DAYS] HH:MM [tz ZONE]   "
    "(or pause|resume|end ID)"
)
SCHEDULES_USAGE = "/cluster schedules"

SCHEDULE = (
    "ask for an off-hours schedule: its pools to zero at off and back at on, never under "
    "running jobs (a second person approves it once); pause, resume or end one"
)
SCHEDULES = "the off-hours schedules in force, with their next off or on and what they saved"
DEFAULT_ZONE = "UTC"
CHANGES = ("pause", "resume", "end")
KEYWORDS = ("off", "on", "tz")


@dataclass(frozen=True)
class AskSchedule:
    cluster: str
    pool: str | None
    off: Weekly
    on: Weekly
    zone: str


@dataclass(frozen=True)
class ChangeSchedule:
    action: str  # pause, resume or end
    schedule_id: str


@dataclass(frozen=True)
class ListSchedules:
    pass


def parse_schedule(args: list[str]) -> AskSchedule | ChangeSchedule:
    words = unquoted(args)
    if len(words) == 2 and words[0].lower() in CHANGES and words[1].lower().startswith("sch-"):
        return ChangeSchedule(words[0].lower(), words[1].lower())
    arity(words, SCHEDULE_USAGE, 1, 12)
    cluster = cluster_word(words[0], "schedule")
    lowered = [w.lower() for w in words]
    if "off" not in lowered or "on" not in lowered:
        raise CommandError("schedule needs off DAYS HH:MM and on DAYS HH:MM", "schedule")
    off_at, on_at = lowered.index("off"), lowered.index("on")
    if not 1 <= off_at <= 2 or on_at < off_at:
        raise CommandError("write off … before on …, after CLUSTER [POOL]", "schedule")
    pool = None
    if off_at == 2:
        pool = words[1]
        if not POOL_ID.match(pool):
            raise CommandError(f"{echo(pool)} is not a node pool id", "schedule")
    tz_at = lowered.index("tz") if "tz" in lowered else len(words)
    if tz_at < on_at or tz_at not in (len(words), len(words) - 2):
        raise CommandError("write tz ZONE last, once", "schedule")
    off = _weekly(words[off_at + 1 : on_at], "off")
    on = _weekly(words[on_at + 1 : tz_at], "on")
    if off == on:
        raise CommandError("off and on are the same time", "schedule")
    zone = parse_zone(words[tz_at + 1], "schedule") if tz_at < len(words) else DEFAULT_ZONE
    return AskSchedule(cluster, pool, off, on, zone)


def _weekly(words: list[str], which: str) -> Weekly:
    if not 1 <= len(words) <= 2:
        shown = echo(" ".join(words)) if words else "nothing"
        raise CommandError(
            f"{which} takes DAYS HH:MM (Mon-Fri 20:00) or HH:MM, not {shown}", "schedule"
        )
    return parse_weekly(words, "schedule")


def parse_schedules(args: list[str]) -> ListSchedules:
    arity(args, SCHEDULES_USAGE, 0, 0)
    return ListSchedules()


async def run_schedule(
    schedules: Schedules | None, command: AskSchedule | ChangeSchedule, caller: Caller
) -> Reply | None:
    if schedules is None:
        raise CommandError("this clusterbot keeps no schedules", "schedule")
    if isinstance(command, ChangeSchedule):
        return await schedules.change(caller.user, command.schedule_id, command.action)
    await schedules.propose(
        caller.user,
        caller.channel,
        command.cluster,
        command.pool,
        command.off,
        command.on,
        command.zone,
    )
    return None  # the approval card is the answer


async def run_schedules(
    schedules: Schedules | None, command: ListSchedules, caller: Caller
) -> Reply:
    if schedules is None:
        raise CommandError("this clusterbot keeps no schedules", "schedules")
    return await schedules.listing()
