"""A sweep that finds many clusters newly idle, or newly broken, at once says so in one
message in the alert channel, costliest first, with each cluster's alert (and its buttons) in
that message's thread; a few at once are alerted in the channel as before. Nothing is posted
twice across a crash, and a roll-up slowed by Slack's rate limits goes first all the same."""

from __future__ import annotations

import pytest

from handlers.health.episodes import HEALTH_RECORD
from handlers.idle.burst import rollup_reply
from handlers.owed.burst import BURST, NAMED
from handlers.owed.engine import LEASE
from handlers.owed.posting import POST_WINDOW
from handlers.policy import Policy
from handlers.sweep.alert import IdleEntry
from handlers.sweep.rules import Status
from tests.conftest import ManualClock
from tests.support.factories import cluster_doc
from tests.support.text_adapter import text
from tests.test_alerts_owed import Died, dies_at
from tests.test_health_alerts import Slurm, health_bot
from tests.test_health_alerts import sweep as health_sweep
from tests.test_services_unit import ALERTS, POLICY, Bot, make_bot, running, sweep

PARENT = "projects/demo-project/locations/us-central1/modelDevelopmentClusters"


def fleet(clock: ManualClock, extra: int) -> Bot:
    """c1 and ``extra`` more clusters (two GPU nodes each), every one of them quiet."""
    bot = make_bot(clock, Policy.model_validate(POLICY))
    for n in range(extra):
        bot.plane.add(running(cluster_doc(cluster_id=f"b{n:03d}", nodes=2), nodes=2))
    for name in bot.plane.clusters:
        bot.activity.queues[name] = (0, 0)
    return bot


async def idle_now(bot: Bot) -> None:
    await sweep(bot)  # seen quiet
    bot.clock.advance(11 * 60)
    statuses = await sweep(bot)  # idle past idle_after_minutes: alerted
    assert set(statuses.values()) == {Status.IDLE}


def in_channel(bot: Bot) -> list[tuple[str, str]]:
    posted = bot.messenger.posted
    return [(ts, text(r)) for c, ts, r, thread in posted if c == ALERTS and not thread]


def in_thread(bot: Bot, ts: str) -> list[str]:
    return [text(r) for c, _, r, thread in bot.messenger.posted if c == ALERTS and thread == ts]


async def test_a_burst_is_one_message_in_the_channel_with_each_alert_in_its_thread(
    clock: ManualClock,
) -> None:
    bot = fleet(clock, 29)  # 30 clusters found idle in one sweep
    await idle_now(bot)
    [(rollup, said)] = in_channel(bot)
    assert "30 clusters found idle together" in said
    assert "And 10 more" in said  # NAMED are listed, the rest counted
    assert NAMED == 20
    cards = in_thread(bot, rollup)
    assert len(cards) == 30 and all("Scale to zero" in card for card in cards)
    record, _ = await bot.records.get(f"{PARENT}/b007")
    assert record.alert_channel == ALERTS and record.alert_thread == rollup
    assert record.alert_message in [ts for _, ts, _, t in bot.messenger.posted if t == rollup]
    # later sweeps redraw the cards where they are; nothing new in the channel
    bot.clock.advance(60)
    await sweep(bot)
    assert len(in_channel(bot)) == 1 and len(in_thread(bot, rollup)) == 30
    assert any(ts == record.alert_message for _, ts, _ in bot.messenger.edits)


async def test_a_few_alerts_at_once_go_in_the_channel_as_before(clock: ManualClock) -> None:
    bot = fleet(clock, BURST - 2)  # one fewer than a burst
    await idle_now(bot)
    posted = in_channel(bot)
    assert len(posted) == BURST - 1 and all("Idle cluster:" in said for _, said in posted)


async def test_a_reminder_goes_in_the_rollups_thread_and_redraws_the_card(
    clock: ManualClock,
) -> None:
    bot = fleet(clock, BURST)
    await idle_now(bot)
    [(rollup, _)] = in_channel(bot)
    record, _ = await bot.records.get(f"{PARENT}/b001")
    for _ in range(4 * 25):  # a day and an hour of sweeps: each alert's daily reminder
        bot.clock.advance(15 * 60)
        await sweep(bot)
    assert len(in_channel(bot)) == 1  # nothing in the channel
    reminders = [said for said in in_thread(bot, rollup) if "Idle cluster:" not in said]
    assert len(reminders) == BURST + 1  # one a cluster, in the roll-up's thread
    assert bot.edits_of(str(record.alert_message))  # the card itself drawn again


async def dies_alerting(clock: ManualClock, step: str) -> Bot:
    """A burst's sweep whose replica dies at ``step``."""
    first = fleet(clock, BURST)
    await sweep(first)
    first.clock.advance(11 * 60)
    dies_at(first, step)
    with pytest.raises(Died):
        await sweep(first)
    return first


async def test_a_crash_after_the_rollup_is_posted_posts_nothing_twice(clock: ManualClock) -> None:
    first = await dies_alerting(clock, "idle-alert-posted")  # a card posted, not recorded
    [(rollup, _)] = in_channel(first)
    second = make_bot(clock, Policy.model_validate(POLICY), same_world_as=first, owner="b")
    for _ in range(3):
        clock.advance(POST_WINDOW + LEASE)
        await second.services.engine.run_due()
        await sweep(second)
    assert len(in_channel(first)) == 1
    assert len(in_thread(first, rollup)) == BURST + 1  # each card once, in the thread
    for name in first.plane.clusters:
        record, _ = await second.records.get(name)
        assert record.alert_message is not None and record.alert_thread == rollup


async def test_a_burst_whose_replica_died_before_owing_it_is_one_rollup_at_the_next_sweep(
    clock: ManualClock,
) -> None:
    first = await dies_alerting(clock, "idle-alert-due")  # the records say alerted, no more
    assert in_channel(first) == []
    second = make_bot(clock, Policy.model_validate(POLICY), same_world_as=first, owner="b")
    clock.advance(60)
    await sweep(second)
    [(rollup, _)] = in_channel(first)
    assert len(in_thread(first, rollup)) == BURST + 1
    clock.advance(60)
    await sweep(second)
    assert len(in_channel(first)) == 1 and len(in_thread(first, rollup)) == BURST + 1


async def test_a_rate_limited_rollup_goes_first_and_its_alerts_follow_in_its_thread(
    clock: ManualClock,
) -> None:
    bot = fleet(clock, BURST)
    await sweep(bot)
    bot.clock.advance(11 * 60)
    bot.messenger.refuse = "ratelimited"  # the roll-up waits its turn; the cards wait for it
    await sweep(bot)
    assert in_channel(bot) == []
    bot.messenger.refuse = None
    for _ in range(3):
        bot.clock.advance(120)
        await bot.services.engine.run_due()
    [(rollup, said)] = in_channel(bot)  # the roll-up first, then the cards under it
    assert "found idle together" in said and len(in_thread(bot, rollup)) == BURST + 1


def test_the_rollup_lists_the_costliest_first_and_counts_the_rest() -> None:
    entries = [
        IdleEntry(
            cluster=f"{PARENT}/c{n:02d}",
            target="projects/demo-project/locations/us-central1",
            status=Status.IDLE,
            reason="no jobs",
            nodes="gpu: 2 x a3-highgpu-8g",
            cost_hour=float(n),
            freed_hour=float(n),
            idle_since=1000.0,
        )
        for n in range(25)
    ]
    said = text(rollup_reply(entries, 1000.0 + 3600))
    assert said.index("c24") < said.index("c23") < said.index("c05")
    assert "c04" not in said  # the five cheapest are counted, not named
    assert "And 5 more, ~$10.00/h together." in said
    assert "~$300.00/h" in said  # what they cost together, and what scaling to zero stops


def broken_fleet(clock: ManualClock, extra: int) -> tuple[Bot, Slurm]:
    """c1 and ``extra`` more clusters whose Slurm says what ``Slurm`` says (each the same)."""
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    for n in range(extra):
        bot.plane.add(running(cluster_doc(cluster_id=f"b{n:03d}", nodes=2), nodes=2))
    return bot, slurm


async def test_a_burst_of_broken_clusters_is_one_message_with_their_alerts_in_its_thread(
    clock: ManualClock,
) -> None:
    bot, slurm = broken_fleet(clock, 24)
    await health_sweep(bot)
    assert in_channel(bot) == []  # healthy
    slurm.fail("c1-gpu-1", "DRAIN")  # every cluster's second node drained at once
    await health_sweep(bot)
    [(rollup, said)] = in_channel(bot)
    assert "25 clusters found broken together" in said and "And 5 more" in said
    cards = in_thread(bot, rollup)
    assert len(cards) == 25 and all(card.startswith("# Health:") for card in cards)
    record, _ = await bot.keeper.of(HEALTH_RECORD).get(f"{PARENT}/b003")
    assert record.episode is not None and record.episode.alert_channel == ALERTS
    assert record.episode.alert_message in [t for _, t, _, th in bot.messenger.posted if th]
    # healed: each card is edited where it is; nothing new anywhere
    slurm.states["c1-gpu-1"] = {"IDLE"}
    await health_sweep(bot)
    assert len(in_channel(bot)) == 1 and len(in_thread(bot, rollup)) == 25
    assert "healed" in text(bot.edits_of(str(record.episode.alert_message))[-1]).lower()


async def test_a_health_burst_cut_off_after_a_post_posts_nothing_twice(
    clock: ManualClock,
) -> None:
    first, slurm = broken_fleet(clock, BURST)
    await health_sweep(first)
    slurm.fail("c1-gpu-1", "DRAIN")
    dies_at(first, "health-alert-posted")
    with pytest.raises(Died):
        await health_sweep(first)
    [(rollup, _)] = in_channel(first)
    second = health_bot(clock, slurm, same_world_as=first)
    for _ in range(3):
        clock.advance(POST_WINDOW + LEASE)
        await second.services.engine.run_due()
        await health_sweep(second)
    assert len(in_channel(first)) == 1
    assert len(in_thread(first, rollup)) == BURST + 1
