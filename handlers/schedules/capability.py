"""Off-hours schedules, declared: ask for one (or pause, resume, end it), list them, and the
Skip tonight and Postpone 2 h clicks on a night's notice."""

from __future__ import annotations

from handlers.capability import Capability, Job, Kernel, Port
from handlers.clicking import Click, Clicked, click
from handlers.commanding import Subcommand
from handlers.policy import Role
from handlers.replies import Reply, notice
from handlers.schedules.asking import NightAsking
from handlers.schedules.clicks import POSTPONE, SKIP, Night, night
from handlers.schedules.commands import (
    SCHEDULE,
    SCHEDULE_USAGE,
    SCHEDULES,
    SCHEDULES_USAGE,
    parse_schedule,
    parse_schedules,
    run_schedule,
    run_schedules,
)
from handlers.schedules.form import ScheduleForm, schedule_ask
from handlers.schedules.kind import SCHEDULE as SCHEDULE_KIND
from handlers.schedules.labels import LabelSchedules
from handlers.schedules.nights import Nights
from handlers.schedules.ports import Calendar, ScheduleStore
from handlers.schedules.profiles import SCHEDULE_PROFILES
from handlers.schedules.rollup import NightRollup
from handlers.schedules.service import Schedules
from handlers.schedules.sweeping import ScheduleSweep
from handlers.schedules.thread import ScheduleThread

# the schedules' store, and the calendar that says when their times come
SCHEDULE_STORE: Port[ScheduleStore] = Port("schedules", ScheduleStore)
CALENDAR: Port[Calendar] = Port("calendar", Calendar)
CHECK_EVERY = 30.0  # seconds between looks at every schedule, unless the options say


def build(kernel: Kernel) -> Schedules | None:
    """The schedules, where the store keeps them and a calendar tells their times; with the
    policy's profiles, the schedules labels ask for."""
    ports, approvals = kernel.ports, kernel.approvals
    store, calendar = ports.port(SCHEDULE_STORE), ports.port(CALENDAR)
    if store is None or calendar is None:
        return None
    thread = ScheduleThread(store, kernel.outbox)
    # a fleet's nights in one message per channel and window: a minute, or two checks
    window = 2 * kernel.options.checks.get("schedules", CHECK_EVERY)
    rollup = NightRollup(
        engine=kernel.engine,
        requests=ports.requests,
        messenger=ports.messenger,
        clock=ports.clock,
        window=window,
    )
    kernel.engine.add(rollup)
    nights = Nights(
        store=store,
        calendar=calendar,
        directory=kernel.directory,
        activity=ports.activity,
        approvals=approvals,
        asking=NightAsking(
            approvals=approvals,
            cards=kernel.cards,
            roles=ports.roles,
            thread=thread,
            rollup=rollup,
        ),
        thread=thread,
        clock=ports.clock,
        crash=kernel.options.crash,
    )
    schedules = Schedules(nights=nights, approvals=approvals, ledger=kernel.ledger)
    profiles = kernel.policy.section(SCHEDULE_PROFILES)
    if profiles:
        schedules.labels = LabelSchedules(
            schedules=schedules,
            profiles=profiles,
            channel=kernel.options.alert_channel,
            clock=ports.clock,
        )
    return schedules


async def _night(schedules: Schedules | None, clicked: Clicked[Night]) -> Reply:
    if schedules is None:
        return notice("Schedule", "This clusterbot keeps no schedules.")
    night = clicked.action
    return await schedules.night(clicked.user, night.schedule_id, night.off_at, night.postpone)


CLICKS: tuple[Click, ...] = (
    click(
        (SKIP, POSTPONE),
        night,
        Role.OPERATOR,
        "Skipping or postponing a schedule's night",
        _night,
    ),
)


SCHEDULES_CAPABILITY = Capability(
    "schedules",
    build,
    ports=(SCHEDULE_STORE, CALENDAR),
    policy=(SCHEDULE_PROFILES,),
    listener=lambda schedules: None if schedules is None else ScheduleSweep(schedules),
    commands=(
        Subcommand(
            "schedule",
            SCHEDULE_USAGE,
            SCHEDULE,
            Role.OPERATOR,
            parse_schedule,
            run_schedule,
            form=schedule_ask,
        ),
        Subcommand(
            "schedules",
            SCHEDULES_USAGE,
            SCHEDULES,
            Role.VIEWER,
            parse_schedules,
            run_schedules,
        ),
    ),
    kinds=(SCHEDULE_KIND,),
    on_settled=lambda schedules: None if schedules is None else schedules.night_ended,
    # the first run is at start: a wake missed while every replica was down happens then
    jobs=(Job("schedules", lambda s: s.check_all(), every=CHECK_EVERY),),
    forms=(ScheduleForm(),),
    clicks=CLICKS,
)
