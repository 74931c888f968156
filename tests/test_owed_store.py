"""The owed items' store contract, held alike by SQLite, PostgreSQL and the in-memory store:
a key is owed once, an item is taken only when due, free and not in flight, by one caller of
many, and only its holder renews, marks or ends it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from handlers.owed.model import Owed, OwedState
from tests.test_store import Rows, store

__all__ = ["store"]  # the store fixture: memory, SQLite and PostgreSQL


def item(key: str, due_at: float = 100.0, kind: str = "k") -> Owed:
    return Owed(key=key, kind=kind, subject={"n": key}, due_at=due_at, created_at=90.0)


async def test_a_key_is_owed_once(store: Rows) -> None:
    assert await store.owe([item("a"), item("b")]) == {"a", "b"}
    assert await store.owe([item("a", due_at=5.0), item("c")]) == {"c"}
    kept = await store.get_owed("a")
    assert kept is not None and kept.due_at == 100.0 and kept.subject == {"n": "a"}
    assert [i.key for i in await store.owed_items()] == ["a", "b", "c"]


async def test_only_what_is_due_free_and_not_in_flight_is_taken(store: Rows) -> None:
    await store.owe([item("early", 50.0), item("late", 200.0), item("other", 10.0, kind="x")])
    assert await store.claim_owed("A", 40.0, 15.0, 10, ["k"]) == []  # nothing due yet
    [taken] = await store.claim_owed("A", 100.0, 15.0, 10, ["k"])
    assert (taken.key, taken.owner, taken.attempts, taken.lease_until) == ("early", "A", 1, 115.0)
    assert await store.claim_owed("B", 110.0, 15.0, 10, ["k"]) == []  # A's lease is live
    assert await store.claim_owed_item("early", "B", 110.0, 15.0) is None
    # A marks a call in flight until 300, then dies: nobody takes it before then
    assert await store.mark_owed("early", "A", in_flight_until=300.0)
    assert await store.claim_owed("B", 199.0, 15.0, 10, ["k"]) == []  # still in flight
    found = await store.claim_owed("B", 300.0, 15.0, 10, ["k"])
    assert [(i.key, i.attempts, i.in_flight_until) for i in found] == [
        ("early", 2, 300.0),  # the taker learns a call may have been applied
        ("late", 1, 0.0),
    ]
    assert not await store.mark_owed("early", "A", in_flight_until=0.0)  # A lost it


async def test_of_many_takers_one_wins(store: Rows) -> None:
    await store.owe([item("a")])
    won = await asyncio.gather(
        *(store.claim_owed_item("a", f"r{n}", 100.0, 15.0) for n in range(8))
    )
    assert len([w for w in won if w is not None]) == 1


async def test_only_the_holder_renews_marks_and_settles(store: Rows) -> None:
    await store.owe([item("a"), item("b")])
    await store.claim_owed("A", 100.0, 15.0, 10, ["k"])
    assert await store.renew_owed("A", ["a", "b", "z"], 130.0) == {"a", "b"}
    assert await store.renew_owed("B", ["a"], 130.0) == set()
    assert not await store.settle_owed("a", "B", state=OwedState.DONE, done_at=120.0)
    assert await store.mark_owed("a", "A", result={"message": "m1"})
    assert await store.settle_owed("a", "A", state=OwedState.DONE, done_at=120.0, note="ok")
    assert await store.renew_owed("A", ["a"], 140.0) == set()  # done: nothing to hold
    done = await store.get_owed("a")
    assert done is not None and done.state == OwedState.DONE and done.result == {"message": "m1"}
    assert await store.settle_owed("b", "A", due_at=500.0, note="busy")
    later = await store.get_owed("b")
    assert later is not None and (later.owner, later.due_at, later.note) == (None, 500.0, "busy")
    assert [i.key for i in await store.owed_items()] == ["b"]
    assert await store.forget_owed(121.0) == 1
    assert await store.get_owed("a") is None


async def test_handing_back_frees_at_once(store: Rows) -> None:
    await store.owe([item("a"), item("b")])
    await store.claim_owed("A", 100.0, 15.0, 10, ["k"])
    await store.release_owed("A", ["a"])
    assert [i.key for i in await store.claim_owed("B", 101.0, 15.0, 10, ["k"])] == ["a"]
    await store.release_owed("A")
    assert [i.key for i in await store.claim_owed("B", 101.0, 15.0, 10, ["k"])] == ["b"]


async def test_an_item_owed_again_is_due_again_at_the_sooner_time(store: Rows) -> None:
    """A summary owed ``again`` (a roll-up whose nights change): a done one is due again at
    the new time, a due one keeps the sooner of its two times, a dropped one stays dropped;
    what its attempts left (its message) is kept."""
    again = [replace(item(k, due_at=150.0), again=True) for k in ("done", "due", "dropped")]
    await store.owe([item("done"), item("due", due_at=200.0), item("dropped")])
    for key, state in (("done", OwedState.DONE), ("dropped", OwedState.DROPPED)):
        await store.claim_owed_item(key, "A", 100.0, 15.0)
        await store.mark_owed(key, "A", result={"message": "m1"})
        await store.settle_owed(key, "A", state=state, done_at=101.0)
    assert await store.owe(again) == {"done", "due"}
    kept = {k: await store.get_owed(k) for k in ("done", "due", "dropped")}
    assert {k: (i.state, i.due_at) for k, i in kept.items() if i is not None} == {
        "done": (OwedState.DUE, 150.0),
        "due": (OwedState.DUE, 150.0),
        "dropped": (OwedState.DROPPED, 100.0),
    }
    done = kept["done"]
    assert done is not None and done.result == {"message": "m1"} and done.done_at is None
    await store.owe([replace(item("due", due_at=300.0), again=True)])  # later: kept sooner
    due = await store.get_owed("due")
    assert due is not None and due.due_at == 150.0
    assert await store.owe([item("done", due_at=400.0)]) == set()  # owed once, as before
