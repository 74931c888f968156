"""A fleet on one schedule: its nights go out together, each change waiting only for its
place in the control plane's write quota (``handlers/pacing.py``), in the order they were
asked, while a person's change goes at once; and the quota's slots themselves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.store import Store
from handlers.changes.execution import KIND
from handlers.domain.operations import SlurmJob
from handlers.entities import RequestState
from handlers.pacing import WriteQuota
from handlers.schedules.capability import SCHEDULES_CAPABILITY
from handlers.schedules.model import Phase, Schedule, ScheduleState
from handlers.schedules.rollup import KIND as ROLLUP
from handlers.schedules.rollup import rollup_key
from handlers.schedules.times import Weekly
from tests.conftest import ManualClock
from tests.support.factories import cluster_doc
from tests.support.memory import FakeActivity
from tests.support.text_adapter import text
from tests.test_schedules import scheduled_bot
from tests.test_services_unit import INFRA, poll, running
from tests.test_store import open_store

FLEET = 12
PER_MINUTE = 5
PARENT = "projects/demo-project/locations/us-central1"


def test_a_crowd_gets_one_slot_each_minute_by_minute_in_order() -> None:
    now = [1000.0]
    quota = WriteQuota(60, lambda: now[0])
    slots = [quota.slot(f"change:{i}", "p/r") for i in range(150)]
    assert slots == [1000.0 + 60 * (i // 60) for i in range(150)]
    assert quota.slot("change:149", "p/r") == 1120.0  # a change keeps its slot
    assert quota.slot("person", "p/r", ahead=True) == 1000.0  # a person's goes at once
    assert quota.slot("elsewhere", "p/other") == 1000.0  # each project and region its own
    now[0] = 1061.0
    quota.done("change:61")
    # done: a new change takes a new slot, the next free one: the third minute's 31st
    assert quota.slot("change:61", "p/r") == 1120.0
    assert [quota.slot(f"more:{i}", "p/r") for i in range(30)] == [1120.0] * 29 + [1180.0]


class Overlapping(FakeActivity):
    """Slurm as the fakes say, each read taking a moment: counts the reads at once."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = self.most = 0

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        self.reading += 1
        self.most = max(self.most, self.reading)
        try:
            await asyncio.sleep(0.01)
            return await super().jobs(cluster)
        finally:
            self.reading -= 1


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store("sqlite", tmp_path) as opened:
        yield opened


def fleet_schedule(index: int, now: float) -> Schedule:
    daily = frozenset(range(7))
    return Schedule(
        id=f"sch-{index:02d}",
        cluster=f"{PARENT}/modelDevelopmentClusters/f{index:02d}",
        pool=None,
        off=Weekly(daily, 20, 0),
        on=Weekly(daily, 8, 0),
        zone="UTC",
        requested_by="U0ALICE",
        channel=INFRA,
        created_at=now,
        request_id=f"r-{index}",
        state=ScheduleState.ACTIVE,
        approved_by="U0BOB",
        next_off=now - 1,
    )


async def test_a_fleets_night_goes_out_at_the_quotas_pace_and_a_person_goes_first(
    clock: ManualClock, store: Store
) -> None:
    clock.now = time.time()
    slurm = Overlapping()
    bot = scheduled_bot(clock, store, writes_per_minute=PER_MINUTE, activity=slurm)
    for index in range(FLEET):
        cluster = bot.plane.add(running(cluster_doc(cluster_id=f"f{index:02d}", nodes=2), 2))
        bot.activity.queues[cluster.name] = (0, 0)  # type: ignore[attr-defined]
        await store.add_schedule(fleet_schedule(index, clock.now))
    nights = bot.services.of(SCHEDULES_CAPABILITY)
    assert nights is not None

    await nights.check_all()  # every night asked in one check; the quota's first minute sent
    assert slurm.most > 1  # the schedules were looked at together, not one after another
    asked = await store.requests_in([RequestState.APPROVED])
    assert len(bot.plane.patches) == PER_MINUTE
    assert len(asked) == FLEET - PER_MINUTE
    phases = {s.phase for s in await store.schedules()}
    assert phases == {Phase.GOING_OFF}, phases

    await bot.ask("U0ALICE", "resize c1 gpu 3")
    [person] = await store.requests_in([RequestState.PENDING])
    await bot.click("U0BOB", "approve", person.id)
    assert len(bot.plane.patches) == PER_MINUTE + 1  # a person's change did not wait
    assert bot.plane.patches[-1][0].endswith("/c1")

    sent = [len(bot.plane.patches)]
    for _ in range(3):
        clock.advance(61)
        await bot.services.engine.run_due([KIND])
        sent.append(len(bot.plane.patches))
    assert sent == [6, 11, 13, 13]  # five a minute, the night's last two in the third
    order = [name.rsplit("/", 1)[-1] for name, _ in bot.plane.patches if "/f" in name]
    assert sorted(order) == [f"f{i:02d}" for i in range(FLEET)]

    for operation in list(bot.plane.started):
        bot.plane.finish(operation)
    clock.advance(2)
    await poll(bot)
    # asleep as each change ended, not at the next check (which a fleet keeps busy)
    assert {s.phase for s in await store.schedules()} == {Phase.ASLEEP}


async def test_a_fleets_night_is_one_message_in_the_channel_and_a_card_in_each_thread(
    clock: ManualClock, store: Store
) -> None:
    """Twelve schedules going off together: one roll-up in the channel, drawn once the
    minute's nights are asked and again as they end; each night's card and end in its own
    schedule's thread; a night asked late in the minute is added to the finished roll-up."""
    clock.now = (time.time() // 60 + 1) * 60  # the start of a minute
    bot = scheduled_bot(clock, store)
    for index in range(FLEET):
        cluster = bot.plane.add(running(cluster_doc(cluster_id=f"f{index:02d}", nodes=2), 2))
        bot.activity.queues[cluster.name] = (0, 0)  # type: ignore[attr-defined]
        await store.add_schedule(replace(fleet_schedule(index, clock.now), thread=f"t{index}"))
    nights = bot.services.of(SCHEDULES_CAPABILITY)
    assert nights is not None
    await nights.check_all()
    top = [(ts, r) for c, ts, r, t in bot.messenger.posted if c == INFRA and t is None]
    assert top == []  # not yet: the minute's last nights may still be asked
    for index in range(FLEET):  # each card in its schedule's thread
        cards = [r for _, _, r, t in bot.messenger.posted if t == f"t{index}"]
        assert any(text(r).startswith("# Resize request: f") for r in cards), index

    clock.advance(65)  # the minute is over and its asks have landed
    await bot.services.engine.run_due([ROLLUP])
    [(rollup, reply)] = [(ts, r) for c, ts, r, t in bot.messenger.posted if c == INFRA and not t]
    assert reply.summary == f"Schedules: {FLEET} nights asked · {FLEET} under way", reply.summary
    assert "Under way: f00, f01, f02" in text(reply)

    for operation in list(bot.plane.started):
        bot.plane.finish(operation)
    clock.advance(2)
    await poll(bot)  # the nights end; each ask for a redraw
    clock.advance(11)
    await bot.services.engine.run_due([ROLLUP])
    last = [r for _, ts, r in bot.messenger.edits if ts == rollup][-1]
    assert last.summary == f"Schedules: {FLEET} nights asked · {FLEET} done", last.summary
    assert await bot.services.engine.owed_now([ROLLUP]) == []  # done: all ended, minute over
    for index in range(FLEET):  # and each end in its own thread
        said = [text(r) for _, _, r, t in bot.messenger.posted if t == f"t{index}"]
        assert any(t.startswith(f"*f{index:02d}*: done, finished in") for t in said), said

    # a night asked in the same minute after the roll-up was done: drawn again as it ends
    late = await store.get_request((await store.schedules())[0].firing_request or "")
    assert late is not None
    rollups = nights.nights.asking.rollup
    await bot.services.engine.owe(*rollups.owed_with(replace(late, id="r-late")))
    assert await bot.services.engine.owed_now([ROLLUP]) == []  # asked: owed once, done
    await rollups.ended(replace(late, id="r-late"))
    assert [i.key for i in await bot.services.engine.owed_now([ROLLUP])] == [
        rollup_key(INFRA, clock.now // 60 * 60 - 60)
    ]
    assert len(await store.schedules()) == FLEET
    assert {s.phase for s in await store.schedules()} == {Phase.ASLEEP}
