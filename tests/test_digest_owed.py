"""The weekly digest is owed work: a firing no replica was up for is posted late, with its
date; one cut off between its post and its record is not posted twice, and one cut off
before its post is posted by another replica; a burst of 429s delays it, never loses it;
a chart the chat platform refuses is said so under the digest; and a ledger that began after
a firing owes no digest of a week clusterbot never watched."""

from __future__ import annotations

import pytest

from bot.jobs import cron_firings, digest_trigger
from bot.store import Store
from handlers.owed.engine import LEASE
from handlers.owed.model import OwedState
from handlers.owed.posting import POST_WINDOW
from handlers.policy import Policy
from handlers.spend.capability import DIGEST
from handlers.spend.runs import SpendRun
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_digest import MONDAY_9, digests, store
from tests.test_services_unit import ALERTS, C1, POLICY, Bot, make_bot

__all__ = ["store"]  # the fixture: a migrated SQLite store
WEEKLY = cron_firings(digest_trigger("0 9 * * mon", "UTC"))


def digest_bot(clock: ManualClock, store: Store, **extra: object) -> Bot:
    return make_bot(
        clock, Policy.model_validate(POLICY), digests=store, digest_firings=WEEKLY, **extra
    )  # type: ignore[arg-type]


async def watched_since(bot: Bot, store: Store, start: float) -> None:
    """The ledger as sweeps leave it: c1's two nodes since ``start``."""
    run = SpendRun(C1, "gpu", start, MONDAY_9 + 3 * 3600, 2, 10.0, False, "p/r")
    await store.record_spend([run])
    await bot.store.record_spend([run])


async def owe_and_run(bot: Bot) -> int:
    assert bot.services.of(DIGEST) is not None
    owed = await bot.services.of(DIGEST).owe_due()
    await bot.services.engine.run_due()
    return owed


async def test_a_firing_no_replica_was_up_for_is_posted_late_with_its_date(
    clock: ManualClock, store: Store
) -> None:
    bot = digest_bot(clock, store)
    await watched_since(bot, store, MONDAY_9 - 3 * 86400)
    clock.now = MONDAY_9 + 3 * 3600  # the first replica up after Monday 09:00
    assert await owe_and_run(bot) == 1
    [digest] = digests(bot)
    assert "Due Mon 23 Nov 09:00 UTC; posted late, at Mon 23 Nov 12:00 UTC" in digest
    assert await owe_and_run(bot) == 0  # owed once
    assert len(digests(bot)) == 1


async def test_a_ledger_begun_after_the_firing_owes_no_digest(
    clock: ManualClock, store: Store
) -> None:
    bot = digest_bot(clock, store)
    await watched_since(bot, store, MONDAY_9 + 3600)  # installed after the firing
    clock.now = MONDAY_9 + 3 * 3600
    assert await owe_and_run(bot) == 0 and digests(bot) == []


class Died(BaseException):
    """The process ended here."""


def dies_at(point: str) -> object:
    def crash(step: str) -> None:
        if step == point:
            raise Died(step)

    return crash


@pytest.mark.parametrize("point", ["digest-posted", "digest-chart-shared"])
async def test_a_digest_cut_off_after_its_post_is_not_posted_twice(
    clock: ManualClock, store: Store, point: str
) -> None:
    clock.now = MONDAY_9
    first = digest_bot(clock, store)
    await watched_since(first, store, MONDAY_9 - 3 * 86400)
    first.services.engine.crash = dies_at(point)  # type: ignore[assignment]
    with pytest.raises(Died):
        await owe_and_run(first)
    assert len(digests(first)) == 1
    second = digest_bot(clock, store, same_world_as=first, owner="replica-b")
    clock.advance(POST_WINDOW + LEASE)
    await second.services.engine.run_due()
    assert len(digests(first)) == 1  # found by its key: not posted again
    [item] = await first.store.owed_items(states=list(OwedState))
    assert item.state == OwedState.DONE
    charts = first.messenger.shared
    if point == "digest-posted":
        assert len(charts) == 1  # the chart went out once, with the second attempt
    else:  # the share may have gone out: not sent again, and said so under the digest
        assert len(charts) == 1
        notes = [text(r) for c, _, r, t in first.messenger.posted if t is not None]
        assert any("clusterbot stopped while sharing it" in n for n in notes), notes


async def test_a_digest_whose_replica_died_before_its_post_is_posted_by_another(
    clock: ManualClock, store: Store
) -> None:
    clock.now = MONDAY_9
    first = digest_bot(clock, store)
    await watched_since(first, store, MONDAY_9 - 3 * 86400)
    assert first.services.of(DIGEST) is not None
    await first.services.of(DIGEST).owe_due()  # owed, then the replica dies before it runs it
    [item] = await first.store.owed_items()
    await first.store.claim_owed_item(item.key, "me", clock(), LEASE)
    second = digest_bot(clock, store, same_world_as=first, owner="replica-b")
    assert await second.services.engine.run_due() == 0  # its lease is live still
    clock.advance(LEASE + 1)
    await second.services.engine.run_due()
    assert len(digests(first)) == 1


async def test_a_burst_of_429s_delays_the_digest_and_never_loses_it(
    clock: ManualClock, store: Store
) -> None:
    clock.now = MONDAY_9
    bot = digest_bot(clock, store)
    await watched_since(bot, store, MONDAY_9 - 3 * 86400)
    bot.messenger.refuse = "ratelimited"
    await owe_and_run(bot)
    assert digests(bot) == []
    bot.messenger.refuse = None
    clock.advance(61)
    await bot.services.engine.run_due()
    assert len(digests(bot)) == 1


async def test_a_refused_chart_is_said_under_the_digest(clock: ManualClock, store: Store) -> None:
    clock.now = MONDAY_9
    bot = digest_bot(clock, store)
    await watched_since(bot, store, MONDAY_9 - 3 * 86400)
    real_share = bot.messenger.share

    async def refused(*args: object, **kwargs: object) -> None:
        bot.messenger.refuse = "file_uploads_disabled"
        try:
            await real_share(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            bot.messenger.refuse = None

    bot.messenger.share = refused  # type: ignore[method-assign]
    await owe_and_run(bot)
    assert len(digests(bot)) == 1
    [(channel, note)] = [(c, r) for c, _, r, t in bot.messenger.posted if t is not None]
    assert channel == ALERTS and "file_uploads_disabled" in text(note)
    assert "/cluster cost since 7d draws it" in text(note)
