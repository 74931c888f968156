"""Periodic work and the crash-point hook: process-level machinery the service runs on."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from handlers.ports import CrashPoint, no_crash
from handlers.schedules.times import zone_named

log = logging.getLogger(__name__)
CRASH_EXIT = 86
MAX_FIRINGS = 10  # firings of a cron owed at once: the newest
LOOKED_AT = 20_000  # firings looked through at most (every minute of a fortnight)


def crash_hook(
    point: str | None, pause_at: str | None = None, pause_file: str | None = None
) -> CrashPoint:
    """A debug hook for the crash and fault tests: the process ends at the named step
    ``point``; or at ``pause_at`` it writes the step's name into ``pause_file`` and stands
    still, the whole process with it, until the test has removed the file (having stopped
    the database, sent a signal, or made Slack refuse everything meanwhile), the first time
    any of its processes passes there only (``pause_file``.passed is left to tell)."""
    if not point and not (pause_at and pause_file):
        return no_crash
    said = logging.getLogger("clusterbot.crash")

    def crash(step: str) -> None:
        if step == point:
            said.warning("exiting at %s", step)
            os._exit(CRASH_EXIT)
        if step != pause_at or not pause_file:
            return
        # once, in whichever process passes first (the service, a sweep's child, the
        # service started again): a step passed again (a retry after the fault) goes on
        passed = Path(f"{pause_file}.passed")
        try:
            passed.touch(exist_ok=False)
        except FileExistsError:
            return
        said.warning("pausing at %s", step)
        marker = Path(pause_file)
        marker.write_text(step)
        while marker.exists():  # on purpose: nothing else in the process moves
            time.sleep(0.05)
        said.warning("going on from %s", step)

    return crash


class PeriodicJobs:
    """Periodic work under APScheduler, each run a task of our own: a failure is logged and
    the next run goes on, and shutdown waits for runs in flight instead of cancelling them."""

    def __init__(self) -> None:
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.running: set[asyncio.Task[None]] = set()
        self.busy: set[str] = set()  # jobs with a run in flight

    def add(self, name: str, job: Callable[[], Awaitable[Any]], seconds: float) -> None:
        async def run() -> None:
            if name in self.busy:
                # still at the previous run (a tick during a big sweep): this one is folded
                # into the next, quietly; a run that is late is what the lag metric shows
                log.debug("%s is still running; this run is skipped", name)
                return
            task = asyncio.get_running_loop().create_task(self._guarded(name, job))
            self.running.add(task)
            self.busy.add(name)
            task.add_done_callback(self.running.discard)
            task.add_done_callback(lambda _: self.busy.discard(name))

        # one run at a time; a run missed while busy is folded into the next
        self.scheduler.add_job(
            run,
            "interval",
            seconds=seconds,
            id=name,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )

    @staticmethod
    async def _guarded(name: str, job: Callable[[], Awaitable[Any]]) -> None:
        try:
            await job()
        except Exception:  # a failing run is logged; the next one runs
            log.exception("%s failed; the next run goes on", name)

    def start(self) -> None:
        self.scheduler.start()

    async def stop(self, limit: float) -> None:
        if self.scheduler.running:
            self.scheduler.pause()
        if self.running:
            await asyncio.wait(set(self.running), timeout=limit)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)


def cron_firings(trigger: CronTrigger) -> Callable[[float, float], list[float]]:
    """The times a cron fires in (since, until], epoch seconds: what the digest owes."""

    def firings(since: float, until: float) -> list[float]:
        found: list[float] = []
        moment = datetime.fromtimestamp(since, UTC) + timedelta(microseconds=1)
        fired = trigger.get_next_fire_time(None, moment)
        end = datetime.fromtimestamp(until, UTC)
        for _ in range(LOOKED_AT):
            if fired is None or fired > end:
                break
            found.append(fired.timestamp())
            fired = trigger.get_next_fire_time(fired, fired + timedelta(seconds=1))
        return found[-MAX_FIRINGS:]  # the newest

    return firings


def digest_trigger(crontab: str, zone: str) -> CronTrigger:
    """The digest's cron, as APScheduler reads a crontab line, in an IANA zone."""
    named = zone_named(zone)
    if named is None:
        raise ValueError(f"digest_timezone {zone[:80]!r} is not a zone of the tz database")
    where = ZoneInfo(named)
    try:
        return CronTrigger.from_crontab(crontab, timezone=where)
    except ValueError as error:
        raise ValueError(
            f"digest_cron {crontab!r} is not a crontab line (minute hour day month weekday, "
            f'such as "0 9 * * mon"): {error}'
        ) from None


def digest_firings(crontab: str, zone: str) -> Callable[[float, float], list[float]] | None:
    """When the weekly digest is due (``CLUSTERBOT_DIGEST_CRON`` in its zone), or None."""
    if crontab.strip().lower() == "off":
        return None
    return cron_firings(digest_trigger(crontab, zone))
