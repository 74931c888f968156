"""Bounded work for everything people ask. At most ``at_once`` commands and clicks run at a
time, the rest waiting their turn: a burst gets slower answers, never errors from a store or
a control plane asked more than it can take. Heavy commands (a cost report over months, a
queue of thousands of jobs) run at most ``heavy`` at a time and one per person; one that
cannot start within ``patience`` is refused in one line, so no one's report holds everyone
else's commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from handlers.errors import Blame, UserError

AT_ONCE = 16
HEAVY = 2
PATIENCE = 60.0


class Busy(UserError):
    """Asked while clusterbot does as much of it as it may: try again shortly."""

    blame = Blame.BUSY


class Gate:
    def __init__(
        self, at_once: int = AT_ONCE, heavy: int = HEAVY, patience: float = PATIENCE
    ) -> None:
        self.running = asyncio.Semaphore(at_once)
        self.heavy = asyncio.Semaphore(heavy)
        self.patience = patience
        self.heavy_for: set[str] = set()  # people whose heavy command runs now

    @asynccontextmanager
    async def enter(self, user: str, name: str, heavy: bool) -> AsyncIterator[None]:
        """Hold a place while the command runs; ``Busy`` when it cannot have one."""
        if not heavy:
            async with self.running:
                yield
            return
        if user in self.heavy_for:
            raise Busy(
                f"your last /cluster {name} (or another report) is still running: it answers first"
            )
        self.heavy_for.add(user)
        try:
            try:
                await asyncio.wait_for(self.heavy.acquire(), self.patience)
            except TimeoutError:
                raise Busy(
                    f"clusterbot is busy with other reports; ask /cluster {name} again in a minute"
                ) from None
            try:
                async with self.running:
                    yield
            finally:
                self.heavy.release()
        finally:
            self.heavy_for.discard(user)
