"""Cost reports made in a process of their own (``bot/report_process.py``), on the demo's
database with its week of spend: the same report and picture as made here, one child for
the reports asked together, a report that fails or takes too long said in one line, a
child that died or left while idle replaced at the next report, and none outliving its
service."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.charts import draw
from bot.demo_history import seed_week
from bot.report_process import ReportProcess
from handlers.spend.asked import Cost
from handlers.spend.ports import ReportError
from handlers.spend.report import SpendReport
from tests.support.demo_stack import Stack, demo_stack

WEEK = Cost(since=7 * 86400.0)
BY_POOL = Cost(cluster="train01", since=7 * 86400.0)


async def gone(reports: ReportProcess, child: Process, within: float = 60.0) -> int:
    """Wait until the service has let its child go and the child has ended: its exit code."""
    deadline = time.monotonic() + within
    while reports.child is not None and reports.child.process is child:
        assert time.monotonic() < deadline, "the child was not let go"
        await asyncio.sleep(0.05)
    return await asyncio.wait_for(child.wait(), within)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    """The demo's stack with its week of spend, its reports made in their process."""
    async with demo_stack(tmp_path, report_process=True) as running:
        await seed_week(running.service, time.time())
        yield running


def elsewhere(stack: Stack) -> ReportProcess:
    reports = stack.service.reports
    assert reports is not None, "a file database is shared with the child: reports go there"
    return reports


def spend_of(stack: Stack) -> SpendReport:
    report = stack.service.core.capabilities["spend"]
    assert isinstance(report, SpendReport)
    return report


async def test_a_report_made_in_its_process_is_the_one_made_here(stack: Stack) -> None:
    now = time.time()
    reports = elsewhere(stack)
    assert spend_of(stack).elsewhere is reports
    for command in (WEEK, BY_POOL):
        there = await reports.cost(command, True, now)
        here = await spend_of(stack).made(command, True, now)
        assert there.reply == here.reply and there.whole == here.whole
        assert there.chart is not None and there.chart == here.chart
        assert there.png == draw(here.chart)  # drawn there, byte for byte as here
    assert reports.child is not None and reports.child.process.pid != os.getpid()
    # its stdout goes to the log, its answers on a copy of it: no stray print in a frame
    fds = f"/proc/{reports.child.process.pid}/fd"
    assert os.readlink(f"{fds}/1") == os.readlink(f"{fds}/2")
    assert reports.started == 1  # one child made them all
    # a table alone (asked outside a conversation): no chart made or drawn
    table = await reports.cost(WEEK, False, now)
    assert table.chart is None and table.png is None
    assert table.reply == (await spend_of(stack).made(WEEK, False, now)).reply


async def test_reports_asked_together_are_made_at_once_by_one_child(stack: Stack) -> None:
    now = time.time()
    reports = elsewhere(stack)
    made = await asyncio.gather(*(reports.cost(c, True, now) for c in (WEEK, BY_POOL) * 2))
    assert [m.reply.summary for m in made[:2]] == [m.reply.summary for m in made[2:]]
    assert re.fullmatch(r"cost of all clusters, last 7d: ~?\$[0-9,]+", made[0].reply.summary)
    assert re.fullmatch(r"cost of train01, last 7d: ~?\$[0-9,]+", made[1].reply.summary)
    assert reports.started == 1


async def test_a_failed_or_slow_report_is_said_and_the_next_child_makes_the_next(
    stack: Stack, tmp_path: Path
) -> None:
    now = time.time()
    settings, policy = stack.service.settings, stack.service.policy
    slow = ReportProcess(settings, policy, timeout=0.001)  # no child starts that soon
    try:
        with pytest.raises(ReportError, match="took over 0 s and was stopped"):
            await slow.cost(WEEK, True, now)
        assert slow.child is None
        slow.timeout = 120.0
        assert (await slow.cost(WEEK, True, now)).png is not None
        assert slow.started == 2
    finally:
        await slow.close()
    # a database the child cannot read: its error, in one line, to the one who asked
    broken = settings.model_copy(
        update={"database_url": f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"}
    )
    unreadable = ReportProcess(broken, policy)
    try:
        with pytest.raises(ReportError, match=r"could not be made \(OperationalError: "):
            await unreadable.cost(WEEK, True, now)
        assert unreadable.child is not None  # the child lives on, for the next report
    finally:
        await unreadable.close()


async def test_a_child_that_died_or_left_while_idle_is_replaced(stack: Stack) -> None:
    now = time.time()
    reports = ReportProcess(stack.service.settings, stack.service.policy, idle=0.3)
    try:
        await reports.cost(WEEK, False, now)
        assert reports.child is not None
        first = reports.child.process
        assert await gone(reports, first) == 0  # asked nothing for 0.3 s: let go
        await reports.cost(WEEK, False, now)
        assert reports.child is not None
        second = reports.child.process
        second.send_signal(signal.SIGKILL)
        assert await gone(reports, second) == -signal.SIGKILL
        assert (await reports.cost(WEEK, True, now)).png is not None
        assert reports.started == 3
    finally:
        await reports.close()
    assert reports.child is None


async def killed_once_asked(reports: ReportProcess, but: Process | None = None) -> Process:
    """Kill the child (other than ``but``) once a question is out to it: it dies under it."""
    deadline = time.monotonic() + 60
    while True:
        child = reports.child
        if child is not None and child.waiting and child.process is not but:
            break
        assert time.monotonic() < deadline, "the report was never asked"
        await asyncio.sleep(0)
    child.process.send_signal(signal.SIGKILL)
    return child.process


async def test_a_report_whose_child_dies_under_it_is_asked_once_more_of_a_new_one(
    stack: Stack,
) -> None:
    now = time.time()
    reports = elsewhere(stack)
    await reports.cost(WEEK, False, now)
    started = reports.started
    asked = asyncio.ensure_future(reports.cost(WEEK, True, now))
    await killed_once_asked(reports)
    made = await asked  # made by the child started after the first died
    assert made.png is not None and reports.started == started + 1
    # a report that kills its child each time it is asked fails, in one line, after two
    asked = asyncio.ensure_future(reports.cost(WEEK, True, now))
    first = await killed_once_asked(reports)
    await killed_once_asked(reports, but=first)
    with pytest.raises(ReportError, match=r"its process stopped, exit code -9\); ask again"):
        await asked
    assert reports.started == started + 2  # the one made it, and one more


async def test_the_service_stops_its_child_and_makes_reports_here_where_it_must(
    stack: Stack, tmp_path: Path
) -> None:
    reports = elsewhere(stack)
    await reports.cost(WEEK, False, time.time())
    assert reports.child is not None
    child = reports.child.process
    await stack.service.stop()
    assert child.returncode == 0  # told to leave with the service, and left
    # the demo itself, one process: its reports are made on its own loop
    async with demo_stack(tmp_path / "demo") as demo:
        assert demo.service.reports is None and spend_of(demo).elsewhere is None
