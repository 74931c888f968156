"""The weekly cost digest on the core: each cluster's week against the last, idle dollars,
savings, the biggest opportunities with their buttons, and the week's chart; one post for
a firing whichever replicas fire it (claimed in a real SQLite store)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.charts import AggCharts
from bot.jobs import cron_firings, digest_trigger
from bot.store import Store
from handlers.policy import Policy
from handlers.spend.capability import DIGEST, SPEND
from handlers.spend.runs import SpendRun
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_services_unit import ALERTS, C1, POLICY, Bot, make_bot
from tests.test_store import open_store

MONDAY_9 = 1_795_424_400.0  # Mon 23 Nov 2026 09:00 UTC


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store("sqlite", tmp_path) as opened:
        yield opened


def digest_bot(clock: ManualClock, store: Store, **extra: object) -> Bot:
    return make_bot(clock, Policy.model_validate(POLICY), digests=store, **extra)  # type: ignore[arg-type]


async def fire(bot: Bot, at: float) -> bool:
    assert bot.services.of(DIGEST) is not None
    return await bot.services.of(DIGEST).fire(at)


def digests(bot: Bot) -> list[str]:
    return [text(r) for c, _, r, _ in bot.messenger.posted if c == ALERTS and "digest" in r.summary]


async def test_the_digest_names_the_idle_cluster_with_its_button(
    clock: ManualClock, store: Store
) -> None:
    clock.now = MONDAY_9 - 3600
    bot = digest_bot(clock, store)
    bot.activity.queues[C1] = (0, 0)  # type: ignore[attr-defined]
    await bot.services.sweeper.sweep(force=True)
    clock.advance(11 * 60)
    await bot.services.sweeper.sweep(force=True)  # idle past the policy's 10 minutes
    clock.now = MONDAY_9
    assert await fire(bot, MONDAY_9)
    [digest] = digests(bot)
    assert "# Weekly cost digest" in digest
    # the ledger began an hour ago: no whole week before it to compare in percent
    assert "clusterbot has watched since Mon 23 Nov: no whole week before it" in digest
    assert "%" not in digest.split("The biggest")[0]
    assert "| c1 " in digest or "c1 " in digest
    assert "The biggest opportunities (1)" in digest
    assert "1. c1: idle now, scale it to zero: ~$" in digest
    assert "[Scale to zero](idle_scale_to_zero)" in digest
    [(channel, files, said)] = bot.messenger.shared
    assert "spent" in said and "saved" in said
    assert channel == ALERTS and [name for name, _ in files] == [
        "cost-all-clusters-7d.png",
        "cost-all-clusters-7d.csv",
    ]
    # the button on the digest asks as the alert's does
    answer = await bot.click("U0BOB", "idle_scale_to_zero", C1)
    assert answer is None or "Scale to zero" in text(answer)
    assert bot.plane.patches == [(C1, ("node_pools",))]


async def test_two_replicas_post_one_digest(clock: ManualClock, store: Store) -> None:
    clock.now = MONDAY_9
    first = digest_bot(clock, store)
    second = digest_bot(clock, store, same_world_as=first, owner="replica-b")
    fired = await asyncio.gather(fire(first, MONDAY_9), fire(second, MONDAY_9))
    assert sorted(fired) == [False, True]
    assert len(digests(first)) == 1
    assert "None this week: no idle spend that scaling down or a schedule" in digests(first)[0]
    clock.advance(7 * 86400)
    assert await fire(second, MONDAY_9 + 7 * 86400)  # next week's firing is its own
    assert len(digests(first)) == 2


def test_the_digest_cron_names_each_firing_alike_on_every_replica() -> None:
    """Each firing is named by the time the cron gives it, whenever a replica looks: the
    key that makes it owed once."""
    firings = cron_firings(digest_trigger("0 9 * * mon", "UTC"))
    assert firings(MONDAY_9 - 7 * 86400, MONDAY_9) == [MONDAY_9]  # (since, until]
    assert firings(MONDAY_9, MONDAY_9 + 3600) == []
    every = cron_firings(digest_trigger("*/5 * * * *", "UTC"))
    assert every(MONDAY_9 - 3600, MONDAY_9) == [MONDAY_9 - 300 * n for n in range(10)][::-1]


async def test_a_week_is_compared_with_a_whole_week_before(
    clock: ManualClock, store: Store
) -> None:
    clock.now = MONDAY_9
    bot = digest_bot(clock, store)
    week = 7 * 86400.0
    # two weeks of c1 at 2 nodes, then one more node this week
    await bot.store.record_spend(
        [
            SpendRun(C1, "gpu", MONDAY_9 - 2 * week, MONDAY_9 - week, 2, 10.0, False, "p/r"),
            SpendRun(C1, "gpu", MONDAY_9 - week, MONDAY_9, 3, 10.0, False, "p/r"),
        ]
    )
    assert await fire(bot, MONDAY_9)
    [digest] = digests(bot)
    assert "~$5,040 this week (+50% on last week's ~$3,360)" in digest
    assert "+50%" in digest.split("CLUSTER")[1]


async def an_hour_of_c1(clock: ManualClock, store: Store) -> Bot:
    """A bot on Monday 09:00 whose ledger holds c1's last hour at 2 nodes ($20)."""
    clock.now = MONDAY_9
    bot = digest_bot(clock, store)
    await bot.store.record_spend(
        [SpendRun(C1, "gpu", MONDAY_9 - 3600, MONDAY_9, 2, 10.0, False, "p/r")]
    )
    return bot


async def test_a_chart_that_cannot_be_shared_here_says_why(
    clock: ManualClock, store: Store
) -> None:
    bot = await an_hour_of_c1(clock, store)
    bot.messenger.refuse = "not_in_channel"  # asked in a channel the bot is not in
    shown = text(await bot.ask("U0CAROL", "cost since 7d"))
    assert "The chart could not be shared here (not_in_channel): invite clusterbot" in shown
    assert bot.messenger.shared == []


async def test_a_chart_that_cannot_be_drawn_says_so_and_the_report_stands(
    clock: ManualClock, store: Store
) -> None:
    bot = await an_hour_of_c1(clock, store)
    bot.services.of(SPEND).charts = AggCharts(timeout=0.001)  # none is drawn that fast
    shown = text(await bot.ask("U0CAROL", "cost since 7d"))
    assert "~$20" in shown  # the table
    assert (
        "The chart could not be drawn (the drawing process took too long); the table above "
        "has its numbers." in shown
    )
    assert bot.messenger.shared == []
