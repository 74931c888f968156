"""Long loops that keep the event loop free: a loop over thousands of clusters gives the loop
back every ``TURN`` of work, so that no ack waits behind it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

TURN = 0.002  # seconds of work on clusters between two turns of the event loop
T = TypeVar("T")


async def paced(items: Iterable[T]) -> AsyncIterator[T]:
    """``items`` one by one, giving the event loop back once ``TURN`` of work was done: a loop
    over thousands of clusters never holds up an ack by more than that."""
    since = time.perf_counter()
    for item in items:
        yield item
        if time.perf_counter() - since >= TURN:
            await asyncio.sleep(0)
            since = time.perf_counter()
