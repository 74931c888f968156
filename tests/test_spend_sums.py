"""The cost report summed by the database is the report folded run by run: the same groups,
the same days, the same days watched and the same chart series, by cluster, pool, target
and label, for the fleet and for one cluster, over periods that do not start at midnight,
on SQLite and PostgreSQL (and the in-memory store the unit tests use)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from handlers.spend.keeper import SpendKeeper
from handlers.spend.report import SpendReport
from handlers.spend.runs import SPEND_RECORD
from handlers.spend.totals import GroupDays, Spend, Tally, by_cluster, by_label, by_pool, by_target
from tests.support.memory import MemoryKeeper
from tests.test_spend import _runs_and_savings
from tests.test_store import STORES, Rows, rows_of


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rows]:
    async with rows_of(request.param, tmp_path) as rows:
        yield rows


def report_on(store: Rows) -> SpendReport:
    keeper = SpendKeeper(
        records=MemoryKeeper().of(SPEND_RECORD), store=store, clock=lambda: 0.0, interval=300
    )
    return SpendReport(store=store, keeper=keeper, requests=store, clock=lambda: 0.0, interval=300)


def same(got: Spend, want: Spend) -> bool:
    fields = ("cost", "idle", "node_hours", "unpriced")
    return all(getattr(got, f) == pytest.approx(getattr(want, f), abs=1e-6) for f in fields)


@pytest.mark.parametrize("seed", range(2))
async def test_the_database_sums_as_the_runs_fold(store: Rows, seed: int) -> None:
    runs, _saved, since, until = _runs_and_savings(seed)
    runs.sort(key=lambda r: (r.start, r.cluster, r.pool))  # as the ledger is read
    await store.record_spend(runs)
    report = report_on(store)
    spanning = sum(1 for r in runs if r.end - r.start >= 86400)
    assert spanning, "some runs span days, which the database does not sum by day"
    for group in (by_cluster, by_pool, by_target, by_label("team")):
        for cluster in (None, "train03"):

            def keep(placed: object, key: str | None = cluster) -> bool:
                name = getattr(placed, "cluster", "")
                return key is None or key in (name, name.rsplit("/", 1)[-1])

            want = Tally(since, until, group, keep)
            want.add(runs)
            got = await report.summed(Tally(since, until, group, keep), cluster)
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
            await report.summed(charted, cluster)
            assert charted.by_day() == [(d, Spend()) for d, _ in want.by_day()]  # none yet
            await report.series_summed(GroupDays(charted, names, others=True), cluster)
            assert charted.watched == want.watched
            for (day, mine), (theirs_day, theirs) in zip(
                charted.by_day(), want.by_day(), strict=True
            ):
                assert day == theirs_day and same(mine, theirs), (group.name, cluster, day)
