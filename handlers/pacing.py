"""Long loops that keep the event loop free (a loop over thousands of clusters gives the loop
back every ``TURN`` of work, so that no ack waits behind it), reads spread over their round
trip, and changes paced to the control plane's write quota."""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right, insort
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import ParamSpec, TypeVar

TURN = 0.002  # seconds of work on clusters between two turns of the event loop
T = TypeVar("T")
P = ParamSpec("P")


async def paced(items: Iterable[T]) -> AsyncIterator[T]:
    """``items`` one by one, giving the event loop back once ``TURN`` of work was done: a loop
    over thousands of clusters never holds up an ack by more than that."""
    since = time.perf_counter()
    for item in items:
        yield item
        if time.perf_counter() - since >= TURN:
            await asyncio.sleep(0)
            since = time.perf_counter()


class Spread:
    """Calls made ``at_once`` at a time whose starts are spread over one round trip instead
    of going out together.

    Calls that go out together come back together: the server, then the caller, handle the
    replies one after another, and the next calls go out together again, so that every
    round trip grows by the time a whole batch takes to handle (32 calls at once at half a
    millisecond each on either side: 16 ms on 50). A start waits until ``SHARE`` of the
    round trip, over ``at_once``, has passed since the one before it, and never longer than
    ``GAP_AT_MOST`` (a first call that took seconds to fail): the starts never go slower
    than the calls at once allow, and the replies come back one at a time."""

    SHARE = 0.75
    GAP_AT_MOST = 0.05  # seconds: what 32 calls of 2 s each would be spread by

    def __init__(self, at_once: int) -> None:
        self.at_once = max(1, at_once)
        self.round_trip = 0.0  # seconds: an average of the last calls', with outliers cut
        self.next_start = 0.0

    async def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` awaited once its turn to start has come."""
        now = time.perf_counter()
        at = max(now, self.next_start)
        self.next_start = at + min(self.GAP_AT_MOST, self.SHARE * self.round_trip / self.at_once)
        if at > now:
            await asyncio.sleep(at - now)
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            took = time.perf_counter() - started
            if not self.round_trip:
                self.round_trip = took
            else:  # one call held up for seconds moves it at most to twice what it was
                self.round_trip += 0.1 * (min(took, 2 * self.round_trip) - self.round_trip)


class WriteQuota:
    """Changes sent to the control plane at most ``per_minute`` a minute per project and
    region, as Google's request quotas count them (cloud.google.com/vertex-ai/docs/quotas:
    requests per minute, per project and supported region; past them a call is refused with
    429 RESOURCE_EXHAUSTED).

    Each change takes a slot in a sliding minute: ``slot`` gives the moment its call may go,
    the next one free, and keeps it for that change, so that a thousand changes due at once
    are spread over the minutes the quota allows, in the order they asked, instead of all
    coming back at the same moment. A change a person asked for (``ahead``) goes at once and
    is counted: what waits is the mass of a schedule's night, never a person's click."""

    WINDOW = 60.0

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = max(1, per_minute)
        self.clock = clock
        self.slots: dict[str, list[float]] = {}  # scope -> slots given, in order
        self.kept: dict[str, float] = {}  # a change's key -> its slot
        self.went: dict[str, deque[float]] = {}  # scope -> when its calls were answered
        self.flying: dict[str, set[str]] = {}  # scope -> the changes whose call is on its way

    def slot(self, key: str, scope: str, *, ahead: bool = False) -> float:
        """When the change ``key`` may send its call in ``scope`` (``project/region``): now or
        later; the slot is the change's from now on (``done`` lets it go)."""
        if key in self.kept:
            return self.kept[key]
        now = self.clock()
        if len(self.kept) > 4 * self.per_minute:  # slots of changes taken up elsewhere
            for stale in [k for k, at in self.kept.items() if at < now - self.WINDOW]:
                del self.kept[stale]
        given = self.slots.setdefault(scope, [])
        del given[: bisect_right(given, now - self.WINDOW)]
        if ahead or len(given) < self.per_minute:
            at = now
        else:
            at = max(now, given[-self.per_minute] + self.WINDOW)
        insort(given, at)
        self.kept[key] = at
        return at

    def done(self, key: str) -> None:
        """The change's call went (or will not): its slot stays counted, not kept."""
        self.kept.pop(key, None)

    def go(self, key: str, scope: str, *, ahead: bool = False) -> float:
        """When the change ``key``, about to send its call, may send it: now (and it is on its
        way until ``answered``) or later. The control plane counts a call when it arrives,
        which is after its slot by however long the re-read and the records before it took:
        a change whose slot came early must not go before the minute allows it. The calls
        of the last minute are counted at their answer (after their arrival), and every
        call still on its way as now, so that this count never falls below the server's."""
        now = self.clock()
        went = self.went.setdefault(scope, deque())
        while went and went[0] + self.WINDOW <= now:  # as the time given below is reckoned
            went.popleft()
        flying = self.flying.setdefault(scope, set())
        over = len(went) + len(flying) - self.per_minute
        if ahead or over < 0 or key in flying:
            flying.add(key)
            return now
        # when enough answered calls have left the minute (one on its way still counts)
        return went[min(over, len(went) - 1)] + self.WINDOW if went else now + 1.0

    def answered(self, key: str, scope: str) -> bool:
        """The change's call came back: counted at this moment; whether it was on its way."""
        flying = self.flying.get(scope)
        if flying is None or key not in flying:
            return False
        flying.discard(key)
        self.went.setdefault(scope, deque()).append(self.clock())
        return True
