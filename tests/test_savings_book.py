"""Savings kept as rows: what the database gives for a period is what the succeeded requests
say (``savings``, each until the next change of its cluster), one by one and summed by
cluster and cause and by day, on SQLite and PostgreSQL, and each read after the first looks
only at the requests that ended since the newest row."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from bot.store import Store, schema
from bot.store.migrate import _config
from handlers.entities import ApprovalRequest, Origin
from handlers.spend.book import MARGIN, SavingsBook
from handlers.spend.savings import SavedSum, changes_done, saved_sums, savings
from tests.test_spend import succeeded
from tests.test_store import HEAD, STORES, Rows, database, rows_of

__all__ = ["database"]  # the real databases' fixture, shared with the store's tests

HOUR = 3600.0
DAY = 24 * HOUR
CLUSTER = "projects/p/locations/us-central1/modelDevelopmentClusters/c{}"
START = 1_790_000_000.0


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rows]:
    async with rows_of(request.param, tmp_path) as rows:
        yield rows


def history(seed: int, count: int = 120) -> list[ApprovalRequest]:
    """A month of changes of five clusters: nights off and on, remedies, resizes by hand
    (up, and down, which saves nothing of clusterbot's), in a random order of moments."""
    rng = random.Random(seed)
    kinds = [
        (Origin.SCHEDULE, (80.0, 0.5)),
        (Origin.SCHEDULE, (0.5, 80.0)),
        (Origin.IDLE, (40.0, 0.0)),
        (Origin.IDLE_AUTO, (40.0, 10.0)),
        (Origin.COMMAND, (0.5, 40.0)),
        (Origin.COMMAND, (40.0, 20.0)),
    ]
    found = []
    for n in range(count):
        origin, cost = rng.choice(kinds)
        at = START + round(rng.uniform(0, 30 * DAY))
        cluster = CLUSTER.format(rng.randrange(5))
        found.append(succeeded(f"r{n:03d}", origin, *cost, at, cluster))
    return found


@pytest.mark.parametrize("seed", range(3))
async def test_the_kept_savings_are_the_requests_savings(
    store: Rows, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kept 30 a transaction, in the order they ended: each page mends the ends of the last
    monkeypatch.setattr("handlers.spend.book.READ_PAGE", 7)
    monkeypatch.setattr("handlers.spend.book.KEEP_PAGE", 30)
    requests = history(seed)
    for request in requests:
        await store.add_request(request)
    await SavingsBook(store, store).catch_up()
    assert await agrees(store, requests, seed), "the periods of this history save something"


async def agrees(store: Rows, requests: list[ApprovalRequest], seed: int) -> int:
    """Compare the database's savings of random periods with the requests' own: how many
    sums were compared."""
    want = savings(requests)
    rng = random.Random(seed)
    compared = 0
    periods = [
        (START + rng.uniform(-2 * DAY, 25 * DAY), rng.uniform(HOUR, 10 * DAY)) for _ in range(8)
    ]
    periods.append((START - rng.uniform(0, 2 * DAY), 33 * DAY))  # whole weeks too
    for since, length in periods:
        until = since + length
        for cluster in (None, CLUSTER.format(1), "c2"):
            of = [s for s in want if cluster in (None, s.cluster, s.cluster.rsplit("/", 1)[-1])]
            summed = await store.savings_sums(since, until, cluster)
            assert sums(summed) == sums(saved_sums(of, since, until)), cluster
            compared += len(summed)
    return compared


@pytest.mark.parametrize("seed", range(2))
async def test_changes_kept_out_of_their_order_end_each_other_as_in_time(
    store: Rows, seed: int
) -> None:
    """Batches that arrive late (a replica's slow transaction, a catch-up's margin) with
    changes older than rows already kept: each saving still ends at its cluster's next change
    in time, whichever batch brought it."""
    requests = history(seed + 10)
    order = list(requests)
    random.Random(seed).shuffle(order)
    for at in range(0, len(order), 25):
        await store.keep_changes_done(changes_done(order[at : at + 25]))
    await store.keep_changes_done(changes_done(order[:10]))  # kept again: nothing changes
    assert await agrees(store, requests, seed)


async def test_an_upgrade_says_when_each_kept_saving_ended(database: Store) -> None:
    """Rows kept before a saving's end was kept with it (revision 0014) are given their
    ends by the upgrade, and read as the requests say."""
    requests = history(5)
    async with database.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), "0014"))
        columns = ("request_id", "cluster", "finished_at", "cause", "per_hour")
        then = sa.table("changes_done", *(sa.column(name) for name in columns))
        rows = [dataclasses.asdict(change) for change in changes_done(requests)]
        await connection.execute(then.insert(), rows)
    assert await database.migrate() == HEAD
    assert await agrees(database, requests, 5)


async def test_changes_kept_without_their_pieces_are_settled(
    database: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changes kept by a replica that did not cut them (of an earlier release, during an
    upgrade) are cut and rolled up by the next settling of the days they ended in, a page of
    changes a transaction (of 7 here)."""
    monkeypatch.setattr("bot.store.saved.SETTLE_PAGE", 7)
    requests = history(6)
    await database.keep_changes_done(changes_done(requests))
    async with database.engine.begin() as connection:
        for table in (schema.savings_pieces, schema.savings_weeks, schema.savings_days):
            await connection.execute(table.delete())
    assert await database.settle_savings(0.0) == len(requests)
    assert await agrees(database, requests, 6)


def sums(found: list[SavedSum]) -> list[tuple[object, ...]]:
    return sorted(
        (s.cluster, s.cause, s.day or 0.0, pytest.approx(s.saved, abs=1e-6)) for s in found
    )


async def test_each_read_after_the_first_looks_only_at_what_ended_since(
    store: Rows, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first read in pages: 4 requests parsed between awaits, 25 kept a transaction
    monkeypatch.setattr("handlers.spend.book.READ_PAGE", 4)
    monkeypatch.setattr("handlers.spend.book.KEEP_PAGE", 25)
    requests = history(7, count=60)
    for request in requests:
        await store.add_request(request)
    book = SavingsBook(store, store)
    assert await book.catch_up() == 60  # the first read keeps every succeeded change
    newest = max(r.finished_at or 0.0 for r in requests)
    assert await book.catch_up() == 0  # the last hour's ids are looked at, none read again
    later = succeeded("r-late", Origin.SCHEDULE, 80.0, 0.5, newest + DAY, CLUSTER.format(1))
    await store.add_request(later)
    # one that ended in the last hour before the newest row but was stored after it
    slow = succeeded(
        "r-slow", Origin.COMMAND, 0.5, 80.0, newest + DAY - MARGIN / 2, CLUSTER.format(2)
    )
    assert await book.catch_up() == 1
    await store.add_request(slow)
    assert await book.catch_up() == 1  # read, as it is not kept
    assert await book.catch_up() == 0
    # the late change saves still, all of the day after it, on its own cluster
    found = await store.savings_sums(newest + DAY, newest + 2 * DAY, CLUSTER.format(1))
    assert [(s.cluster, s.day, s.saved) for s in found if s.day is None] == [
        (CLUSTER.format(1), None, pytest.approx(79.5 * 24))
    ]
