"""Staying inside Slack's rate tiers instead of running into them.

Web API limits are per method and workspace (https://api.slack.com/apis/rate-limits):
``chat.update`` is Tier 3 (50+ a minute), ``chat.postEphemeral`` Tier 4 (100+), and
``chat.postMessage`` about one message a second per channel, with short bursts. The bot keeps
a sliding one-minute window per method (per channel for posts) and spends it in order of
importance: a message that must arrive (a card, a final state) waits for room and is never
dropped; a progress edit is sent only when there is room, and otherwise kept aside, where a
newer edit of the same message replaces it, and sent when room comes back and nothing more
important is waiting. A 429 that still comes back (another app sharing the workspace's
budget) pauses the method for its ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import time
from collections.abc import Awaitable, Callable

# Calls a minute each method may spend; a little under the tier, for other traffic.
PER_MINUTE = {
    "chat.update": 45,  # Tier 3: 50+
    "chat.postEphemeral": 90,  # Tier 4: 100+
    "chat.postMessage": 55,  # per channel: about 1 a second, short bursts allowed
    "conversations.history": 45,  # Tier 3: 50+ (a look after a crash, rarely)
    "conversations.replies": 45,  # Tier 3: 50+
}
WINDOW = 60.0


class Budget:
    """A sliding one-minute window per key (``method`` or ``method channel``).

    Slack counts a call when it arrives, which is after it was allowed here and before its
    answer came back. So a call holds its place in the window from the moment it is allowed,
    and once answered it is counted at the time of the answer: the window here always holds
    at least the calls Slack's window holds, even when sends are held up on the way."""

    def __init__(
        self,
        per_minute: dict[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = dict(PER_MINUTE if per_minute is None else per_minute)
        self.clock = clock
        self.spent: dict[str, list[float]] = {}  # each key's times, in order
        self.paused_until: dict[str, float] = {}

    def limit(self, key: str) -> int | None:
        """Calls a minute that `key` (a method, or a method and a channel) may make."""
        return self.per_minute.get(key.split(" ", 1)[0])

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may be spent (0: now)."""
        now = self.clock()
        pause = self.paused_until.get(key.split(" ", 1)[0], 0.0) - now
        limit = self.limit(key)
        if limit is None:
            return max(0.0, pause)
        window = self.spent.setdefault(key, [])
        gone = bisect.bisect_right(window, now - WINDOW)
        if gone:
            del window[:gone]
        full = WINDOW - (now - window[len(window) - limit]) if len(window) >= limit else 0.0
        return max(0.0, pause, full)

    def spend(self, key: str) -> float:
        """Take a place in ``key``'s window now; returns it, for ``answered``."""
        now = self.clock()
        if self.limit(key) is not None:
            bisect.insort(self.spent.setdefault(key, []), now)
        return now

    def answered(self, key: str, place: float) -> None:
        """The call taken at ``place`` was answered: count it from now on instead."""
        window = self.spent.get(key)
        if not window:
            return
        at = bisect.bisect_left(window, place)
        if at < len(window) and window[at] == place:
            del window[at]
            bisect.insort(window, self.clock())

    def pause(self, method: str, seconds: float) -> None:
        """Slack answered 429 with ``Retry-After``: nothing more of ``method`` until then."""
        self.paused_until[method] = max(self.paused_until.get(method, 0.0), self.clock() + seconds)


Send = Callable[[], Awaitable[None]]
PATIENCE = 2.0  # seconds an owed item's call waits for room before it is handed back


class Crowded(Exception):
    """No room for this call for a while: ``seconds`` until its turn. Raised for an owed
    item's call (``patient=False``), which the engine tries again then instead of holding one
    of its places while it waits."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no room for {seconds:.1f} s")
        self.seconds = seconds


class Pacer:
    """Sends within a ``Budget``: ``must`` waits for room; ``maybe`` sends when there is room
    and otherwise keeps the latest version per message for later."""

    def __init__(
        self,
        budget: Budget,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.budget = budget
        self.sleep = sleep
        self.waiting = 0  # sends that must happen, waiting for room
        self.aside: dict[str, tuple[str, Send]] = {}  # message -> (key, its latest send)
        self.locks: dict[str, asyncio.Lock] = {}  # one send at a time per message
        # message -> the last send that must arrive, numbered, and when: an edit kept aside
        # before it is stale once it has gone
        self.superseded: dict[str, int] = {}
        self.superseded_at: dict[str, float] = {}
        self._generations = itertools.count(1)
        self._flusher: asyncio.Task[None] | None = None
        # key -> the latest turn given to a call handed back: each gets a turn of its own
        self.turns: dict[str, float] = {}

    def _forget_old(self) -> None:
        """Drop what is remembered of messages nothing has touched for an hour."""
        now = self.budget.clock()
        if len(self.superseded_at) < 1000:
            return
        for message, at in list(self.superseded_at.items()):
            lock = self.locks.get(message)
            if now - at > 3600 and message not in self.aside and not (lock and lock.locked()):
                self.superseded.pop(message, None)
                self.superseded_at.pop(message, None)
                self.locks.pop(message, None)

    def _lock(self, message: str) -> asyncio.Lock:
        return self.locks.setdefault(message, asyncio.Lock())

    def _turn(self, key: str, delay: float) -> float:
        """Seconds until a call handed back may come again: after the window has room, and
        after every call handed back before it, spaced as the limit spaces calls, so that a
        crowd comes back one by one in the order it was turned away."""
        now, limit = self.budget.clock(), self.budget.limit(key) or 60
        at = max(now + delay, self.turns.get(key, 0.0) + WINDOW / limit)
        self.turns[key] = at
        if len(self.turns) > 1000:
            self.turns = {k: t for k, t in self.turns.items() if t > now}
        return at - now

    def _crowd_waits(self, key: str) -> bool:
        """Whether calls handed back (owed, each with its turn) are still to come back for
        ``key``: until the last turn given has passed, the room is theirs, not a progress
        edit's, which would otherwise take every room that frees and hold them back."""
        return self.budget.clock() < self.turns.get(key, 0.0) + PATIENCE

    def _room_now(self, key: str) -> bool:
        """Room for ``key`` now, and nothing more important waits for it (a send that must
        arrive, or calls handed back with their turns to come)."""
        return self.waiting == 0 and not self._crowd_waits(key) and self.budget.wait(key) == 0

    async def must(
        self, key: str, send: Send, message: str | None = None, *, patient: bool = True
    ) -> None:
        """Send as soon as the budget allows; a progress edit kept aside for the same message
        is dropped, since this one supersedes it. Not ``patient`` (an owed item's call, which
        the engine tries again): ``Crowded`` when there is no room within ``PATIENCE``."""
        if message is not None:
            self.aside.pop(message, None)
            self.superseded[message] = next(self._generations)
            self.superseded_at[message] = self.budget.clock()
            self._forget_old()
        self.waiting += 1
        waited = 0.0
        try:
            while (delay := self.budget.wait(key)) > 0:
                if not patient and waited + delay > PATIENCE:
                    # others took the room it waited for: its turn, not a longer wait
                    raise Crowded(self._turn(key, delay))
                await self.sleep(delay)
                waited += delay
            place = self.budget.spend(key)
        finally:
            self.waiting -= 1
        try:
            if message is None:
                await send()
                return
            async with self._lock(message):  # after a progress edit already on its way
                await send()
        finally:
            self.budget.answered(key, place)

    async def now(self, key: str, send: Send) -> None:
        """Send at once if there is room and nothing more important waits (a progress post,
        which its caller tries again later); else ``Crowded``, with the wait for room."""
        if not self._room_now(key):
            delay = self.budget.wait(key)
            raise Crowded(max(delay, WINDOW / (self.budget.limit(key) or 60)))
        place = self.budget.spend(key)
        try:
            await send()
        finally:
            self.budget.answered(key, place)

    async def maybe(self, key: str, message: str, send: Send) -> bool:
        """Send now if there is room and nothing more important waits; else keep it aside
        (replacing an older one for the same message). True when sent now."""
        if self._room_now(key) and message not in self.aside:
            place = self.budget.spend(key)
            generation = self.superseded.get(message)
            try:
                async with self._lock(message):
                    if self.superseded.get(message) == generation:
                        await send()
            finally:
                self.budget.answered(key, place)
            return True
        self.aside[message] = (key, send)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        return False

    async def _flush(self) -> None:
        """Send what was kept aside, oldest message first, when there is room."""
        while self.aside:
            message, (key, send) = next(iter(self.aside.items()))
            delay = self.budget.wait(key)
            if delay > 0 or self.waiting or self._crowd_waits(key):
                await self.sleep(max(delay, 0.05))
                continue
            del self.aside[message]
            generation = self.superseded.get(message)
            place = self.budget.spend(key)
            try:
                async with self._lock(message):
                    if self.superseded.get(message) != generation:
                        continue  # a message that must arrive was sent meanwhile: stale
                    await send()
            except Exception:  # a progress edit that fails is superseded by the next one
                continue
            finally:
                self.budget.answered(key, place)

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
