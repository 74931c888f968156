"""The idle sweep's child process: reads its settings from stdin, builds the service's core
on its own event loop, sweeps once as the replica, and writes the summary as one JSON line.
It is started only by ``bot/sweep_process.py``'s ``SweepProcess``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import pickle
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bot.app import ClusterbotService
from bot.logs import quiet_cut_connects
from bot.settings import Settings
from bot.sweep_process import LENGTH, NICENESS, SweepSummary
from handlers.policy import Policy


def _read_payload(fd: int = 0) -> tuple[Settings, Policy, str, bool, float]:
    data = b""
    while len(data) < LENGTH or len(data) < LENGTH + int.from_bytes(data[:LENGTH], "big"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise SystemExit("clusterbot sweep process: started without its settings")
        data += chunk
    settings, policy, owner, force, grace = pickle.loads(data[LENGTH:])
    return settings, policy, owner, force, grace


def _stopper(this: asyncio.Task[str], grace: float) -> Callable[[], None]:
    """Stops the sweep once, however often it is asked: a second cancellation would land
    in the first one's cleanup (the lease given back, connections closed half-way). A stop
    that does not end within ``grace`` seconds (a database that does not answer, a close
    that never returns) is ended by SIGALRM, whose default action ends the process; and
    after the first SIGTERM, another ends it at once."""
    loop = asyncio.get_running_loop()
    asked = False

    def stop() -> None:
        nonlocal asked
        if asked:
            return
        asked = True
        this.cancel()
        signal.setitimer(signal.ITIMER_REAL, grace)
        loop.remove_signal_handler(signal.SIGTERM)

    return stop


async def _sweep_here(
    settings: Settings, policy: Policy, owner: str, force: bool, grace: float
) -> str:
    loop = asyncio.get_running_loop()
    quiet_cut_connects(loop)
    this = asyncio.current_task()
    assert this is not None
    stop = _stopper(this, grace)
    # end-of-file on stdin: the service is gone; SIGTERM: the service is stopping
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    watch = loop.create_task(stdin.read())

    def gone(_: asyncio.Task[bytes]) -> None:
        stop()

    watch.add_done_callback(gone)
    loop.add_signal_handler(signal.SIGTERM, stop)
    service = ClusterbotService(settings, policy, owner=owner)
    service.open_http()
    gc.freeze()  # the service, built once, is not walked by each of the collector's passes
    try:
        report = await service.core.sweeper.sweep(force=force)
    finally:
        watch.remove_done_callback(gone)
        watch.cancel()
        await service.close_connections()
    summary: dict[str, Any] | None = asdict(SweepSummary.of(report)) if report else None
    return json.dumps({"summary": summary})


def main() -> int:
    from bot.logs import configure
    from bot.memory import collect_rarely, keep_large_blocks_apart

    keep_large_blocks_apart()
    collect_rarely()
    # Below the service in the CPU's queue: when both want a core, a Slack request goes first.
    os.nice(NICENESS)
    settings, policy, owner, force, grace = _read_payload()
    configure(settings.log_level, settings.secret_values())
    try:
        line = asyncio.run(_sweep_here(settings, policy, owner, force, grace))
    except (asyncio.CancelledError, KeyboardInterrupt):
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)  # stopped in time: no deadline left armed
    with contextlib.suppress(BrokenPipeError):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
