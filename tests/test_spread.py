"""Calls made several at a time start spread over their round trip: the replies of a batch
that went out together come back together and are handled one after another on both sides,
and the next batch goes out together again, each round trip longer by the batch's handling."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from handlers.pacing import Spread

TRIP = 0.05  # seconds each call takes


async def test_calls_after_the_first_round_trip_start_spread_over_it() -> None:
    spread = Spread(4)
    starts: list[float] = []

    async def call(n: int) -> int:
        starts.append(time.perf_counter())
        await asyncio.sleep(TRIP)
        return n

    async def worker(first: int) -> list[int]:
        return [await spread.call(call, first + k) for k in range(5)]

    answers = await asyncio.gather(*(worker(10 * w) for w in range(4)))
    assert answers == [[10 * w + k for k in range(5)] for w in range(4)]
    assert len(starts) == 20
    # nothing measured yet: the first four go at once
    assert starts[3] - starts[0] < TRIP
    # then every start is given its share of a round trip (never shorter than TRIP) after
    # the one before, where four calls ending together would start again together (12 of
    # the 15 gaps next to nothing); a wake-up late by half a share may shorten one gap
    gap = Spread.SHARE * TRIP / 4
    gaps = [b - a for a, b in itertools.pairwise(starts[4:])]
    assert len([g for g in gaps if g < gap / 2]) < 3, gaps
    assert starts[-1] - starts[4] >= 14 * gap
    assert spread.round_trip >= TRIP


async def test_one_call_held_up_moves_the_round_trip_at_most_to_twice_what_it_was() -> None:
    spread = Spread(8)

    async def call(seconds: float) -> None:
        await asyncio.sleep(seconds)

    await spread.call(call, TRIP)
    before = spread.round_trip
    await spread.call(call, 10 * TRIP)  # a call held up: the starts must not slow for it
    assert before <= spread.round_trip <= before * 1.1 + 1e-6


async def test_a_call_that_fails_is_measured_and_its_error_raised() -> None:
    spread = Spread(2)

    async def call() -> None:
        await asyncio.sleep(TRIP)
        raise LookupError("unreadable")

    with pytest.raises(LookupError, match="unreadable"):
        await spread.call(call)
    assert spread.round_trip >= TRIP


async def test_a_first_call_that_took_long_spreads_the_next_starts_by_at_most_the_cap() -> None:
    spread = Spread(4)
    spread.round_trip = 30.0  # as a first call that waited out its timeout leaves it
    starts: list[float] = []

    async def call() -> None:
        starts.append(time.perf_counter())

    began = time.perf_counter()
    await asyncio.gather(*(spread.call(call) for _ in range(3)))
    # 30 s x 0.75 / 4 would be 5.6 s between starts
    assert starts[-1] - began < 10 * Spread.GAP_AT_MOST
    assert starts[-1] - starts[0] >= 2 * Spread.GAP_AT_MOST * 0.95
