"""The spend ledger, checked against a week computed another way: the true cost of a pool
minute by minute, against what sweeps every five minutes record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handlers.changes.plan import ChangePlan
from handlers.changes.resize import ResizeDetail
from handlers.costs import PoolSeen
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.grammar import CommandError
from handlers.spend.asked import Cost, parse_cost
from handlers.spend.chart import daily
from handlers.spend.runs import HOUR, OpenRun, SpendRun, advance, closing, still_open
from handlers.spend.savings import savings
from handlers.spend.totals import by_label, by_pool, overall, totals
from tests.support.golden import assert_golden

MINUTE = 60.0
DAY = 24 * HOUR
WEEK = 7 * DAY
SWEEP = 5 * MINUTE
C1 = "projects/p/locations/r/modelDevelopmentClusters/train01"
B200 = 70.0  # a node-hour, about what an 8-GPU B200 node lists at
LOGIN = 0.40


def gpu_nodes(t: float) -> int:
    """The pool as it really was: 8 nodes on weekdays 08:10 to 19:50, 2 at night, none at
    the weekend."""
    day, hour = int(t // DAY) % 7, (t % DAY) / HOUR
    if day >= 5:
        return 0
    return 8 if 8 + 10 / 60 <= hour < 19 + 50 / 60 else 2


def quiet(t: float) -> bool:
    """Idle from 19:50 to midnight on weekdays (the night's two nodes wait for work)."""
    day, hour = int(t // DAY) % 7, (t % DAY) / HOUR
    return day < 5 and hour >= 19 + 50 / 60


DOWN = (2 * DAY + 10 * HOUR, 2 * DAY + 12 * HOUR)  # Wednesday 10:00 to 12:00: no sweep


def sweep_week() -> list[SpendRun]:
    """What the ledger holds after a week of sweeps (offset two minutes from the changes)."""
    open_runs: tuple[OpenRun, ...] = ()
    rows: list[SpendRun] = []
    t = 2 * MINUTE
    while t < WEEK:
        if DOWN[0] <= t < DOWN[1]:
            t += SWEEP
            continue
        pools = [PoolSeen("gpu", gpu_nodes(t), B200), PoolSeen("login", 1, LOGIN, compute=False)]
        open_runs, ended = advance(open_runs, t, pools, idle=quiet(t), interval=SWEEP)
        rows += closing(C1, "p/r", {"team": "vision"}, ended)
        t += SWEEP
    return rows + still_open(C1, "p/r", {"team": "vision"}, open_runs, WEEK, SWEEP)


def truth(since: float, until: float) -> tuple[float, float]:
    """The cost and idle cost minute by minute, but for the time no sweep watched: from one
    interval after the last sweep before the gap to the first sweep after it."""
    last_before = max(t for t in _sweeps() if t < DOWN[0])
    first_after = min(t for t in _sweeps() if t >= DOWN[1])
    cost = idle = 0.0
    t = since
    while t < until:
        if not (last_before + SWEEP <= t < first_after):
            spent = (gpu_nodes(t) * B200 + LOGIN) * MINUTE / HOUR
            cost += spent
            idle += gpu_nodes(t) * B200 * MINUTE / HOUR if quiet(t) else 0.0
        t += MINUTE
    return cost, idle


def _sweeps() -> list[float]:
    return [
        2 * MINUTE + n * SWEEP
        for n in range(int(WEEK // SWEEP))
        if not DOWN[0] <= 2 * MINUTE + n * SWEEP < DOWN[1]
    ]


def test_a_week_of_sweeps_adds_up_to_the_minute_by_minute_cost_within_one_percent() -> None:
    rows = sweep_week()
    spent = overall(totals(rows, 0.0, WEEK))
    cost, idle = truth(2 * MINUTE, WEEK)
    assert abs(spent.cost - cost) / cost < 0.01, (spent.cost, cost)
    assert abs(spent.idle - idle) / idle < 0.01, (spent.idle, idle)
    assert cost > 20_000  # a week of a B200 pool: the figure is not small by construction
    # few rows: a run is written when something changes, not at every sweep
    assert len(rows) < 60, len(rows)


def test_a_day_is_summed_from_the_runs_that_overlap_it() -> None:
    rows = sweep_week()
    tuesday = (1 * DAY, 2 * DAY)
    spent = overall(totals(rows, *tuesday))
    cost, _ = truth(*tuesday)
    assert abs(spent.cost - cost) / cost < 0.01
    # Saturday: the login node, and Friday night's two nodes until the first sweep saw them
    # gone (an observation holds until the next one: at most one interval of the change)
    saturday = overall(totals(rows, 5 * DAY, 6 * DAY))
    cost, _ = truth(5 * DAY, 6 * DAY)
    assert abs(cost - 24 * LOGIN) < 1e-6
    assert 0 < saturday.cost - cost <= 2 * B200 * SWEEP / HOUR


def test_groupings_add_up_to_the_whole() -> None:
    rows = sweep_week()
    whole = overall(totals(rows, 0.0, WEEK)).cost
    pools = totals(rows, 0.0, WEEK, by_pool)
    assert list(pools) == ["train01 / gpu", "train01 / login"]  # largest first
    assert abs(sum(s.cost for s in pools.values()) - whole) < 1e-6
    teams = totals(rows, 0.0, WEEK, by_label("team"))
    assert list(teams) == ["team=vision"]
    assert list(totals(rows, 0.0, WEEK, by_label("env"))) == ["env (none)"]


def test_a_long_gap_is_not_counted_and_a_change_closes_the_run() -> None:
    seen = [PoolSeen("gpu", 4, B200)]
    runs, ended = advance((), 0.0, seen, idle=False, interval=SWEEP)
    assert ended == [] and runs == (OpenRun("gpu", 0.0, 4, B200, False, 0.0),)
    runs, ended = advance(runs, SWEEP, seen, idle=False, interval=SWEEP)
    assert ended == [] and runs[0].start == 0.0  # nothing changed: the run goes on
    later = 10 * HOUR  # the bot was down
    runs, ended = advance(runs, later, seen, idle=False, interval=SWEEP)
    assert ended == [(OpenRun("gpu", 0.0, 4, B200, False, SWEEP), 2 * SWEEP)]
    assert runs[0].start == later
    runs, ended = advance(runs, later + SWEEP, [], idle=False, interval=SWEEP)
    gone = OpenRun("gpu", later, 4, B200, False, later)
    assert runs == () and ended == [(gone, later + SWEEP)]
    quiet_now = advance(runs, later, seen, idle=True, interval=SWEEP)[0]
    login = advance(
        (), 0.0, [PoolSeen("login", 1, LOGIN, compute=False)], idle=True, interval=SWEEP
    )
    assert quiet_now[0].idle and not login[0][0].idle  # the login pool is never idle


def test_an_unknown_price_is_counted_in_node_hours_not_dollars() -> None:
    run = SpendRun(C1, "gpu", 0.0, 2 * HOUR, 3, None, False)
    spent = overall(totals([run], 0.0, HOUR))
    assert spent.cost == 0.0 and spent.node_hours == 3.0 and spent.unpriced == 3.0


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ("since 5y", "'5y' is not a time back such as 7d or 12h"),
        ("train01 by", "cost takes 'by': use since 30d or by pool"),
        ("by label", "by label needs the label's key: by label team"),
        ("by colour", "cost by 'colour': use by pool, target or label KEY"),
        ("Train_01", "cluster"),
    ],
)
def test_bad_cost_words_get_the_reason(words: str, said: str) -> None:
    with pytest.raises(CommandError) as refused:
        parse_cost(words.split())
    assert said in refused.value.reason and refused.value.subcommand == "cost"


def test_cost_words() -> None:
    assert parse_cost([]) == Cost()
    assert parse_cost(["train01", "since", "2w", "by", "pool"]) == Cost("train01", 14 * DAY, "pool")
    assert parse_cost(["by", "label", "team", "since", "12h"]) == Cost(
        None, 12 * HOUR, "label", "team"
    )


def succeeded(
    request_id: str, origin: Origin, before: float, after: float, at: float, cluster: str = C1
) -> Any:
    """A succeeded change of a cluster (train01 unless told) as the store keeps it: its plan's
    costs, and when it ended."""
    plan = ChangePlan(
        cluster=cluster,
        detail=ResizeDetail(),
        cost_before=before,
        cost_after=after,
        fingerprint="f",
    )
    return ApprovalRequest(
        id=request_id,
        plan=plan,
        requester="U0ALICE",
        channel="C",
        created_at=at - 60,
        expires_at=at + 3600,
        state=RequestState.SUCCEEDED,
        origin=origin,
        finished_at=at,
    )


def test_a_remedy_saves_until_the_next_change_and_a_schedule_until_its_wake() -> None:
    requests = [
        succeeded("r-remedy", Origin.IDLE, 100.0, 0.5, 10 * HOUR),  # scaled to zero at 10:00
        succeeded("r-manual", Origin.COMMAND, 0.5, 100.0, 14 * HOUR),  # someone scales it up
        succeeded("r-off", Origin.SCHEDULE, 100.0, 0.5, 20 * HOUR),  # the schedule's off
        succeeded("r-on", Origin.SCHEDULE, 0.5, 100.0, 32 * HOUR),  # and its on, 12 h later
        succeeded("r-growth", Origin.COMMAND, 100.0, 150.0, 40 * HOUR),  # costs more: no saving
    ]
    found = savings(requests, {C1: (("team", "ml"),)})
    assert [(s.request_id, s.cause, s.end) for s in found] == [
        ("r-remedy", "idle remedies", 14 * HOUR),
        ("r-off", "schedules", 32 * HOUR),
    ]
    groups = totals([], 0, 48 * HOUR, by_label("team"), found)
    assert groups["team=ml"].saved == pytest.approx(99.5 * 4 + 99.5 * 12)
    # a period that cuts the night in two counts only its part
    assert totals([], 0, 26 * HOUR, saved=found)["train01"].saved == pytest.approx(99.5 * 10)


def test_the_charts_days_are_the_ledgers_sums() -> None:
    """The chart's data, pinned by a golden file: the week's trace day by day, a remedy's
    and a schedule's saving; each day's figures add up to the table's total."""
    runs = sweep_week()
    requests = [
        succeeded("r-remedy", Origin.IDLE, 140.4, 0.4, 5 * DAY + 10 * HOUR),  # Saturday 10:00
        succeeded("r-back", Origin.COMMAND, 0.4, 140.4, 6 * DAY + 8 * HOUR),
    ]
    saved = savings(requests)
    chart = daily(runs, saved, 0.0, WEEK, "train01, last 7d")
    assert_golden(Path(__file__).parent / "golden" / "charts" / "week.json", chart.to_dict())
    whole = overall(totals(runs, 0.0, WEEK, saved=saved))
    assert sum(d.spend for d in chart.days) == pytest.approx(whole.cost)
    assert sum(d.idle for d in chart.days) == pytest.approx(whole.idle)
    assert sum(d.saved for d in chart.days) == pytest.approx(140.0 * 22)
    lines = chart.csv().splitlines()
    assert lines[0] == "day,watched,spend_usd,idle_usd,saved_usd" and len(lines) == 8
    assert lines[6].startswith("1970-01-06,yes,")  # Saturday, the day of the remedy


def _runs_and_savings(seed: int) -> tuple[list[SpendRun], list[Any], float, float]:
    """Runs of several clusters and pools, some longer than a day, some unpriced, and the
    savings of remedies over them, over about three weeks."""
    import random

    rng = random.Random(seed)
    start = 1_700_000_000.0 + rng.uniform(0, DAY)
    runs = []
    ends: dict[tuple[str, str], float] = {}  # a pool's runs follow each other, as swept
    for n in range(300):
        cluster, pool = f"{C1[:-2]}{n % 7:02d}", rng.choice(["gpu", "login"])
        begin = max(start + rng.uniform(0, 20 * DAY), ends.get((cluster, pool), 0.0))
        runs.append(
            SpendRun(
                cluster,
                pool,
                begin,
                begin + rng.choice([SWEEP, HOUR, 5 * HOUR, 2 * DAY]),
                rng.randint(0, 8),
                rng.choice([B200, LOGIN, None]),
                rng.random() < 0.4,
                rng.choice(["p/us-central1", "p/europe-west4"]),
                (("team", rng.choice(["vision", "speech"])),),
            )
        )
        ends[cluster, pool] = runs[-1].end
    moments = sorted(start + rng.uniform(0, 20 * DAY) for _ in range(12))
    done = [  # train01 scaled down by a remedy, up by hand, in turn
        succeeded(f"r-{n}", Origin.IDLE, 100.0, 0.5, at)
        if n % 2 == 0
        else succeeded(f"r-{n}", Origin.COMMAND, 0.5, 100.0, at)
        for n, at in enumerate(moments)
    ]
    found = savings(done, {C1: (("team", "vision"),)})
    assert found  # the remedies saved something within the period
    return runs, found, start + 2 * HOUR, start + 19.5 * DAY


@pytest.mark.parametrize("seed", range(5))
def test_a_report_folded_a_part_at_a_time_sums_as_the_whole(seed: int) -> None:
    """A report reads the ledger a part at a time and passes over each run once (a year of
    runs is never held, nor summed once a day): its groups and its chart's days are what the
    sums over all the runs at once give."""
    from handlers.spend.chart import chart_of
    from handlers.spend.totals import Tally, by_target

    runs, saved, since, until = _runs_and_savings(seed)
    for group in (by_pool, by_target, by_label("team")):
        tally = Tally(since, until, group)
        for at in range(0, len(runs), 37):
            tally.add(runs[at : at + 37])
        folded, whole = tally.totals(saved), totals(runs, since, until, group, saved)
        assert list(folded) == list(whole)
        for name, spend in whole.items():
            assert folded[name].cost == pytest.approx(spend.cost)
            assert folded[name].idle == pytest.approx(spend.idle)
            assert folded[name].saved == pytest.approx(spend.saved)
            assert folded[name].unpriced == pytest.approx(spend.unpriced)
    tally = Tally(since, until)
    tally.add(runs)
    days = chart_of(tally, saved, "t").days
    first = since - since % DAY
    assert [d.start for d in days] == [first + n * DAY for n in range(len(days))]
    assert days[-1].start < until <= days[-1].start + DAY
    for day in days:  # each day as the sums of that day alone
        alone = totals(runs, max(day.start, since), min(day.start + DAY, until), saved=saved)
        expected = overall(alone)
        assert day.spend == pytest.approx(expected.cost)
        assert day.idle == pytest.approx(expected.idle)
        assert day.saved == pytest.approx(expected.saved)


def test_a_long_period_is_drawn_a_week_a_bar_and_kept_a_day_a_row() -> None:
    """A chart over 400 days is drawn with 60 bars at most (a week each, the same dollars),
    while its CSV keeps one row a day; 92 days or fewer are drawn a day a bar."""
    from handlers.spend.chart import DAILY_BARS

    run = SpendRun(C1, "gpu", 0.0, 400 * DAY, 2, B200, False, "p/r")
    year = daily([run], [], 0.0, 400 * DAY, "train01, last 400d")
    assert len(year.days) == 400 and len(year.csv().splitlines()) == 401
    bars = year.bars()
    assert year.per == "week" and len(bars) == 58
    assert sum(b.spend for b in bars) == pytest.approx(sum(d.spend for d in year.days))
    assert bars[1].spend == pytest.approx(7 * 24 * 2 * B200)
    quarter = daily([run], [], 0.0, DAILY_BARS * DAY, "train01, last 92d")
    assert quarter.per == "day" and quarter.bars() == quarter.days


def test_days_no_sweep_watched_are_not_watched_never_zero() -> None:
    """Watched only the last three of ten days: the seven before have no figures in the
    chart, its CSV and its golden data, and the drawing greys them; the sums are the three."""
    run = SpendRun(C1, "gpu", 7 * DAY, 10 * DAY, 2, B200, False, "p/r")
    chart = daily([run], [], 0.0, 10 * DAY, "train01, last 10d")
    assert [d.watched for d in chart.days] == [False] * 7 + [True] * 3
    assert chart.watched == 3 and "not watched" in chart.note
    lines = chart.csv().splitlines()
    assert lines[1] == "1970-01-01,no,,," and lines[8] == "1970-01-08,yes,3360.00,0.00,0.00"
    assert chart.to_dict()["days"][0] == ["01 Jan", None, None, None]  # type: ignore[index]
    whole = daily([run], [], 0.0, 10 * DAY, "t")
    assert sum(d.spend for d in whole.days) == pytest.approx(3 * 24 * 2 * B200)
    # a week of a long chart is watched when any of its days is
    year = daily([run], [], 0.0, 120 * DAY, "t")
    assert [b.watched for b in year.bars()][:3] == [False, True, False]


def test_a_chart_across_new_year_names_the_year_on_its_axis() -> None:
    from datetime import UTC, datetime

    start = datetime(2026, 12, 20, tzinfo=UTC).timestamp()
    run = SpendRun(C1, "gpu", start, start + 25 * DAY, 1, B200, False, "p/r")
    across = daily([run], [], start, start + 25 * DAY, "t")
    labels = across.labels(across.bars())
    assert labels[0] == "20 Dec 2026" and labels[-1] == "13 Jan 2027"
    within = daily([run], [], start, start + 5 * DAY, "t")
    assert within.labels(within.bars())[0] == "20 Dec"


@pytest.mark.parametrize("seed", range(3))
def test_the_chart_is_grouped_as_the_table(seed: int) -> None:
    """By label, by pool: each day's bar is the table's first groups' spend and the rest's,
    and they add up to the day's priced spend."""
    from handlers.spend.chart import chart_of
    from handlers.spend.series import GroupDays
    from handlers.spend.totals import Tally

    runs, saved, since, until = _runs_and_savings(seed)
    for group, first in ((by_label("team"), 7), (by_pool, 3)):
        tally = Tally(since, until, group)
        tally.add(runs)
        table = tally.totals(saved)
        series = GroupDays(tally, list(table)[:first], others=len(table) > first)
        for at in range(0, len(runs), 50):
            series.add(runs[at : at + 50])
        chart = chart_of(tally, saved, "t", series)
        assert chart.series[: len(list(table)[:first])] == tuple(list(table)[:first])
        for day in chart.days:
            assert sum(day.groups) == pytest.approx(day.spend)
        for at, name in enumerate(list(table)[:first]):
            assert sum(d.groups[at] for d in chart.days) == pytest.approx(table[name].cost)
        head = chart.csv().splitlines()[0].split(",")
        assert len(head) == 5 + len(chart.series)


def test_the_drawing_greys_days_not_watched_and_stacks_the_groups() -> None:
    from bot.charts import draw
    from handlers.spend.chart import chart_of
    from handlers.spend.series import GroupDays
    from handlers.spend.totals import Tally

    run = SpendRun(C1, "gpu", 7 * DAY, 10 * DAY, 2, B200, False, "p/r")
    plain = daily([run], [], 0.0, 10 * DAY, "train01, last 10d")
    tally = Tally(0.0, 10 * DAY, by_pool)
    tally.add([run])
    series = GroupDays(tally, list(tally.totals()), others=False)
    series.add([run])
    grouped = chart_of(tally, [], "train01, last 10d", series)
    pictures = {draw(plain), draw(grouped)}
    assert len(pictures) == 2 and all(p.startswith(b"\x89PNG") for p in pictures)
