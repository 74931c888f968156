"""Bounded work for every request, as a viewer would push it: ``since`` goes back no further
than the ledger keeps (said in one line), heavy reports run a few at a time and one per
person while everyone else's commands go on, a burst waits its turn instead of failing, and
what is done and old is forgotten."""

from __future__ import annotations

import asyncio

from handlers import dispatch
from handlers.dispatch import Outcome
from handlers.gate import Gate
from handlers.owed.model import Owed, OwedState
from handlers.policy import Policy
from handlers.spend.asked import LEDGER_KEEPS
from handlers.spend.runs import SpendRun, by_day
from tests.conftest import ManualClock
from tests.support.memory import MemoryStore
from tests.support.text_adapter import text
from tests.test_services_unit import C1, POLICY, make_bot


def test_since_goes_back_no_further_than_the_ledger_keeps() -> None:
    read = dispatch.read("cost since 9999w")
    assert read.error is not None
    assert read.error.reason == "since goes back 400 days at most (400d): cost reads no further"
    assert dispatch.read("cost since 58w").error is not None  # 406 days
    assert dispatch.read("cost since 400d").error is None


async def test_a_person_runs_one_heavy_report_at_a_time_and_others_go_on() -> None:
    gate, release = Gate(at_once=4, heavy=1, patience=0.2), asyncio.Event()

    async def report(user: str) -> None:
        async with gate.enter(user, "cost", heavy=True):
            await release.wait()

    first = asyncio.ensure_future(report("U0CAROL"))
    await asyncio.sleep(0)
    answers = await asyncio.gather(report("U0CAROL"), report("U0DAVE"), return_exceptions=True)
    said = [getattr(a, "said", "") for a in answers]
    assert "your last /cluster cost (or another report) is still running" in said[0]
    assert "clusterbot is busy with other reports" in said[1]  # the one heavy place is taken
    async with gate.enter("U0DAVE", "list", heavy=False):  # a light command is not held up
        pass
    release.set()
    await first
    async with gate.enter("U0CAROL", "cost", heavy=True):  # her place is free again
        pass


async def test_a_burst_waits_its_turn_and_is_answered(clock: ManualClock) -> None:
    bot = make_bot(clock, Policy.model_validate(POLICY))
    bot.services.dispatcher.gate = Gate(at_once=2)
    answers = await asyncio.gather(
        *(bot.services.dispatcher.command("U0CAROL", "C0INFRA", "list") for _ in range(40))
    )
    assert {a.outcome for a in answers} == {Outcome.OK}


async def test_a_viewers_year_long_report_is_refused_in_words(clock: ManualClock) -> None:
    bot = make_bot(clock, Policy.model_validate(POLICY))
    answer = await bot.services.dispatcher.command("U0CAROL", "C0INFRA", "cost since 9999w")
    assert answer.outcome == Outcome.BAD_INPUT and answer.reply is not None
    assert "since goes back 400 days at most" in text(answer.reply)


async def test_what_is_done_and_old_is_forgotten() -> None:
    store = MemoryStore()
    run = SpendRun(C1, "gpu", 0.0, 100.0, 2, 10.0, False, "p/r")
    kept = SpendRun(C1, "gpu", 100.0, LEDGER_KEEPS + 500.0, 2, 10.0, False, "p/r")
    await store.record_spend([run, kept])
    # the ledger keeps a row a day: the days of the long run that ended before go too
    left = [piece for piece in by_day(kept) if piece.end >= LEDGER_KEEPS]
    assert await store.forget_spend(LEDGER_KEEPS) == 1 + len(by_day(kept)) - len(left)
    assert await store.spend_between(0.0, LEDGER_KEEPS * 2) == left == by_day(kept)[-2:]
    old = Owed("message:1", "message", {}, 10.0, 10.0, state=OwedState.DONE, done_at=20.0)
    due = Owed("message:2", "message", {}, 10.0, 10.0)
    await store.owe([old, due])
    assert await store.forget_owed(30.0) == 1
    assert [i.key for i in await store.owed_items(states=list(OwedState))] == ["message:2"]
