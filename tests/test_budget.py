"""Slack's rate tiers kept by the bot: a window per method, messages that must arrive wait
for room, progress edits are coalesced and never arrive after a final edit."""

from __future__ import annotations

import asyncio

import pytest

from bot.slack.budget import Budget, Crowded, Pacer
from tests.conftest import ManualClock


def pacer_on(clock: ManualClock, per_minute: dict[str, int]) -> Pacer:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return Pacer(Budget(per_minute, clock=clock), sleep=sleep)


async def test_a_window_per_method_and_a_pause_after_429(clock: ManualClock) -> None:
    budget = Budget({"chat.update": 3}, clock=clock)
    for _ in range(3):
        assert budget.wait("chat.update") == 0
        budget.spend("chat.update")
    assert budget.wait("chat.update") == 60.0  # the oldest leaves the window in a minute
    clock.advance(60)
    assert budget.wait("chat.update") == 0
    assert budget.wait("chat.postMessage C1") == 0  # not limited here: no entry
    budget.pause("chat.update", 7)
    assert budget.wait("chat.update") == 7


async def test_sends_that_must_arrive_wait_and_all_arrive(clock: ManualClock) -> None:
    pacer = pacer_on(clock, {"chat.update": 2})
    sent: list[tuple[int, float]] = []

    def sender(n: int):  # type: ignore[no-untyped-def]
        async def send() -> None:
            sent.append((n, clock.now))

        return send

    for n in range(5):
        await pacer.must("chat.update", sender(n), f"C m{n}")
    assert [n for n, _ in sent] == [0, 1, 2, 3, 4]
    # two a minute: the 3rd and 4th a minute later, the 5th two minutes later
    assert [at - sent[0][1] for _, at in sent] == [0, 0, 60, 60, 120]


async def test_progress_edits_are_coalesced_and_never_overwrite_the_end(
    clock: ManualClock,
) -> None:
    pacer = pacer_on(clock, {"chat.update": 1})
    shown: dict[str, str] = {}

    def edit(message: str, text: str):  # type: ignore[no-untyped-def]
        async def send() -> None:
            shown[message] = text

        return send

    assert await pacer.maybe("chat.update", "m1", edit("m1", "10%"))  # room: sent now
    # no room for a minute: kept aside, the newest per message wins
    assert not await pacer.maybe("chat.update", "m1", edit("m1", "40%"))
    assert not await pacer.maybe("chat.update", "m1", edit("m1", "70%"))
    assert not await pacer.maybe("chat.update", "m2", edit("m2", "5%"))
    assert set(pacer.aside) == {"m1", "m2"}
    # the end of m1 must arrive: it waits for room and drops m1's pending progress
    await pacer.must("chat.update", edit("m1", "done"), "m1")
    assert shown["m1"] == "done" and "m1" not in pacer.aside
    assert pacer._flusher is not None
    await asyncio.wait_for(pacer._flusher, 5)
    assert shown == {"m1": "done", "m2": "5%"}  # m1 never went back to 70%


async def test_a_call_held_up_on_the_way_counts_from_its_answer(clock: ManualClock) -> None:
    """Slack counts a call when it arrives: one allowed at 0 s that only got there at 10 s
    is in Slack's window until 70 s, so it is counted here until then too."""
    pacer = pacer_on(clock, {"chat.update": 2})
    arrived: list[float] = []

    async def slow() -> None:
        clock.advance(10)  # held up: a busy connection, a lock, a slow network
        arrived.append(clock.now)

    async def quick() -> None:
        arrived.append(clock.now)

    start = clock.now
    await pacer.must("chat.update", slow, "C m1")
    await pacer.must("chat.update", quick, "C m2")
    await pacer.must("chat.update", quick, "C m3")  # waits for the slow one to leave
    assert [at - start for at in arrived] == [10, 10, 70]
    # Slack's own window (arrival times) never holds more than two
    assert all(sum(1 for b in arrived if a - 60 < b <= a) <= 2 for a in arrived)


async def test_an_owed_call_with_no_room_is_handed_back_with_a_turn_of_its_own(
    clock: ManualClock,
) -> None:
    """An owed item's post waits at most ``PATIENCE`` for room: a crowd is handed back, each
    with a later turn a limit's spacing after the one before, in the order it came."""
    pacer = pacer_on(clock, {"chat.postMessage": 6})  # one every 10 s
    sent: list[int] = []

    def sender(n: int):  # type: ignore[no-untyped-def]
        async def send() -> None:
            sent.append(n)

        return send

    turns: list[float] = []
    for n in range(10):
        try:
            await pacer.must("chat.postMessage C1", sender(n), patient=False)
        except Crowded as crowded:
            turns.append(crowded.seconds)
    assert sent == [0, 1, 2, 3, 4, 5]  # the window's room, at once
    assert turns == [60.0, 70.0, 80.0, 90.0]  # then one turn each, never all at once
    await pacer.must("chat.postMessage C1", sender(10))  # a patient call still waits its room
    assert sent[-1] == 10 and clock.now >= 60


async def test_progress_edits_wait_while_calls_handed_back_are_to_come_back(
    clock: ManualClock,
) -> None:
    """Owed calls turned away with their turns get the room as it frees, before progress
    edits kept aside: a crowd of progress edits never starves the final edits it waits
    behind."""
    pacer = pacer_on(clock, {"chat.update": 6})  # one every 10 s
    sent: list[str] = []

    def sender(name: str):  # type: ignore[no-untyped-def]
        async def send() -> None:
            sent.append(name)

        return send

    for n in range(6):
        await pacer.must("chat.update", sender(f"card {n}"), f"m{n}")
    turns = {}
    for n in range(3):  # the finals, owed: handed back with their turns
        try:
            await pacer.must("chat.update", sender(f"final {n}"), f"f{n}", patient=False)
        except Crowded as crowded:
            turns[n] = crowded.seconds
    assert sorted(turns) == [0, 1, 2]
    for n in range(20):  # a crowd of progress edits, kept aside
        assert not await pacer.maybe("chat.update", f"p{n}", sender(f"progress {n}"))
    started = clock.now
    for n, turn in turns.items():  # each final comes back at its turn and finds room
        clock.advance(started + turn - clock.now)
        for _ in range(5):
            await asyncio.sleep(0)  # the flusher runs meanwhile, as the loop lets it
        await pacer.must("chat.update", sender(f"final {n}"), f"f{n}", patient=False)
    finals = [i for i, name in enumerate(sent) if name.startswith("final")]
    progress = [i for i, name in enumerate(sent) if name.startswith("progress")]
    assert len(finals) == 3 and (not progress or max(finals) < min(progress)), sent
    await pacer.close()


async def test_a_progress_post_goes_only_when_there_is_room_now(clock: ManualClock) -> None:
    """A running change's first thread message never waits for room: with the channel's
    window spent, or a card waiting for it, it is turned away at once (the poll goes on,
    and shows it at a later one), and the clock has not moved."""
    pacer = pacer_on(clock, {"chat.postMessage": 2})
    sent: list[str] = []

    def sender(name: str):  # type: ignore[no-untyped-def]
        async def send() -> None:
            sent.append(name)

        return send

    await pacer.now("chat.postMessage C1", sender("first"))
    await pacer.must("chat.postMessage C1", sender("card"))
    started = clock.now
    with pytest.raises(Crowded) as crowded:
        await pacer.now("chat.postMessage C1", sender("progress"))
    assert crowded.value.seconds == 60.0  # the first leaves the window in a minute
    assert clock.now == started and sent == ["first", "card"]
    await pacer.now("chat.postMessage C2", sender("elsewhere"))  # another channel has room
    # a card waiting for room comes first: the progress post is turned away meanwhile
    waiting = asyncio.create_task(pacer.must("chat.postMessage C1", sender("card 2")))
    await asyncio.sleep(0)
    assert pacer.waiting == 1
    with pytest.raises(Crowded):
        await pacer.now("chat.postMessage C1", sender("progress"))
    await waiting
    assert sent == ["first", "card", "elsewhere", "card 2"]
