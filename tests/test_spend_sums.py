"""The cost report summed by the database is the report folded run by run: the same groups,
the same days, the same days watched and the same chart series, by cluster, pool, target
and label, for the fleet and for one cluster, over periods that do not start at midnight,
on SQLite and PostgreSQL (and the in-memory store the unit tests use)."""

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
from bot.store.spend import _row
from handlers.spend.keeper import SpendKeeper
from handlers.spend.report import SpendReport
from handlers.spend.runs import DAY, SPEND_RECORD, SpendRun, by_day
from handlers.spend.series import GroupDays
from handlers.spend.totals import (
    Spend,
    Tally,
    by_cluster,
    by_label,
    by_pool,
    by_target,
    overall,
)
from tests.support.memory import MemoryKeeper
from tests.test_spend import _runs_and_savings
from tests.test_store import HEAD, STORES, Rows, database, rows_of

__all__ = ["database"]  # the real databases' fixture, shared with the store's tests


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rows]:
    async with rows_of(request.param, tmp_path) as rows:
        yield rows


def report_on(store: Rows) -> SpendReport:
    keeper = SpendKeeper(
        records=MemoryKeeper().of(SPEND_RECORD), store=store, clock=lambda: 0.0, interval=300
    )
    return SpendReport(store=store, keeper=keeper, requests=store, clock=lambda: 0.0, interval=300)


async def read(report: SpendReport, tally: Tally, cluster: str | None) -> Tally:
    """``tally`` filled as a report fills it (its spend, its days, the runs still open)."""
    await report.read([tally], cluster)
    return tally


def ledger_order(run: SpendRun) -> tuple[float, str, str]:
    return (run.start, run.cluster, run.pool)


def same(got: Spend, want: Spend) -> bool:
    fields = ("cost", "idle", "node_hours", "unpriced")
    return all(getattr(got, f) == pytest.approx(getattr(want, f), abs=1e-6) for f in fields)


@pytest.mark.parametrize("seed", range(2))
async def test_the_database_sums_as_the_runs_fold(store: Rows, seed: int) -> None:
    written, _saved, since, until = _runs_and_savings(seed)
    await store.record_spend(written)
    report = report_on(store)
    spanning = sum(1 for r in written if r.end - r.start >= 86400)
    assert spanning, "some runs span days, which the ledger keeps cut at midnight"
    # the ledger's rows: the runs cut at UTC midnights, read in order
    runs = sorted(
        (p for r in written for p in by_day(r)), key=lambda r: (r.start, r.cluster, r.pool)
    )
    assert await store.spend_between(since - 86400, until + 86400) == [
        r for r in runs if r.end > since - 86400 and r.start < until + 86400
    ]
    for group in (by_cluster, by_pool, by_target, by_label("team")):
        for cluster in (None, "train03"):

            def keep(placed: object, key: str | None = cluster) -> bool:
                name = getattr(placed, "cluster", "")
                return key is None or key in (name, name.rsplit("/", 1)[-1])

            want = Tally(since, until, group, keep)
            want.add(runs)
            got = await read(report, Tally(since, until, group, keep), cluster)
            assert list(got.totals()) == list(want.totals()), (group.name, cluster)
            assert all(same(got.groups[n], s) for n, s in want.groups.items())
            assert got.watched == want.watched
            assert [d for d, _ in got.by_day()] == [d for d, _ in want.by_day()]
            for (_, mine), (_, theirs) in zip(got.by_day(), want.by_day(), strict=True):
                assert same(mine, theirs)
            assert got.labels == want.labels
            assert got.first == want.first
            names = list(want.totals())[:3]
            series, expected = (GroupDays(t, names, others=True) for t in (got, want))
            await report.series_summed(series, cluster)
            expected.add(runs)
            wanted = [pytest.approx(row, abs=1e-6) for row in expected.spend]
            assert series.spend == wanted, (group.name, cluster)
            # a charted report reads its days with the chart's series: the same days
            charted = Tally(since, until, group, keep, daily=False)
            await read(report, charted, cluster)
            assert charted.by_day() == [(d, Spend()) for d, _ in want.by_day()]  # none yet
            await report.series_summed(GroupDays(charted, names, others=True), cluster)
            assert charted.watched == want.watched
            for (day, mine), (theirs_day, theirs) in zip(
                charted.by_day(), want.by_day(), strict=True
            ):
                assert day == theirs_day and same(mine, theirs), (group.name, cluster, day)


async def fleet_by_week(store: Rows, runs: list[SpendRun], since: float, until: float) -> None:
    """The fleet's report over [since, until) (whole weeks from the roll-up, its edges and
    its chart's days) is the ledger's rows folded."""
    report = report_on(store)
    for group in (by_cluster, by_pool, by_label("team")):
        want = Tally(since, until, group)
        want.add(runs)
        got = await read(report, Tally(since, until, group), None)
        assert list(got.totals()) == list(want.totals()), group.name
        assert all(same(got.groups[n], s) for n, s in want.groups.items())
        for (day, mine), (theirs_day, theirs) in zip(got.by_day(), want.by_day(), strict=True):
            assert day == theirs_day and same(mine, theirs), (group.name, day)
        names = list(want.totals())[:2]
        series, expected = (GroupDays(t, names, others=True) for t in (got, want))
        await report.series_summed(series, None)
        expected.add(runs)
        assert series.spend == [pytest.approx(row, abs=1e-6) for row in expected.spend]
    # a period only compared with another: the fleet's whole, a few clusters' own spend
    want = Tally(since, until)
    want.add(runs)
    names = {run.cluster for run in runs[::7][:3]}
    running = await report.keeper.open_runs(until)
    fleet = await report.fleet_days(since, until)
    fleet.add(running)
    named = await report.clusters_spend(since, until, names, running)
    assert same(overall(fleet.days), overall(want.totals()))
    ids = {name.rsplit("/", 1)[-1] for name in names}
    assert list(named) == [name for name in want.totals() if name in ids]
    assert all(same(spend, want.groups[name]) for name, spend in named.items())
    assert fleet.first == min(run.start for run in runs)
    assert await report.clusters_spend(since, until, set(), running) == {}


@pytest.mark.parametrize("seed", range(2))
async def test_the_roll_ups_hold_however_the_runs_are_written(store: Rows, seed: int) -> None:
    """Runs written in any order, in batches, some first with an earlier end (a crash before
    the records, then the next sweep) and some twice, and the oldest forgotten: whole weeks
    read from the roll-ups give what the ledger's rows give."""
    written, _saved, since, until = _runs_and_savings(seed)
    rng = random.Random(seed)
    order = list(written)
    rng.shuffle(order)
    early = [dataclasses.replace(r, end=r.start + (r.end - r.start) / 3) for r in order[:40]]
    await store.record_spend(early)
    for at in range(0, len(order), 37):
        await store.record_spend(order[at : at + 37])
    await store.record_spend(order[40:60])  # again: nothing changes
    runs = sorted((p for r in written for p in by_day(r)), key=ledger_order)
    await fleet_by_week(store, runs, since, until)
    await fleet_by_week(store, runs, since + 3.5 * DAY, since + 4.2 * DAY)  # no whole day
    await fleet_by_week(store, runs, since - since % DAY + 7 * DAY, until)  # from a midnight
    forgotten = since + 9.5 * DAY
    # a pool that ran only before what is forgotten: its place goes with its runs
    gone = dataclasses.replace(runs[0], pool="gone", start=since, end=since + DAY)
    await store.record_spend([gone])
    await store.forget_spend(forgotten)
    left = [r for r in runs if r.end >= forgotten]
    await fleet_by_week(store, left, forgotten, until)
    if isinstance(store, Store):  # a place stays while a run or a roll-up has it
        async with store.engine.connect() as connection:
            places = (await connection.execute(sa.select(schema.spend_places))).all()
            rolled = {
                place
                for table in (schema.spend_weeks, schema.spend_place_days)
                for (place,) in await connection.execute(sa.select(table.c.place))
            }
        held = {(r.cluster, r.pool, r.target, r.idle, r.node_hour) for r in left}
        found = {(p.cluster, p.pool, p.target, p.idle, p.node_hour): p.id for p in places}
        assert "gone" not in {p.pool for p in places} and held <= set(found)
        assert all(key in held or place in rolled for key, place in found.items())


async def test_an_upgrade_cuts_the_ledger_at_midnight_and_rolls_it_up(database: Store) -> None:
    """Runs kept whole before the ledger was cut (revision 0015) are cut at UTC midnights
    by the upgrade and rolled up, and read as their rows fold."""
    written, _saved, since, until = _runs_and_savings(3)
    async with database.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), "0015"))
        await connection.execute(schema.spend_runs.insert(), [_row(run) for run in written])
    assert await database.migrate() == HEAD
    runs = sorted((p for r in written for p in by_day(r)), key=ledger_order)
    assert await database.spend_between(0.0, 1e10) == runs
    await fleet_by_week(database, runs, since, until)


async def test_what_an_earlier_release_wrote_is_settled(
    database: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs written whole and without roll-ups (a replica of an earlier release, during an
    upgrade) are cut and rolled up by the next settling of the days they end in, a page of
    rows a transaction (of 7 here: pages end within a cluster's runs)."""
    monkeypatch.setattr("bot.store.spend.SETTLE_PAGE", 7)
    written, _saved, since, until = _runs_and_savings(4)
    await database.record_spend(written[:100])
    async with database.engine.begin() as connection:
        await connection.execute(schema.spend_runs.insert(), [_row(run) for run in written[100:]])
    runs = sorted((p for r in written for p in by_day(r)), key=ledger_order)
    assert await database.spend_between(0.0, 1e10) != runs
    whole = [r for r in written[100:] if len(by_day(r)) > 1]
    assert await database.settle_spend(0.0) == len(whole) > 0
    assert await database.spend_between(0.0, 1e10) == runs
    await fleet_by_week(database, runs, since, until)
    assert await database.settle_spend(0.0) == 0  # settled: nothing more to cut
    await fleet_by_week(database, runs, since, until)
