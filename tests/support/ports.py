"""Ports for the processes a test starts.

Each test worker (pytest-xdist runs several) takes ports from a range of its own, below
Linux's ephemeral range (32768 and up), so neither another worker nor an outgoing connection
can take a port between the moment it is chosen and the moment a process binds it. Test
runs side by side (their workers share names, so ranges) do not take each other's: a port
handed out is held by a lock file for as long as the test process lives, so that a port free
for a moment (a private database stopped for an outage, a stand-in restarting) stays its own.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import IO

SPAN = 2000
FIRST = 20000
_handed_out: set[int] = set()
_held: list[IO[bytes]] = []  # the lock files of the ports handed out, open while we live


def _hold(port: int) -> bool:
    """Whether the port's lock file is ours now (no other test process holds it)."""
    folder = Path(tempfile.gettempdir()) / "clusterbot-ports"
    try:
        folder.mkdir(exist_ok=True)
        lock = (folder / f"{port}.lock").open("wb")
    except PermissionError:  # another user's folder: nothing to share with its runs
        return True
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return False
    _held.append(lock)
    return True


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    low = FIRST + int(worker or 0) * SPAN
    for _ in range(500):
        port = random.randrange(low, low + SPAN)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        if not _hold(port):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{low + SPAN}")
