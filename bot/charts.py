"""The core's charts (``handlers.ports.Charts``) drawn with matplotlib's Agg backend, in a
child process (``python -m bot.charts``): matplotlib holds the interpreter's lock for most of
the half second a chart takes, so drawn in a thread it held the event loop up as long (acks of
300 ms while cost reports ran). One child serves the whole process, a chart at a time; it is
started at the first chart and leaves when none was asked for ``IDLE_SECONDS``, so a service
that never draws one never loads matplotlib (nor builds its font cache, which the image builds
ahead). A worker thread waits for its answer, without the lock."""

from __future__ import annotations

import asyncio
import atexit
import io
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from typing import Any

from handlers.spend.chart import Chart, Day
from handlers.spend.ports import ChartError

BUSY, IDLE, SAVED, UNWATCHED = "#4a78c2", "#e0a030", "#3c9a5f", "#e6e6e6"
# the groups' colours, in the table's order (a colour-blind-safe set), the rest in grey
GROUPS = ("#4a78c2", "#e0a030", "#7e57c2", "#d1495b", "#00a6a6", "#8d6e63", "#ef86b8", "#9e9e9e")
TIMEOUT = 60.0  # a chart takes about half a second; waiting for a turn included
IDLE_SECONDS = 300.0  # a child asked for no chart in this long leaves (about 90 MB freed)
PNG, FAILED, CHART = b"P", b"E", b"C"  # a frame's kind: an answer's two, and a question
NICENESS = 5  # added to the service's (as the reports' child's, ``bot/report_process.py``)
PIPE_BUF = 4096  # bytes a write to a pipe ready for writing takes without blocking (POSIX)


class AggCharts:
    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout

    async def png(self, chart: Chart) -> bytes:
        return await asyncio.to_thread(DRAWER.draw, self.question(chart), self.timeout)

    @staticmethod
    def question(chart: Chart) -> bytes:
        """The chart as the child reads it (``chart_from``)."""
        return json.dumps(asdict(chart)).encode()


class HereCharts:
    """Charts drawn in this process, in a worker thread: the reports' own process draws
    its reports' charts (``bot/report_child.py``), with no event loop of Slack's to hold."""

    async def png(self, chart: Chart) -> bytes:
        try:
            return await asyncio.to_thread(draw, chart)
        except Exception as error:
            raise ChartError(f"{type(error).__name__}: {error}") from error


class Drawer:
    """The drawing child, asked a chart as JSON and answering its PNG (or why not) in frames
    of a kind byte and a length. A child that answers nothing by the deadline is stopped
    (its late answer would be the next chart's) and the chart is a ``ChartError``; one that
    left while idle just as a chart was sent is started again for it."""

    def __init__(self, idle: float = IDLE_SECONDS) -> None:
        self.idle = idle
        self.started = 0  # children started in this process
        self.child: subprocess.Popen[bytes] | None = None
        self._turn = threading.Lock()

    def draw(self, question: bytes, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        if not self._turn.acquire(timeout=timeout):
            raise ChartError("the drawing process was busy for too long")
        try:
            kind, body = self._ask(question, deadline)
        finally:
            self._turn.release()
        if kind != PNG:
            raise ChartError(body.decode(errors="replace"))
        return body

    def close(self) -> None:
        """Let the child go (its input closed), and stop it if it does not."""
        child, self.child = self.child, None
        if child is None:
            return
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()

    def _ask(self, question: bytes, deadline: float) -> tuple[bytes, bytes]:
        for again in (False, True):
            child = self._running()
            assert child.stdin is not None and child.stdout is not None
            try:
                _write(child.stdin.fileno(), _frame(CHART, question), deadline)
                head = _read(child.stdout.fileno(), 5, deadline)
                return head[:1], _read(child.stdout.fileno(), int.from_bytes(head[1:]), deadline)
            except TimeoutError:
                child.kill()
                self.close()
                raise ChartError("the drawing process took too long") from None
            except (BrokenPipeError, EOFError):
                self.close()
                if child.returncode != 0 or again:  # it did not just leave while idle
                    raise ChartError(f"the drawing process stopped ({child.returncode})") from None
        raise AssertionError("unreachable")

    def _running(self) -> subprocess.Popen[bytes]:
        if self.child is not None and self.child.poll() is not None:
            self.close()
        if self.child is None:
            # started as the sweep's child is (``bot/sweep_process.py``): the package is
            # installed wherever the service runs
            self.child = subprocess.Popen(
                [sys.executable, "-m", "bot.charts", str(self.idle)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            self.started += 1
        return self.child


DRAWER = Drawer()
atexit.register(DRAWER.close)


def _frame(kind: bytes, body: bytes) -> bytes:
    return kind + len(body).to_bytes(4) + body


def _write(fd: int, data: bytes, deadline: float) -> None:
    """All of ``data`` to ``fd`` (a pipe: a chart's JSON may be longer than its buffer),
    ``TimeoutError`` past ``deadline`` (a child that reads nothing)."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise TimeoutError
        view = view[os.write(fd, view[:PIPE_BUF]) :]


def _read(fd: int, size: int, deadline: float = float("inf")) -> bytes:
    """``size`` bytes from ``fd``; ``EOFError`` when it closes first, ``TimeoutError`` past
    ``deadline``."""
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], min(left, 3600.0))[0]:
            raise TimeoutError
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def chart_from(document: dict[str, Any]) -> Chart:
    """The chart the service sent, from its JSON (``dataclasses.asdict``)."""
    days = tuple(Day(**{**d, "groups": tuple(d["groups"])}) for d in document["days"])
    return Chart(document["title"], days, document["note"], tuple(document["series"]))


def main(idle: float) -> None:
    """The child: a chart each frame read on its input, its PNG (or why not) written back;
    it leaves when its input closes or stays silent ``idle`` seconds."""
    # below the service in the CPU's queue, as the reports' child: a Slack request goes first
    os.nice(NICENESS)
    source, sink = sys.stdin.fileno(), sys.stdout.buffer
    while select.select([source], [], [], idle)[0]:
        try:
            head = _read(source, 5)
            document = json.loads(_read(source, int.from_bytes(head[1:])))
        except EOFError:
            return
        try:
            answer = _frame(PNG, draw(chart_from(document)))
        except Exception as error:  # a chart that cannot be drawn is said, not fatal
            answer = _frame(FAILED, f"{type(error).__name__}: {error}".encode())
        sink.write(answer)
        sink.flush()


def draw(chart: Chart) -> bytes:
    """Each day's (or, over a long period, each week's) spend stacked, busy and idle or by
    the table's groups, what was saved beside it, and the days not watched in grey."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    bars = chart.bars()  # 60 at most, whatever the period
    days = range(len(bars))
    width = 0.4
    left = [x - width / 2 for x in days]
    missed = [x for x, d in zip(days, bars, strict=True) if not d.watched]
    for at, x in enumerate(missed):
        axes.axvspan(
            x - 0.5, x + 0.5, color=UNWATCHED, zorder=0, label="not watched" if not at else None
        )
    if chart.series:
        bottom = [0.0] * len(bars)
        for index, name in enumerate(chart.series):
            heights = [d.groups[index] if d.groups else 0.0 for d in bars]
            colour = GROUPS[min(index, len(GROUPS) - 1)]
            axes.bar(left, heights, width, bottom=bottom, label=name[:30], color=colour)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    else:
        busy = [d.busy for d in bars]
        axes.bar(left, busy, width, label="spend, busy", color=BUSY)
        axes.bar(left, [d.idle for d in bars], width, bottom=busy, label="spend, idle", color=IDLE)
    axes.bar(
        [x + width / 2 for x in days],
        [d.saved for d in bars],
        width,
        label="saved",
        color=SAVED,
    )
    step = max(1, len(bars) // 10)
    axes.set_xticks(list(days)[::step], chart.labels(bars)[::step])
    axes.set_ylabel(f"US dollars a {chart.per}")
    axes.yaxis.set_major_formatter(lambda value, _: f"${value:,.0f}")
    axes.set_title(chart.title, loc="left")
    # above the bars, on the title's line, so it never hides a day
    axes.legend(loc="lower right", bbox_to_anchor=(1, 1), ncols=5, frameon=False, fontsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    figure.text(0.01, 0.01, chart.note, fontsize=8, color="#666666")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else IDLE_SECONDS)
