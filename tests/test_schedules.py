"""Off-hours schedules on the core, with a manual clock, APScheduler's own cron trigger for
the calendar and a real SQLite store: the words, the times across DST changes, a schedule's
card, its nights (a job running at "off", Skip and Postpone, a wake missed while down) and
two replicas firing once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.calendar import CronCalendar
from bot.store import Store
from handlers import dispatch
from handlers.capabilities import REGISTRY
from handlers.costs import money
from handlers.dispatch import read
from handlers.entities import RequestState
from handlers.forms.choices import Forms
from handlers.forms.flow import FormFlow, state_of
from handlers.forms.model import Entry
from handlers.grammar import CommandError
from handlers.policy import Policy
from handlers.schedules.capability import SCHEDULES_CAPABILITY
from handlers.schedules.commands import AskSchedule, ChangeSchedule
from handlers.schedules.model import Phase, Schedule, ScheduleState
from handlers.schedules.nights import LOOKS, NOTICE_LEAD, RETRY
from handlers.schedules.times import Weekly, parse_weekly
from tests.conftest import ManualClock
from tests.support.text_adapter import form_text, text
from tests.test_services_unit import ALERTS, C1, INFRA, POLICY, Bot, make_bot, poll
from tests.test_store import open_store

BERLIN = ZoneInfo("Europe/Berlin")
WORDS = "schedule c1 gpu off Mon-Fri 20:00 on Mon-Fri 08:00 tz Europe/Berlin"


def at(*when: int) -> float:
    """Epoch seconds of a wall time in Berlin."""
    return datetime(*when, tzinfo=BERLIN).timestamp()  # type: ignore[misc]


def berlin(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, BERLIN)


# -- words ------------------------------------------------------------------------------------


def parse(words: str) -> Any:
    """The command the words make, as the dispatcher reads them, or its CommandError."""
    found = read(words)
    if found.error is not None:
        raise found.error
    return found.command


def test_the_words_of_a_schedule() -> None:
    asked = parse(WORDS)
    assert isinstance(asked, AskSchedule)
    assert (asked.cluster, asked.pool, asked.zone) == ("c1", "gpu", "Europe/Berlin")
    assert asked.off == Weekly(frozenset(range(5)), 20, 0)
    assert str(asked.on) == "Mon-Fri 08:00"
    quoted = parse('schedule c1 off "Fri 19:30" on “Mon 07:00” tz europe/berlin')
    assert isinstance(quoted, AskSchedule)
    assert (quoted.pool, str(quoted.off), str(quoted.on)) == (None, "Fri 19:30", "Mon 07:00")
    assert quoted.zone == "Europe/Berlin"  # as the tz database spells it
    daily = parse("schedule c1 off 22:00 on 06:00")
    assert isinstance(daily, AskSchedule) and daily.zone == "UTC"
    assert str(daily.off) == "daily 22:00"
    assert parse("schedule pause sch-1a2b3c4d") == ChangeSchedule("pause", "sch-1a2b3c4d")
    assert parse_weekly(["Fri-Mon", "20:00"], "schedule").days == frozenset({4, 5, 6, 0})


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        ("schedule c1 off Mon-Fri 20:00", "schedule needs off DAYS HH:MM and on DAYS HH:MM"),
        ("schedule c1 off Mon-Fry 20:00 on 08:00", "'Mon-Fry' is not a set of days"),
        ("schedule c1 off Mon 24:00 on 08:00", "'24:00' is not a time of day"),
        ("schedule c1 off 20:00 on 08:00 tz Mars/Olympus", "'Mars/Olympus' is not a time zone"),
        ("schedule c1 off 20:00 on 20:00", "off and on are the same time"),
        ("schedule c1 on 08:00 off 20:00", "write off … before on …"),
        ("schedule c1 off on 08:00", "off takes DAYS HH:MM (Mon-Fri 20:00) or HH:MM, not nothing"),
    ],
)
def test_bad_words_get_one_line_and_the_usage(words: str, reason: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse(words)
    assert caught.value.reason.startswith(reason), caught.value.reason
    usage = REGISTRY.usage(caught.value)
    assert usage is not None and "off [DAYS] HH:MM on" in usage


# -- time -------------------------------------------------------------------------------------


def test_a_weekday_time_keeps_its_wall_clock_across_the_spring_change() -> None:
    calendar, off = CronCalendar(), Weekly(frozenset(range(5)), 20, 0)
    moment, fired = at(2026, 3, 26, 12, 0), []
    for _ in range(3):
        moment = calendar.next_time(off, "Europe/Berlin", moment)
        fired.append(berlin(moment))
    assert [f.strftime("%a %d %H:%M %Z") for f in fired] == [
        "Thu 26 20:00 CET",
        "Fri 27 20:00 CET",
        "Mon 30 20:00 CEST",  # the weekend is skipped; the clocks moved on Sunday
    ]
    assert fired[2].timestamp() - fired[1].timestamp() == (3 * 24 - 1) * 3600


def test_a_time_the_clocks_skip_comes_once_when_they_land_past_it() -> None:
    calendar, nightly = CronCalendar(), Weekly(frozenset(range(7)), 2, 30)
    moment = calendar.next_time(nightly, "Europe/Berlin", at(2026, 3, 28, 12, 0))
    assert berlin(moment).strftime("%d %H:%M %Z") == "29 03:30 CEST"  # 02:30 never came
    again = calendar.next_time(nightly, "Europe/Berlin", moment)
    assert berlin(again).strftime("%d %H:%M %Z") == "30 02:30 CEST"


def test_a_time_the_clocks_repeat_comes_once() -> None:
    """APScheduler's cron fires 02:30 twice on the night clocks go back; a schedule once."""
    calendar, nightly = CronCalendar(), Weekly(frozenset(range(7)), 2, 30)
    first = calendar.next_time(nightly, "Europe/Berlin", at(2026, 10, 24, 12, 0))
    assert datetime.fromtimestamp(first, UTC).strftime("%d %H:%M") == "25 00:30"  # CEST
    second = calendar.next_time(nightly, "Europe/Berlin", first)
    assert berlin(second).strftime("%d %H:%M %Z") == "26 02:30 CET"


# -- a schedule's life ------------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store("sqlite", tmp_path) as opened:
        yield opened


def scheduled_bot(clock: ManualClock, store: Store, **extra: Any) -> Bot:
    database = None if "same_world_as" in extra else store
    policy = extra.pop("policy", None) or Policy.model_validate(POLICY)
    bot = make_bot(clock, policy, schedules=store, database=database, **extra)
    if "same_world_as" not in extra:
        pool = bot.plane.clusters[C1].node_pools[0]
        assert pool.scaling_spec is not None
        pool.scaling_spec.min_node_count, pool.scaling_spec.max_node_count = 1, 4
        bot.activity.queues[C1] = (0, 0)  # type: ignore[attr-defined]
    return bot


async def in_force(bot: Bot, store: Store, words: str = WORDS) -> Schedule:
    """Ask for the schedule, approve its card, and let a check put it in force."""
    assert await bot.ask("U0ALICE", words) is None  # the card is the answer
    request = await bot.only_request()
    assert "Schedule request: c1 / gpu" in text(bot.cards()[-1][1])
    await bot.click("U0BOB", "approve", request.id)
    assert (await bot.store.get_request(request.id)).state == RequestState.SUCCEEDED
    assert bot.plane.patches == []  # approving a schedule sends nothing
    await check(bot)
    [schedule] = await store.schedules()
    assert schedule.state == ScheduleState.ACTIVE and schedule.approved_by == "U0BOB"
    return schedule


async def check(bot: Bot) -> None:
    assert bot.services.of(SCHEDULES_CAPABILITY) is not None
    await bot.services.of(SCHEDULES_CAPABILITY).check_all()


async def finish_change(bot: Bot) -> None:
    """The control plane ends the operation started last; the tracker sees it end."""
    operation = list(bot.plane.started)[-1]
    bot.plane.finish(operation)
    bot.clock.advance(2)
    await poll(bot)


def thread(bot: Bot, schedule: Schedule) -> list[str]:
    return [text(r) for _, _, r, t in bot.messenger.posted if t == schedule.thread]


def bounds(bot: Bot) -> tuple[int, int]:
    pool = bot.plane.clusters[C1].pool("gpu")
    assert pool is not None
    return pool.min_nodes, pool.max_nodes


async def test_a_schedules_card_shows_its_next_five_nights_and_its_saving(
    clock: ManualClock, store: Store
) -> None:
    clock.now = at(2026, 3, 26, 10, 0)  # a Thursday; the clocks move on Sunday
    bot = scheduled_bot(clock, store)
    await bot.ask("U0ALICE", WORDS)
    card = text(bot.cards()[-1][1])
    assert "Off Mon-Fri 20:00, on Mon-Fri 08:00 (Europe/Berlin): gpu to zero nodes" in card
    for night in ("Thu 26 Mar 20:00 CET", "Fri 27 Mar 20:00 CET", "Mon 30 Mar 20:00 CEST"):
        assert night in card
    assert "Mon 30 Mar 08:00 CEST" in card  # Friday's off lasts the weekend
    # a week from Thursday 10:00: four weeknights of 12 h, and a weekend of 60 h less the
    # hour the clocks skip on Sunday
    assert "107 h at zero" in card
    price = bot.services.approvals.prices.node_hour(bot.plane.clusters[C1].node_pools[0])
    assert price is not None
    assert f"Saves ~${2 * price * 107:,.0f} a week" in card  # the 2 nodes that exist, at list price


async def test_a_night_off_and_on_through_the_change_path(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)  # Monday
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    assert schedule.next_off == at(2026, 3, 23, 20, 0)
    assert "in force; first off Mon 23 Mar 20:00 CET" in thread(bot, schedule)[-1]

    clock.now = at(2026, 3, 23, 20, 0) - NOTICE_LEAD + 60
    await check(bot)
    await check(bot)  # the notice is posted once
    notices = [t for t in thread(bot, schedule) if "Skip tonight" in t]
    assert len(notices) == 1 and "[Postpone 2 h](schedule_postpone)" in notices[0]

    clock.now = at(2026, 3, 23, 20, 0)
    bot.activity.queues[C1] = (1, 0)  # type: ignore[attr-defined]
    await check(bot)
    assert bot.plane.patches == []  # running work is never cut off
    assert "not scaled down: Slurm has 1 running and 0 pending jobs" in thread(bot, schedule)[-1]
    clock.advance(RETRY - 1)
    await check(bot)
    assert len([t for t in thread(bot, schedule) if "not scaled down" in t]) == 1  # not yet due

    bot.activity.queues[C1] = (0, 0)  # type: ignore[attr-defined]
    clock.advance(1)
    await check(bot)
    assert bot.plane.patches == [(C1, ("node_pools",))]
    assert bounds(bot) == (0, 0)
    off = await bot.store.get_request((await store.get_schedule(schedule.id)).firing_request)
    assert off.requester == f"schedule:{schedule.id}" and off.decided_by == "U0BOB"
    await finish_change(bot)
    await check(bot)
    asleep = await store.get_schedule(schedule.id)
    assert asleep.phase == Phase.ASLEEP and asleep.kept == {"gpu": (1, 4)}
    # the night's card and how it ended are told in the schedule's thread, not the channel
    lines = thread(bot, schedule)
    assert any("asleep: gpu at zero nodes; back on at Tue 24 Mar 08:00 CET" in t for t in lines)
    assert any(t.startswith("# Resize request: c1 / gpu") for t in lines)
    assert "*c1*: done, finished in 2 s" in lines

    clock.now = at(2026, 3, 24, 8, 0)
    await check(bot)
    assert bounds(bot) == (1, 4)  # exactly the bounds it had, MIN:MAX
    await finish_change(bot)
    await check(bot)
    awake = await store.get_schedule(schedule.id)
    assert awake.phase == Phase.AWAKE and awake.next_off == at(2026, 3, 24, 20, 0)
    assert len(bot.plane.patches) == 2
    assert 11.9 < awake.saved_hours < 12.1 and awake.saved > 0
    audit = [e.action for e in await bot.store.audit_log(cluster=C1)]
    assert "schedule_started" in audit
    report = text(await bot.ask("U0CAROL", "cost c1 since 7d"))
    night = money(awake.saved, per_hour=False)  # 12 h of the 2 nodes that existed at off
    assert f" {night} " in report, report
    assert "The chart and its numbers (CSV) are shared in this conversation." in report
    [(channel, files, comment)] = bot.messenger.shared
    assert channel == INFRA and f"{night} saved" in comment
    (png_name, picture), (csv_name, numbers) = files
    assert png_name == "cost-c1-7d.png" and isinstance(picture, bytes)
    assert picture.startswith(b"\x89PNG\r\n\x1a\n") and len(picture) > 10_000
    assert csv_name == "cost-c1-7d.csv" and isinstance(numbers, str)
    # a column for each group of the table (by pool for one cluster)
    assert numbers.splitlines()[0].startswith("day,watched,spend_usd,idle_usd,saved_usd,c1_")


async def test_a_queue_busy_past_the_limit_skips_the_night(
    clock: ManualClock, store: Store
) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    bot.activity.queues[C1] = (0, 3)  # type: ignore[attr-defined]
    clock.now = at(2026, 3, 23, 20, 0)
    for _ in range(LOOKS):
        await check(bot)
        clock.advance(RETRY)
    assert bot.plane.patches == []
    said = thread(bot, schedule)[-1]
    assert "skipped tonight: Slurm has 0 running and 3 pending jobs" in said
    assert "next off Tue 24 Mar 20:00 CET" in said
    assert (await store.get_schedule(schedule.id)).phase == Phase.AWAKE


async def test_skip_tonight_and_postpone_from_the_notice(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    tonight = int(at(2026, 3, 23, 20, 0))
    value = f"{schedule.id}|{tonight}"
    refused = await bot.click("U0CAROL", "schedule_skip", value)  # nobody's operator
    assert refused is not None and "needs the operator role" in text(refused)
    answer = await bot.click("U0ALICE", "schedule_postpone", value)
    assert "postponed to Mon 23 Mar 22:00 CET" in text(answer)
    late = await bot.click("U0ALICE", "schedule_skip", value)  # the notice is stale now
    assert "passed or was changed" in text(late)
    later = int(at(2026, 3, 23, 22, 0))
    skipped = await bot.click("U0ALICE", "schedule_skip", f"{schedule.id}|{later}")
    assert "skipped tonight; next off Tue 24 Mar 20:00 CET" in text(skipped)
    clock.now = at(2026, 3, 23, 22, 30)
    await check(bot)
    assert bot.plane.patches == []
    actions = [e.action for e in await bot.store.audit_log(cluster=C1)]
    assert {"schedule_postponed", "schedule_skipped"} <= set(actions)


async def test_a_wake_missed_while_down_runs_at_start(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 27, 10, 0)  # Friday
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    clock.now = at(2026, 3, 27, 20, 0)
    await check(bot)
    await finish_change(bot)
    await check(bot)
    assert (await store.get_schedule(schedule.id)).next_on == at(2026, 3, 30, 8, 0)
    # every replica is down from Friday night until Monday noon, past the clock change
    clock.now = at(2026, 3, 30, 12, 0)
    restarted = scheduled_bot(clock, store, same_world_as=bot)
    await check(restarted)
    assert bounds(restarted) == (1, 4)
    await finish_change(restarted)
    await check(restarted)
    woken = await store.get_schedule(schedule.id)
    assert woken.phase == Phase.AWAKE and woken.next_off == at(2026, 3, 30, 20, 0)


async def test_two_replicas_fire_each_night_once(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    first = scheduled_bot(clock, store)
    await in_force(first, store)
    second = scheduled_bot(clock, store, same_world_as=first, owner="replica-b")
    clock.now = at(2026, 3, 23, 20, 0)
    await asyncio.gather(check(first), check(second), check(first), check(second))
    assert len(first.plane.patches) == 1
    await finish_change(first)
    clock.now = at(2026, 3, 24, 8, 0)
    await asyncio.gather(check(first), check(second))
    await asyncio.gather(check(first), check(second))
    assert len(first.plane.patches) == 2


async def test_pausing_an_asleep_schedule_wakes_it(clock: ManualClock, store: Store) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    clock.now = at(2026, 3, 23, 20, 0)
    await check(bot)
    await finish_change(bot)
    await check(bot)
    answer = await bot.ask("U0ALICE", f"schedule pause {schedule.id}")
    assert "paused" in text(answer) and "It wakes now" in text(answer)
    await check(bot)
    assert bounds(bot) == (1, 4)
    listing = text(await bot.ask("U0CAROL", "schedules"))
    assert schedule.id in listing and "c1 / gpu" in listing
    paused = await store.get_schedule(schedule.id)
    assert paused.state == ScheduleState.PAUSED
    assert "schedule_paused" in [e.action for e in await bot.store.audit_log(cluster=C1)]


async def test_the_idle_alert_knows_the_schedule(clock: ManualClock, store: Store) -> None:
    """Idle with a schedule in force: the alert says when it goes off anyway. Asleep by it:
    not idle, and the report says why."""
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    schedule = await in_force(bot, store)
    await bot.services.sweeper.sweep(force=True)
    clock.advance(11 * 60)  # past the policy's 10 idle minutes
    await bot.services.sweeper.sweep(force=True)
    [alert] = [text(r) for c, _, r, _ in bot.messenger.posted if c == ALERTS]
    assert f"Its schedule {schedule.id} takes c1 / gpu to zero at Mon 23 Mar 20:00 CET" in alert
    clock.now = at(2026, 3, 23, 20, 0)
    await check(bot)
    await finish_change(bot)
    await check(bot)
    await bot.services.sweeper.sweep(force=True)
    report = text(await bot.ask("U0ALICE", "idle"))
    assert f"asleep on its off-hours schedule {schedule.id} until Tue 24 Mar 08:00 CET" in report


async def test_a_schedule_form_makes_the_same_card_as_the_words(
    clock: ManualClock, store: Store
) -> None:
    clock.now = at(2026, 3, 23, 10, 0)
    bot = scheduled_bot(clock, store)
    core = bot.services
    flow = FormFlow(Forms(core.directory, core.approvals.prices), core.dispatcher, None)
    read = dispatch.read("schedule c1")  # words missing: the form asks for the rest
    assert read.form is not None and read.error is not None
    assert dispatch.read(WORDS).form is None  # every word given: no form
    state = state_of(read.form, INFRA)
    filled = form_text(await flow.filled(state, None))
    assert filled.startswith("# Off-hours schedule")
    assert "[Off on (Mon-Fri, Sat,Sun, daily): line = Mon-Fri]" in filled
    assert "  - gpu · a3-ultragpu-8g" in filled and "login" not in filled.split("Node pools")[1]
    entries = {
        "cluster": Entry(choice=C1),
        "pool": Entry(choice="gpu"),
        "off_days": Entry(text="Mon-Fri"),
        "off_time": Entry(text="25:00"),
        "on_days": Entry(text="Mon-Fry"),
        "on_time": Entry(text="08:00"),
        "tz": Entry(text="Europe/Berlin"),
    }
    wrong = await flow.submitted("U0ALICE", state, entries)
    assert set(wrong) == {"off_time", "on_days"} and "'25:00' is not a time" in wrong["off_time"]
    assert bot.cards() == []
    fine = {**entries, "off_time": Entry(text="20:00"), "on_days": Entry(text="Mon-Fri")}
    assert await flow.submitted("U0ALICE", state, fine) == {}
    [(_, card)] = bot.cards()
    assert "Schedule request: c1 / gpu" in text(card)
    assert "Off Mon-Fri 20:00, on Mon-Fri 08:00 (Europe/Berlin)" in text(card)


async def test_a_clusters_label_asks_for_the_policys_schedule(
    clock: ManualClock, store: Store
) -> None:
    """``clusterbot-schedule: nights`` on a cluster offers the policy's schedule nights on a
    card, once; approved, it is in force; the label taken off ends it."""
    policy = {
        **POLICY,
        "schedules": {"nights": {"off": "Mon-Fri 19:00", "on": "Mon-Fri 07:30", "tz": "UTC"}},
    }
    clock.now = at(2026, 3, 23, 10, 0)
    bot = make_bot(clock, Policy.model_validate(policy), schedules=store)
    bot.activity.queues[C1] = (2, 0)  # type: ignore[attr-defined]
    bot.plane.clusters[C1].labels = {"clusterbot-schedule": "nights"}
    await bot.services.sweeper.sweep(force=True)  # each sweep looks at the labels it lists
    await check(bot)
    [(_, card)] = [(ts, r) for ts, r in bot.cards() if "Schedule request" in r.summary]
    shown = text(card)
    assert "label clusterbot-schedule=nights asks to put on an off-hours schedule" in shown
    assert "Off Mon-Fri 19:00, on Mon-Fri 07:30 (UTC): gpu to zero nodes" in shown
    clock.advance(300)
    await bot.services.sweeper.sweep(force=True)
    await check(bot)
    assert len([r for _, r in bot.cards() if "Schedule request" in r.summary]) == 1  # once
    request = await bot.only_request()
    await bot.click("U0BOB", "approve", request.id)
    await check(bot)
    [schedule] = await store.schedules()
    assert schedule.state == ScheduleState.ACTIVE and schedule.label == "nights"
    bot.plane.clusters[C1].labels = {}
    clock.advance(300)
    await bot.services.sweeper.sweep(force=True)
    await check(bot)
    ended = await store.get_schedule(schedule.id)
    assert ended is not None and ended.state == ScheduleState.ENDED
    assert "schedule_ended" in [e.action for e in await bot.store.audit_log(cluster=C1)]


def test_a_policy_schedule_is_checked_when_the_policy_is_read() -> None:
    """The schedules capability's table is checked with the policy: by the registry's
    sections, and by the service built on it, which refuses a policy that is not whole."""
    sections = REGISTRY.sections.values()
    bad_days = Policy.model_validate(
        {"schedules": {"nights": {"off": "Mon-Fry 19:00", "on": "07:00"}}}
    )
    [problem] = bad_days.problems(sections)
    assert problem.startswith("schedules.nights: ") and "'Mon-Fry' is not a set of days" in problem
    bad_name = Policy.model_validate({"schedules": {"Nights EU": {"off": "19:00", "on": "07:00"}}})
    [problem] = bad_name.problems(sections)
    assert "cannot be a label's value" in problem
    with pytest.raises(ValueError, match=r"the policy is not whole: .*cannot be a label's value"):
        make_bot(ManualClock(), bad_name)


async def test_a_week_of_nights_across_the_clocks_change(clock: ManualClock, store: Store) -> None:
    """A schedule run for a week, looked at every ten minutes, across the night Berlin's
    clocks go forward: each weeknight goes off at 20:00 and comes back at 08:00 local time,
    the weekend sleeps from Friday to Monday, and every resize is sent once."""
    clock.now = at(2026, 3, 23, 9, 0)  # Monday; the clocks go forward on Sunday 29 March
    bot = scheduled_bot(clock, store)
    await in_force(bot, store)
    sent: list[str] = []
    end = at(2026, 3, 31, 9, 0)
    while clock.now < end:
        await check(bot)
        if len(bot.plane.patches) > len(sent):
            sent.append(berlin(clock.now).strftime("%a %H:%M %Z") + f" {bounds(bot)}")
            await finish_change(bot)
        clock.advance(600)
    assert sent == [
        "Mon 20:00 CET (0, 0)",
        "Tue 08:00 CET (1, 4)",
        "Tue 20:00 CET (0, 0)",
        "Wed 08:00 CET (1, 4)",
        "Wed 20:00 CET (0, 0)",
        "Thu 08:00 CET (1, 4)",
        "Thu 20:00 CET (0, 0)",
        "Fri 08:00 CET (1, 4)",
        "Fri 20:00 CET (0, 0)",
        "Mon 08:00 CEST (1, 4)",  # the weekend asleep, and the clocks moved meanwhile
        "Mon 20:00 CEST (0, 0)",
        "Tue 08:00 CEST (1, 4)",
    ]
    [schedule] = await store.schedules()
    # 4 nights of 12 h, the weekend of 60 h less the hour the clocks skipped, and Monday's
    assert schedule.saved_hours == pytest.approx(4 * 12 + 59 + 12, abs=0.5)
