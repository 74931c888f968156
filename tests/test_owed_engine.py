"""The engine that does what the bot owes, on the in-memory store with a manual clock: an
item is done once, a failure is tried again later, a lease is renewed only while its worker
runs, a replica that loses the database gives its items up and another takes them over with
no restart, and a call in flight is never followed by a second one before its time."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from handlers.owed.engine import LEASE, Attempt, Engine, Room, retry_in
from handlers.owed.model import Done, Later, Outcome, OwedState
from tests.conftest import ManualClock
from tests.support.memory import MemoryStore


@dataclass
class Sender:
    """Sends one thing per item; counts what reached the world."""

    kind: str = "send"
    steps: tuple[str, ...] = ("test-before-send", "test-after-send")
    sent: list[str] = field(default_factory=list)
    unsure: list[bool] = field(default_factory=list)
    fail: int = 0  # fail this many attempts first
    hold: asyncio.Event | None = None  # a call that takes until this is set
    in_flight: float = 60.0

    async def work(self, attempt: Attempt) -> Outcome:
        self.unsure.append(attempt.unsure)
        if attempt.unsure and attempt.key in self.sent:  # looked: it arrived
            await attempt.sent()
            return Done("found sent")
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the world said no")
        attempt.step(self.steps[0])
        await attempt.sending(self.in_flight)
        if self.hold is not None:
            await self.hold.wait()
        self.sent.append(attempt.key)
        await attempt.sent()
        attempt.step(self.steps[1])
        return Done()


def engine(store: MemoryStore, clock: ManualClock, owner: str, *workers: Sender) -> Engine:
    made = Engine(store=store, clock=clock, owner=owner, rng=random.Random(1), patience=0.5)
    made.add(*workers)
    return made


async def test_an_item_owed_twice_is_done_once(clock: ManualClock) -> None:
    store, sender = MemoryStore(), Sender()
    one = engine(store, clock, "A", sender)
    assert await one.owe(one.due("send", "send:1", {})) == {"send:1"}
    assert await one.owe(one.due("send", "send:1", {})) == set()
    assert await one.run_due() == 1
    assert await one.run_due() == 0
    assert sender.sent == ["send:1"]
    done = await store.get_owed("send:1")
    assert done is not None and done.state == OwedState.DONE and done.done_at == clock()


async def test_a_failure_is_tried_again_later_with_backoff(clock: ManualClock) -> None:
    store, sender = MemoryStore(), Sender(fail=2)
    one = engine(store, clock, "A", sender)
    await one.owe(one.due("send", "send:1", {}))
    await one.run_due()
    failed = await store.get_owed("send:1")
    assert failed is not None and "the world said no" in (failed.note or "")
    assert 4.0 <= failed.due_at - clock() <= 5.0  # the first retry: 5 s less a fifth at most
    assert await one.run_due() == 0  # not before its time
    clock.advance(5)
    await one.run_due()
    again = await store.get_owed("send:1")
    assert again is not None and 8.0 <= again.due_at - clock() <= 10.0  # doubled
    clock.advance(10)
    await one.run_due()
    assert sender.sent == ["send:1"]
    assert [retry_in(n, random.Random(2)) <= 300 for n in (1, 20, 200)] == [True] * 3


async def test_a_replica_that_loses_the_database_hands_over_without_a_restart(
    clock: ManualClock,
) -> None:
    store, hold = MemoryStore(), asyncio.Event()
    first, second = Sender(hold=hold), Sender()
    a, b = engine(store, clock, "A", first), engine(store, clock, "B", second)
    await a.owe(a.due("send", "send:1", {}))
    # A is sending, and the call hangs; its lease is renewed while it works
    await a.run_due()
    clock.advance(LEASE - 1)
    await a.renew()
    clock.advance(LEASE - 1)
    assert await b.run_due() == 0  # renewed: still A's
    # the database goes away: A cannot renew, and gives the attempt up before its lease lapses
    store.down = True
    clock.advance(LEASE / 3)
    await a.renew()
    clock.advance(LEASE / 3)
    await a.renew()
    assert a.running == {} or all(r.lost for r in a.running.values())
    store.down = False
    hold.set()
    await asyncio.sleep(0)
    assert first.sent == []  # cancelled before the call returned: its outcome is unknown
    # the call may still be applied until its in-flight time: nobody looks before then
    clock.advance(LEASE)
    assert await b.run_due() == 0
    clock.advance(60)
    assert await b.run_due() == 1  # B takes it over, with no restart anywhere
    assert second.unsure == [True]  # told to look first
    assert second.sent == ["send:1"]


async def test_a_lease_is_renewed_only_while_its_worker_runs(clock: ManualClock) -> None:
    store, sender = MemoryStore(), Sender()
    a = engine(store, clock, "A", sender)
    await a.owe(a.due("send", "send:1", {}), a.due("send", "send:2", {}))
    # A took both, but its worker for send:2 died with nothing recorded (the database was
    # gone when it failed): a heartbeat must not keep that one alive
    await store.claim_owed_item("send:2", "A", clock(), LEASE)
    await a.run_due()
    assert sender.sent == ["send:1"]
    clock.advance(LEASE / 3)
    await a.renew()
    clock.advance(LEASE)
    assert await a.run_due() == 1  # lapsed, and taken up again by the same replica
    assert sender.sent == ["send:1", "send:2"]


async def test_an_attempt_past_its_limit_is_cut_off_and_tried_again_later(
    clock: ManualClock,
) -> None:
    store, hold = MemoryStore(), asyncio.Event()
    sender = Sender(hold=hold)  # its call never answers until told
    a = Engine(store=store, clock=clock, owner="A", patience=0.5, attempt_limit=0.05)
    a.add(sender)
    await a.owe(a.due("send", "send:1", {}))
    await a.run_due()
    running = [r.task for r in a.running.values()]
    if running:  # cut off by its limit, and its failure recorded
        await asyncio.wait(running, timeout=30)
    assert not a.running
    cut = await store.get_owed("send:1")
    assert cut is not None and cut.owner is None and cut.state == OwedState.DUE
    assert (cut.note or "").startswith("TimeoutError")
    assert sender.sent == []
    hold.set()
    clock.advance(sender.in_flight)  # the cut call may have been applied until then
    assert await a.run_due() == 1
    assert sender.sent == ["send:1"] and sender.unsure == [False, True]


async def test_later_is_due_again_when_it_says(clock: ManualClock) -> None:
    store = MemoryStore()

    @dataclass
    class Waiter:
        kind: str = "wait"
        steps: tuple[str, ...] = ()
        looks: int = 0

        async def work(self, attempt: Attempt) -> Outcome:
            self.looks += 1
            return Done() if self.looks == 3 else Later(attempt.engine.clock() + 300, "busy")

    waiter = Waiter()
    a = engine(store, clock, "A")
    a.add(waiter)
    await a.owe(a.due("wait", "wait:1", {}))
    for _ in range(3):
        await a.run_due()
        clock.advance(300)
    assert waiter.looks == 3
    done = await store.get_owed("wait:1")
    assert done is not None and done.state == OwedState.DONE and done.attempts == 3


async def test_steps_and_kinds_are_declared_once(clock: ManualClock) -> None:
    store = MemoryStore()
    a = engine(store, clock, "A", Sender())
    with pytest.raises(ValueError, match="two workers"):
        a.add(Sender())
    with pytest.raises(ValueError, match="names a step twice"):
        a.add(Sender(kind="other"))
    assert a.steps() == {"test-before-send": "send", "test-after-send": "send"}
    with pytest.raises(ValueError, match="no worker"):
        a.due("nobody", "x", {})

    @dataclass
    class Sloppy:
        kind: str = "sloppy"
        steps: tuple[str, ...] = ()

        async def work(self, attempt: Attempt) -> Outcome:
            attempt.step("undeclared")
            return Done()

    a.add(Sloppy())
    await a.owe(a.due("sloppy", "s:1", {}))
    await a.run_due()
    kept = await store.get_owed("s:1")
    assert kept is not None and kept.state == OwedState.DUE and "declares no step" in str(kept.note)


async def test_stop_hands_back_what_is_still_running(clock: ManualClock) -> None:
    store, hold = MemoryStore(), asyncio.Event()
    a, b = engine(store, clock, "A", Sender(hold=hold, in_flight=0.0)), None
    await a.owe(a.due("send", "send:1", {}))
    await a.run_due()
    assert await a.stop(0.1) == 1
    held = await store.get_owed("send:1")
    assert held is not None and held.owner is None and held.lease_until == 0.0
    b = engine(store, clock, "B", Sender())
    assert await b.run_due() == 1  # at once, not a lease later


async def test_a_kind_with_a_room_of_its_own_neither_waits_nor_crowds_the_others(
    clock: ManualClock,
) -> None:
    """A thousand polls due at once take their own room (spread over a batch), not the
    room every other kind shares: a crowd of polls never holds a change back, and a crowd
    of changes never starves the polls; each room takes what is due longest first."""
    store = MemoryStore()
    held = asyncio.Event()
    changes, polls = (
        Sender(kind="send", hold=held),
        Sender(kind="poll", steps=("poll-before", "poll-after")),
    )
    one = Engine(store=store, clock=clock, owner="A", at_once=2, patience=0.05)
    one.add(changes)
    one.add(polls, room=Room(at_once=5, spread=0.05))
    await one.owe(*(one.due("send", f"send:{n}", {}, at=clock() - n) for n in range(4)))
    await one.owe(*(one.due("poll", f"poll:{n}", {}, at=clock() - n) for n in range(8)))
    assert await one.run_due() == 2 + 5  # each room full, neither takes the other's
    assert polls.sent == ["poll:7", "poll:6", "poll:5", "poll:4", "poll:3"]
    assert len(one.running) == 2 and changes.sent == []  # two changes still hold their room
    assert await one.run_due() == 3  # the polls' room is free again: the rest of them
    assert polls.sent[5:] == ["poll:2", "poll:1", "poll:0"]
    assert await one.run_due() == 0  # the changes' room is still full
    held.set()
    await asyncio.wait([r.task for r in one.running.values()])
    assert await one.run_due() == 2 and len(changes.sent) == 4


@dataclass
class Ender:
    """A poll that ends its item and owes a message about it, which it asks the engine to
    send at once (as a change's end is told from the poll that found it)."""

    sender: Sender
    kind: str = "poll"
    steps: tuple[str, ...] = ()
    ran_inline: list[bool] = field(default_factory=list)

    async def work(self, attempt: Attempt) -> Outcome:
        told = attempt.engine.due("send", f"send:{attempt.key}", {})
        await attempt.engine.owe(told)
        self.ran_inline.append(await attempt.engine.run(told.key))
        return Done()


@pytest.mark.parametrize("leaves", [False, True])
async def test_a_room_that_leaves_what_it_owes_never_sends_it_itself(
    clock: ManualClock, leaves: bool
) -> None:
    """Polls in a room that ``leaves`` what they owe do not send it from the poll (where a
    chat rate limit would hold the room's places): it is due, and the next tick sends it in
    its own room; a room that does not leave it sends it at once, as before."""
    store, sender = MemoryStore(), Sender()
    poller = Ender(sender)
    one = engine(store, clock, "A", sender)
    one.add(poller, room=Room(4, leaves=leaves))
    for n in range(3):
        await one.owe(one.due("poll", f"poll:{n}", {}))
    await one.run_due(["poll"])
    assert poller.ran_inline == [not leaves] * 3
    assert len(sender.sent) == (0 if leaves else 3)
    assert await one.run_due() == (3 if leaves else 0)  # the next tick: in their room
    assert sorted(sender.sent) == [f"send:poll:{n}" for n in range(3)]
