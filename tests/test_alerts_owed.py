"""Idle and health alerts are owed work: a replica that dies between an alert's post and its
record leaves it to the next, which finds the post by its key and posts nothing twice; one
that dies after the record was saved and before the post leaves the alert owed, and the next
sweep posts it; a burst of 429s delays an alert, never loses it."""

from __future__ import annotations

import pytest

from handlers.health.episodes import HEALTH_RECORD
from handlers.owed.engine import LEASE
from handlers.owed.posting import POST_WINDOW
from handlers.policy import Policy
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_health_alerts import Slurm, alerts, health_bot
from tests.test_health_alerts import sweep as health_sweep
from tests.test_services_unit import C1, POLICY, Bot, make_bot
from tests.test_services_unit import alerts as idle_alerts
from tests.test_services_unit import sweep as idle_sweep


class Died(BaseException):
    """The process ended here."""


def dies_at(bot: Bot, point: str) -> None:
    def crash(step: str) -> None:
        if step == point:
            raise Died(step)

    bot.services.engine.crash = crash  # type: ignore[assignment]


async def idle_for_long(bot: Bot) -> None:
    bot.activity.queues[C1] = (0, 0)
    await idle_sweep(bot)
    bot.clock.advance(11 * 60)


async def test_an_idle_alert_cut_off_after_its_post_is_not_posted_twice(
    clock: ManualClock,
) -> None:
    first = make_bot(clock, Policy.model_validate(POLICY))
    await idle_for_long(first)
    dies_at(first, "idle-alert-posted")
    with pytest.raises(Died):
        await idle_sweep(first)
    assert len(idle_alerts(first)) == 1
    second = make_bot(clock, Policy.model_validate(POLICY), same_world_as=first, owner="b")
    clock.advance(POST_WINDOW + LEASE)
    await second.services.engine.run_due()
    await idle_sweep(second)
    assert len(idle_alerts(first)) == 1  # found by its key
    record, _ = await second.records.get(C1)
    assert record.alert_message == idle_alerts(first)[0][0]


async def test_an_idle_alert_whose_replica_died_before_owing_it_is_posted_next_sweep(
    clock: ManualClock,
) -> None:
    first = make_bot(clock, Policy.model_validate(POLICY))
    await idle_for_long(first)
    dies_at(first, "idle-alert-due")  # the record is saved as alerted; nothing else
    with pytest.raises(Died):
        await idle_sweep(first)
    assert idle_alerts(first) == []
    second = make_bot(clock, Policy.model_validate(POLICY), same_world_as=first, owner="b")
    clock.advance(60)
    await idle_sweep(second)  # alerted, with no message: owed now, within the cooldown
    assert len(idle_alerts(first)) == 1
    clock.advance(60)
    await idle_sweep(second)
    assert len(idle_alerts(first)) == 1  # once


async def cut_off_after_a_health_post(clock: ManualClock) -> tuple[Bot, Bot]:
    """A replica that died between a health alert's post and its record, and the next."""
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    first = health_bot(clock, slurm)
    await health_sweep(first)
    slurm.fail("c1-gpu-1", "DRAIN")
    dies_at(first, "health-alert-posted")
    with pytest.raises(Died):
        await health_sweep(first)
    assert len(alerts(first)) == 1
    return first, health_bot(clock, slurm, same_world_as=first)


async def test_a_health_alert_cut_off_after_its_post_is_not_posted_twice(
    clock: ManualClock,
) -> None:
    first, second = await cut_off_after_a_health_post(clock)
    clock.advance(POST_WINDOW + LEASE)
    await second.services.engine.run_due()
    await health_sweep(second)
    assert len(alerts(first)) == 1
    record, _ = await second.keeper.of(HEALTH_RECORD).get(C1)
    assert record.episode is not None and record.episode.alert_message == alerts(first)[0][0]


@pytest.mark.parametrize("look", ["ratelimited", "missing_scope"])
async def test_a_post_that_cannot_be_looked_for_yet_is_not_posted_again(
    clock: ManualClock, look: str
) -> None:
    """Cut off after its post, the alert is looked for by the next replica: while the look
    is rate limited nothing is posted (never twice while it may be there), and it is found
    once the look works. Where the look can never work (no history scope), it is posted again:
    a duplicate at worst, never a loss."""
    first, second = await cut_off_after_a_health_post(clock)
    second.messenger.refuse_find = look
    for _ in range(3):
        clock.advance(POST_WINDOW + LEASE)
        await second.services.engine.run_due()
        await health_sweep(second)
    expected = 1 if look == "ratelimited" else 2
    assert len(alerts(first)) == expected
    second.messenger.refuse_find = None
    clock.advance(15 * 60)
    await second.services.engine.run_due()
    await health_sweep(second)
    assert len(alerts(first)) == expected
    record, _ = await second.keeper.of(HEALTH_RECORD).get(C1)
    assert record.episode is not None and record.episode.alert_message is not None


async def test_a_burst_of_429s_delays_a_health_alert_never_loses_it(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    slurm.fail("c1-gpu-1", "DRAIN")
    bot.messenger.refuse = "ratelimited"
    await health_sweep(bot)
    assert alerts(bot) == []
    bot.messenger.refuse = None
    clock.advance(61)
    await bot.services.engine.run_due()
    assert len(alerts(bot)) == 1


async def test_a_click_on_an_alert_posted_but_not_yet_recorded_edits_it(
    clock: ManualClock,
) -> None:
    """Someone clicks Keep on an alert the moment it shows, before the replica that posted it
    recorded the post (a busy replica, or one that died there): the click's note replaces
    that alert, found by its key, rather than being dropped."""
    bot = make_bot(clock, Policy.model_validate(POLICY))
    await idle_for_long(bot)
    dies_at(bot, "idle-alert-posted")
    with pytest.raises(Died):
        await idle_sweep(bot)
    [(posted, _)] = idle_alerts(bot)
    record, _ = await bot.records.get(C1)
    assert record.alert_message is None  # posted, not recorded
    assert await bot.click("U0ALICE", "idle_keep", C1) is None
    [note] = bot.edits_of(posted)
    assert "Kept" in text(note)
