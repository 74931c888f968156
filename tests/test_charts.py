"""The charts are drawn in a child process of their own (``bot/charts.py``): the same picture
as drawn here, one child for the process, a chart it cannot draw said, a child that stopped,
hung or left while idle replaced, and the event loop never waiting on matplotlib."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bot.charts import DRAWER, AggCharts, Drawer, draw
from handlers.spend.chart import Chart, Day
from handlers.spend.ports import ChartError

DAY = 86400.0
CHART = Chart(
    "all clusters, last 30d",
    tuple(
        Day(i * DAY, 10.0 + i, 3.0, 1.5, watched=i % 7 != 3, groups=(4.0 + i, 6.0))
        for i in range(30)
    ),
    "estimates at list prices",
    ("c1 / gpu", "c2 / gpu"),
)


def gone(child: subprocess.Popen[bytes], within: float = 60.0) -> int:
    """The child's exit code, once it has left (a failure if it has not within ``within``)."""
    return child.wait(timeout=within)


async def test_a_chart_is_drawn_in_a_child_process_as_it_would_be_here() -> None:
    charts = AggCharts()
    first = await charts.png(CHART)
    assert DRAWER.child is not None and DRAWER.child.pid != os.getpid()
    child, started = DRAWER.child, DRAWER.started
    assert first == draw(CHART)  # the same picture, byte for byte
    again = await charts.png(Chart(CHART.title, CHART.days[:5], CHART.note, CHART.series))
    assert again.startswith(b"\x89PNG") and again != first
    assert (DRAWER.child, DRAWER.started) == (child, started)  # one child draws them all


async def test_a_chart_that_cannot_be_drawn_says_why_and_the_child_draws_the_next() -> None:
    # a day with one group's spend where the chart names two series
    broken = Chart("t", (Day(0.0, 1.0, 0.5, 0.0, groups=(1.0,)),), "n", ("a", "b"))
    with pytest.raises(ChartError, match="IndexError"):
        await AggCharts().png(broken)
    child = DRAWER.child
    assert (await AggCharts().png(CHART)).startswith(b"\x89PNG")
    assert DRAWER.child is child


async def test_a_child_that_stopped_or_hangs_is_replaced_at_the_next_chart() -> None:
    charts = AggCharts()
    await charts.png(CHART)
    assert DRAWER.child is not None
    DRAWER.child.kill()
    gone(DRAWER.child)
    started = DRAWER.started
    assert (await charts.png(CHART)) == draw(CHART)
    assert DRAWER.started == started + 1
    hung = DRAWER.child
    assert hung is not None
    with pytest.raises(ChartError, match="took too long"):
        await AggCharts(timeout=0.001).png(CHART)  # no chart is drawn in a millisecond
    assert gone(hung) != 0  # stopped: its late answer would have been the next chart's
    assert (await charts.png(CHART)) == draw(CHART)
    assert DRAWER.started == started + 2


def test_an_idle_child_leaves_and_one_leaving_as_a_chart_is_sent_is_started_again() -> None:
    drawer = Drawer(idle=0.2)
    question = AggCharts.question(CHART)
    try:
        assert drawer.draw(question, 60.0) == draw(CHART)
        assert drawer.child is not None
        assert gone(drawer.child) == 0  # left on its own, asked nothing for 0.2 s
        assert drawer.draw(question, 60.0) == draw(CHART)
        assert drawer.started == 2
        # a child that takes the chart's frame and leaves (exit code 0) without answering,
        # as an idle child does when the chart arrives as it goes
        drawer.close()
        leaving = [sys.executable, "-c", "import time; time.sleep(0.5)"]
        drawer.child = subprocess.Popen(leaving, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        began = time.monotonic()
        assert drawer.draw(question, 60.0) == draw(CHART)
        assert drawer.started == 3 and time.monotonic() - began >= 0.5
    finally:
        drawer.close()


def test_a_child_that_reads_nothing_is_stopped_at_the_deadline() -> None:
    """A chart longer than the pipe holds, to a child that never reads it: the write ends at
    the deadline too, and the child is stopped."""
    drawer = Drawer()
    deaf = [sys.executable, "-c", "import time; time.sleep(120)"]
    drawer.child = subprocess.Popen(deaf, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child = drawer.child
    long = Chart(CHART.title, CHART.days * 40, "n" * 200_000, CHART.series)
    try:
        began = time.monotonic()
        with pytest.raises(ChartError, match="took too long"):
            drawer.draw(AggCharts.question(long), 1.0)
        assert time.monotonic() - began < 30
        assert gone(child) != 0 and drawer.child is None
    finally:
        drawer.close()
