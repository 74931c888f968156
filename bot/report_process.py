"""Cost reports made in a process of their own, so that Slack's acks never wait behind them.

A report reads the spend ledger's sums (thousands of rows over months), tallies them by
group and by day and renders the table and the chart's series: tens of milliseconds of
Python a report, in steps of several, and on SQLite the database's thread holding the
interpreter's lock while it makes the rows. On the service's event loop every Slack request
that arrived meanwhile waited behind that work (p99 acks 5 to 9x a bare Bolt app's while
reports were asked back to back). In a child the operating system shares the CPU instead;
the service's loop only sends the question and reads back the answer, a few kilobytes.

The child (``python -m bot.report_child``) is started at the first report, gets the service's
settings and policy, pickled, on its stdin, and answers each question (a ``Cost``, whether it
is charted, and the end of its period, read from the service's clock) with the report made
(``Made``: the reply, the chart's numbers, the period's spend) as the service would have made
it; it makes the reports it is asked at once (the service's gate lets two run). Sharing the
chart stays with the service: the child posts nothing. The child leaves when its stdin closes:
when the service has asked nothing for ``IDLE_SECONDS`` (about 100 MB freed), when the
service stops, or when the service is gone, whatever ended it. A child that dies, or takes
longer than ``TIMEOUT`` (it is then killed), fails the reports it was making with a
``ReportError``, said in one line; the next report starts another. A report whose child died
under it (killed for memory, say) is asked once more of a new child: it only reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import pickle
import sys
from dataclasses import dataclass, field
from typing import Any

from bot.settings import Settings
from handlers.policy import Policy
from handlers.spend.asked import Cost
from handlers.spend.ports import ReportError
from handlers.spend.report import Made

log = logging.getLogger(__name__)
LENGTH = 8  # bytes of a frame's length, before the frame
IDLE_SECONDS = 300.0  # a child asked for no report in this long leaves
TIMEOUT = 120.0  # seconds a report may take in the child (a year's, by pool: a few)
NICENESS = 5  # added to the service's: a report waits its turn behind an ack, not a sweep


def frame(value: object) -> bytes:
    """``value`` pickled, after its length."""
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(LENGTH, "big") + body


async def read_frame(stream: asyncio.StreamReader) -> Any:
    """The next frame's value; ``asyncio.IncompleteReadError`` at end-of-file."""
    head = await stream.readexactly(LENGTH)
    return pickle.loads(await stream.readexactly(int.from_bytes(head, "big")))


@dataclass
class Child:
    """A child process, the questions it was asked and not yet answered, and its reader."""

    process: asyncio.subprocess.Process
    waiting: dict[int, asyncio.Future[tuple[bool | None, object]]] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None


class ReportProcess:
    """``handlers.spend.report.ReportsElsewhere``: the reports made in one child process."""

    def __init__(
        self,
        settings: Settings,
        policy: Policy,
        *,
        idle: float = IDLE_SECONDS,
        timeout: float = TIMEOUT,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.idle = idle
        self.timeout = timeout
        self.started = 0  # children started (the tests read it)
        self.child: Child | None = None
        self._ids = itertools.count()
        self._starting = asyncio.Lock()
        self._leave: asyncio.TimerHandle | None = None
        self.closing = False  # the service is stopping: no child is started again

    async def cost(self, command: Cost, charted: bool, until: float) -> Made:
        ok, value = await self._ask(command, charted, until)
        if ok is None and not self.closing:  # its process ended under it: one more, anew
            log.warning("a cost report's process stopped (%s); a new one is asked", value)
            ok, value = await self._ask(command, charted, until)
        if not ok:
            raise ReportError(f"the cost report could not be made ({value}); ask again")
        assert isinstance(value, Made)
        return value

    async def _ask(self, command: Cost, charted: bool, until: float) -> tuple[bool | None, object]:
        """The child's answer: whether the report was made, and it or why not; None where
        the child ended before it answered."""
        child = await self._running()
        ident = next(self._ids)
        answer: asyncio.Future[tuple[bool | None, object]] = (
            asyncio.get_running_loop().create_future()
        )
        child.waiting[ident] = answer
        if self._leave is not None:
            self._leave.cancel()
            self._leave = None
        stdin = child.process.stdin
        assert stdin is not None
        try:
            stdin.write(frame((ident, command, charted, until)))
            await stdin.drain()
            return await asyncio.wait_for(asyncio.shield(answer), self.timeout)
        except (BrokenPipeError, ConnectionResetError):
            return await answer  # the reader fails it once the child's end is read
        except TimeoutError:
            log.warning("a cost report took over %.0f s in its process: the process is ended",
                        self.timeout)  # fmt: skip
            await self._end(child, kill=True)
            raise ReportError(
                f"the cost report took over {self.timeout:.0f} s and was stopped; "
                "ask for a shorter period or one cluster"
            ) from None
        finally:
            child.waiting.pop(ident, None)
            if self.child is child and not child.waiting:
                self._leave = asyncio.get_running_loop().call_later(self.idle, self._idle, child)

    async def close(self) -> None:
        """Let the child go (its stdin closed), and end it if it does not."""
        self.closing = True
        if self.child is not None:
            await self._end(self.child, kill=False)

    async def _running(self) -> Child:
        async with self._starting:
            child = self.child
            if child is not None and child.process.returncode is None:
                return child
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.report_child",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            self.started += 1
            child = self.child = Child(process)
            assert process.stdin is not None
            process.stdin.write(frame((self.settings, self.policy)))
            child.reader = asyncio.get_running_loop().create_task(self._answers(child))
            return child

    async def _answers(self, child: Child) -> None:
        """Each answer to the question it answers; at the child's end, the questions left
        unanswered fail."""
        stdout = child.process.stdout
        assert stdout is not None
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionResetError):
            while True:
                ident, ok, value = await read_frame(stdout)
                answer = child.waiting.get(ident)
                if answer is not None and not answer.done():
                    answer.set_result((ok, value))
        code = await child.process.wait()
        if self.child is child:
            self.child = None
        for answer in child.waiting.values():
            if not answer.done():
                answer.set_result((None, f"its process stopped, exit code {code}"))

    def _idle(self, child: Child) -> None:
        if self.child is child and not child.waiting:
            self._leave = None
            asyncio.get_running_loop().create_task(self._end(child, kill=False))

    async def _end(self, child: Child, *, kill: bool) -> None:
        if self.child is child:
            self.child = None
        process = child.process
        if process.stdin is not None:
            process.stdin.close()
        if kill and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if child.reader is not None:
            await child.reader
