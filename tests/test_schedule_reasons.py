"""A schedule follows its cluster and its approver, and its nights never wait on chat:
ended or paused while its "off" runs, it wakes as soon as that has finished; a wake goes to
the control plane when the bot was removed from the schedule's channel, and the thread's
lines go to the alert channel saying why; a deleted cluster ends its schedule, said once; an
approver who left the policy approves no more "off"s."""

from __future__ import annotations

from handlers.entities import RequestState
from handlers.policy import Policy
from handlers.schedules.model import Phase, ScheduleState
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_schedules import (
    POLICY,
    Store,
    at,
    bounds,
    check,
    finish_change,
    in_force,
    scheduled_bot,
    store,
    thread,
)
from tests.test_services_unit import ALERTS, C1

__all__ = ["Store", "store"]  # the fixture: a migrated SQLite store


async def test_ending_a_schedule_while_its_off_runs_wakes_it_once_asleep(
    clock: ManualClock, store: Store
) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    clock.now = at(2026, 3, 23, 20, 0)
    await check(bot)
    assert bounds(bot) == (0, 0)  # the off is sent; its operation runs
    answer = text(await bot.ask("U0ALICE", f"schedule end {schedule.id}"))
    assert "wakes as soon as the change under way has finished" in answer
    await finish_change(bot)
    await check(bot)  # asleep now, and ended: woken at once, not at 08:00 tomorrow
    await check(bot)
    assert bounds(bot) == (1, 4)
    await finish_change(bot)
    await check(bot)
    ended = await store.get_schedule(schedule.id)
    assert ended.state == ScheduleState.ENDED and ended.phase == Phase.AWAKE
    lines = thread(bot, schedule)
    assert any("ended; it wakes as soon as tonight's scale-down has finished" in t for t in lines)
    assert sum("back on: gpu 1:4" in t for t in lines) == 1


async def test_a_wake_needs_no_slack(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    clock.now = at(2026, 3, 23, 20, 0)
    await check(bot)
    await finish_change(bot)
    await check(bot)
    # the bot is removed from the schedule's channel while the cluster sleeps
    bot.messenger.refuse_in[schedule.channel] = "not_in_channel"
    clock.now = at(2026, 3, 24, 8, 0)
    await check(bot)
    assert bounds(bot) == (1, 4)  # woken, whatever Slack said
    await finish_change(bot)
    await check(bot)
    awake = await store.get_schedule(schedule.id)
    assert awake.phase == Phase.AWAKE
    moved = [text(r) for c, _, r, _ in bot.messenger.posted if c == ALERTS]
    assert any(
        f"could not post this in #{schedule.channel} (not_in_channel)" in t and "back on" in t
        for t in moved
    ), moved


async def test_a_deleted_cluster_ends_its_schedule_once(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    del bot.plane.clusters[C1]
    clock.now = at(2026, 3, 23, 20, 0)
    for _ in range(3):
        await check(bot)
        clock.advance(300)
    ended = await store.get_schedule(schedule.id)
    assert ended.state == ScheduleState.ENDED
    said = [t for t in thread(bot, schedule) if "no longer exists" in t]
    assert len(said) == 1 and "ended: c1 no longer exists" in said[0]


async def test_an_approver_who_left_approves_no_more_nights(
    clock: ManualClock, store: Store
) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)  # approved by U0BOB
    left = Policy.model_validate({**POLICY, "roles": {"operator": ["U0ALICE"]}})
    later = scheduled_bot(clock, store, same_world_as=bot, policy=left)
    clock.now = at(2026, 3, 23, 20, 0)
    await check(later)
    assert bot.plane.patches == []  # nothing sent in the name of one who approves no more
    off = await later.store.get_request((await store.get_schedule(schedule.id)).firing_request)
    assert off.state == RequestState.PENDING and off.decided_by is None
    assert any(
        "U0BOB, who approved this schedule, approves no longer" in t for t in thread(bot, schedule)
    )
    await check(later)
    assert bot.plane.patches == []  # still waiting for a person
