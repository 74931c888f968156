"""Periodic work: one run of a job at a time, and a run that is still going makes the next
ones wait quietly (no warning a second while a big sweep holds a tick up)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

import pytest

from bot.jobs import PeriodicJobs


async def until(check: Callable[[], bool], limit: float = 10.0) -> None:
    """Look at lasting state every few milliseconds until ``check`` holds."""
    async with asyncio.timeout(limit):
        while not check():  # noqa: ASYNC110 (the scheduler's state has no event to await)
            await asyncio.sleep(0.01)


async def test_a_slow_run_folds_the_next_ones_in_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = PeriodicJobs()
    started = 0
    release, first_run, second_run = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        nonlocal started
        started += 1
        (first_run if started == 1 else second_run).set()
        await release.wait()

    def ten_runs_due_since(first: datetime) -> Callable[[], bool]:
        return lambda: (jobs.scheduler.get_job("slow").next_run_time - first).total_seconds() > 0.1

    caplog.set_level(logging.DEBUG)
    jobs.add("slow", slow, 0.01)
    jobs.start()
    try:
        await asyncio.wait_for(first_run.wait(), 10)
        # the scheduler's own state moving on: ten more runs have come due
        await until(ten_runs_due_since(jobs.scheduler.get_job("slow").next_run_time))
        assert started == 1  # the runs due meanwhile did not start a second one
        release.set()
        await asyncio.wait_for(second_run.wait(), 10)
    finally:
        release.set()
        await jobs.stop(1.0)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []
    assert any("still running" in r.getMessage() for r in caplog.records)
