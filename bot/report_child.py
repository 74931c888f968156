"""The cost reports' child process: reads the service's settings and policy from stdin,
builds the service's core on its own event loop, then makes each report it is asked
(``bot/report_process.py``) and writes it back, the reports asked together made at once.
It leaves at end-of-file on stdin; a close that hangs is ended by its alarm. It is started
only by ``ReportProcess``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import traceback

from bot.app import ClusterbotService
from bot.charts import HereCharts
from bot.logs import quiet_cut_connects
from bot.report_process import NICENESS, frame, read_frame
from bot.settings import Settings
from handlers.policy import Policy
from handlers.spend.asked import Cost
from handlers.spend.report import SpendReport

log = logging.getLogger(__name__)
STOP_GRACE = 10.0  # seconds the child has to close its connections once told to leave


async def _answer(
    report: SpendReport, question: tuple[int, Cost, bool, float], out: asyncio.StreamWriter
) -> None:
    ident, command, charted, until = question
    try:
        made = await report.made(command, charted, until, drawn=True)
        answer: tuple[int, bool, object] = (ident, True, made)
    except Exception as error:  # said to the one who asked, in one line; the whole here
        log.error("a cost report failed in its process:\n%s", traceback.format_exc())
        answer = (ident, False, f"{type(error).__name__}: {error}")
    out.write(frame(answer))
    await out.drain()


async def _serve(settings: Settings, policy: Policy, stdin: asyncio.StreamReader) -> None:
    loop = asyncio.get_running_loop()
    quiet_cut_connects(loop)
    # the answers go on a copy of stdout, and stdout itself to stderr: a stray print (a
    # library's) lands in the log, not inside a frame
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, answers)
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    service = ClusterbotService(settings, policy)
    report = service.core.capabilities["spend"]
    assert isinstance(report, SpendReport), "a report process where no ledger is kept"
    report.charts = HereCharts()  # drawn here: the service only shares them
    working: set[asyncio.Task[None]] = set()
    try:
        while True:
            try:
                question = await read_frame(stdin)
            except asyncio.IncompleteReadError:
                break  # the service let it go, or is gone
            task = loop.create_task(_answer(report, question, out))
            working.add(task)
            task.add_done_callback(working.discard)
    finally:
        # told to leave: what it still makes is nobody's now
        signal.setitimer(signal.ITIMER_REAL, STOP_GRACE)
        for task in list(working):
            task.cancel()
        await asyncio.gather(*working, return_exceptions=True)
        await service.close_connections()


async def _main() -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    settings, policy = await read_frame(stdin)
    from bot.logs import configure

    configure(settings.log_level, settings.secret_values())
    await _serve(settings, policy, stdin)


def main() -> int:
    from bot.memory import keep_large_blocks_apart

    keep_large_blocks_apart()
    # Below the service in the CPU's queue: when both want a core, a Slack request goes first.
    os.nice(NICENESS)
    try:
        asyncio.run(_main())
    except (asyncio.IncompleteReadError, KeyboardInterrupt):
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
