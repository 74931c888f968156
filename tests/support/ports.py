"""Ports for the processes a test starts.

Each test worker (pytest-xdist runs several) takes ports from a range of its own, below
Linux's ephemeral range (32768 and up), so neither another worker nor an outgoing connection
can take a port between the moment it is chosen and the moment a process binds it.
"""

from __future__ import annotations

import os
import random
import socket

SPAN = 2000
FIRST = 20000
_handed_out: set[int] = set()


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
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{low + SPAN}")
