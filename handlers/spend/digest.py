"""The weekly cost digest in the alert channel: each cluster's spend this week against last,
the part spent idle, what clusterbot saved, the three biggest opportunities each with its
button, and the week's chart.

Each firing of the service's cron (``CLUSTERBOT_DIGEST_CRON``) is owed work, ``digest:AT``:
recorded when it is due by any replica that looks (``owe_due``), and posted once by the
engine, late if no replica was up at the time, with the date it was due. A firing is owed
only once clusterbot has watched spend before it (a new install posts no digest of a week it
never saw), and up to a week late. The post is looked for by its key before it is sent again
(``post_once``); a chart whose sharing a crash cut off is not shared twice: the thread says
where to draw it, as it does when the chart is refused.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from handlers.actions import OpenForm, Remedy
from handlers.costs import money
from handlers.messenger import Messenger, MessengerError
from handlers.owed.engine import Attempt, Engine
from handlers.owed.model import Done, GiveUp, Outcome, Owed, OwedState
from handlers.owed.posting import post_once, rate_limited
from handlers.ports import Clock
from handlers.replies import Button, Buttons, Heading, Note, Reply, Table, Text
from handlers.schedules.model import ScheduleState
from handlers.schedules.ports import ScheduleStore
from handlers.spend.chart import Chart, chart_of
from handlers.spend.ports import ChartError
from handlers.spend.report import NOTE, SpendReport
from handlers.spend.totals import Members, Spend, Tally, overall
from handlers.sweep.alert import IDLE_PAYING
from handlers.sweep.report import SweepReport
from handlers.sweep.rules import Recommendation

log = logging.getLogger(__name__)
KIND = "digest"
WEEK = 7 * 24 * 3600.0
CATCH_UP = WEEK  # a firing missed this long ago is still posted, late, with its date
LATE = 15 * 60.0  # a digest posted this long after its firing says when it was due
ROWS = 20  # clusters in the table; the rest are summed
OPPORTUNITIES = 3
COMPARABLE = 1.0  # dollars: a week that cost less is not compared in percent
COVERED = 6 * 3600.0  # a ledger begun this soon after the week before began still covers it


@runtime_checkable
class DigestStore(Protocol):
    async def first_spend(self) -> float | None:
        """When the spend ledger begins (its oldest run's start), or None when it is empty."""
        ...


@runtime_checkable
class Firings(Protocol):
    """The firings of the digest's cron in (since, until], epoch seconds (the shell's is
    ``bot/app.py``'s, from ``CLUSTERBOT_DIGEST_CRON``)."""

    def __call__(self, since: float, until: float, /) -> list[float]: ...


class LatestSweep(Protocol):
    async def latest(self) -> SweepReport | None: ...


@dataclass(frozen=True)
class Opportunity:
    cluster: str  # full name
    weekly: float  # dollars a week it would save
    why: str
    button: Button


class Digest:
    """The weekly digest, and the ``digest`` worker that posts each firing's."""

    kind = KIND
    steps = ("digest-posted", "digest-chart-shared")

    def __init__(
        self,
        *,
        spend: SpendReport,
        store: DigestStore,
        sweeps: LatestSweep,
        schedules: ScheduleStore | None,
        messenger: Messenger,
        channel: str | None,
        engine: Engine,
        clock: Clock,
        firings: Firings | None = None,
    ) -> None:
        self.spend = spend
        self.store = store
        self.sweeps = sweeps
        self.schedules = schedules
        self.messenger = messenger
        self.channel = channel
        self.engine = engine
        self.clock = clock
        self.firings = firings
        self.watched: float | None = None  # when the ledger begins (it never begins later)

    def item(self, fired_at: float) -> Owed:
        return self.engine.due(KIND, f"{KIND}:{fired_at:.0f}", {"fired_at": fired_at}, fired_at)

    async def fire(self, fired_at: float) -> bool:
        """Owe the digest of the firing at ``fired_at`` and post it now, from here; whether
        this call posted it (another replica, or an earlier call, may have)."""
        if self.channel is None:
            return False
        item = self.item(fired_at)
        await self.engine.owe(item)
        if not await self.engine.run(item.key):
            return False
        done = await self.engine.store.get_owed(item.key)
        return done is not None and done.state == OwedState.DONE

    async def owe_due(self) -> int:
        """Owe every firing of the cron in the last week that clusterbot watched spend
        before (owed before, it is not owed again); returns how many are new."""
        if self.channel is None or self.firings is None:
            return 0
        now = self.clock()
        if self.watched is None:
            self.watched = await self.store.first_spend()
        if self.watched is None:
            return 0
        due = [self.item(f) for f in self.firings(now - CATCH_UP, now) if f > self.watched]
        return len(await self.engine.owe(*due)) if due else 0

    async def work(self, attempt: Attempt) -> Outcome:
        if self.channel is None:
            return GiveUp("no alert channel to post the digest in")
        fired_at = float(attempt.subject["fired_at"])
        reply, whole, chart = await self.build(fired_at)
        now = self.clock()
        if now - fired_at > LATE:
            reply.add(
                Note(
                    f"Due {_day(fired_at)}; posted late, at {_day(now)}, when a "
                    "clusterbot was up to post it."
                )
            )
        try:
            message = await post_once(attempt, self.messenger, self.channel, reply)
        except MessengerError as error:
            if error.code == "ratelimited":
                return rate_limited(error, now)
            raise
        if "chart" not in attempt.item.result:
            await self._chart(attempt, chart, whole, message)
        return Done()

    async def _chart(self, attempt: Attempt, chart: Chart, whole: Spend, message: str) -> None:
        """Share the week's chart once: a share that a crash cut off is not sent again (a
        file carries no key to look for), and the thread says where to draw it."""
        assert self.channel is not None
        if attempt.unsure and attempt.item.result.get("sharing"):
            why = "clusterbot stopped while sharing it"
        else:
            await attempt.sending(attempt.engine.post_window)
            await attempt.keep(sharing=True)
            try:
                await self.spend.share(chart, self.channel, whole)
                why = None
            except (MessengerError, ChartError) as error:
                why = f"{error.code}: {error.advice()}"
            attempt.step("digest-chart-shared")
        await attempt.sent(chart=why or "shared")
        if why:
            said = Reply("the week's chart").add(
                Text(f"The week's chart was not shared ({why}); /cluster cost since 7d draws it.")
            )
            await post_once(
                attempt, self.messenger, self.channel, said, thread=message, name="chart-note"
            )

    async def build(self, until: float) -> tuple[Reply, Spend, Chart]:
        """The digest of the week to ``until`` (its firing), this week's spend, and its
        chart, from one read of the ledger."""
        return await self._build(until)

    async def _build(self, until: float) -> tuple[Reply, Spend, Chart]:
        """The digest, this week's spend, and its chart, from one read of the ledger."""
        week, before = until - WEEK, until - 2 * WEEK
        now = Tally(week, until)
        # last week is only compared with this one: the fleet's whole, read meanwhile, and
        # the clusters shown
        running, then = await asyncio.gather(
            self.spend.read([now]), self.spend.fleet_days(before, week)
        )
        then.add(running)
        chart = chart_of(now, (), "all clusters, last 7d")
        this = now.totals()
        whole = overall(this)
        shown = {m[0] for name in list(this)[:ROWS] for m in now.members.get(name, ())}
        last, found = await asyncio.gather(  # the opportunities found meanwhile
            self.spend.clusters_spend(before, week, shown, running),
            self.opportunities(this, now.members),
        )
        previous = overall(then.days)
        # a week is compared with the one before only when clusterbot watched that one
        # whole: a ledger begun midweek would make any change look like thousands of percent
        starts = [t for t in (now.first, then.first) if t is not None]
        watched = min(starts, default=until)
        whole_week = watched <= before + COVERED
        if not whole_week:
            last = {}
        reply = Reply(f"weekly cost digest: {money(whole.cost, per_hour=False)} this week")
        reply.add(
            Heading("Weekly cost digest"),
            Text(
                f"{money(whole.cost, per_hour=False)} this week "
                f"({_against(whole, previous) if whole_week else _since(watched)}); "
                f"{money(whole.idle, per_hour=False)} of it idle; clusterbot saved "
                f"{money(whole.saved, per_hour=False)}."
            ),
        )
        rows = [
            (
                name,
                money(spend.cost, per_hour=False),
                money(last.get(name, Spend()).cost, per_hour=False) if whole_week else "-",
                _change(spend, last.get(name, Spend())) if whole_week else "-",
                money(spend.idle, per_hour=False),
                money(spend.saved, per_hour=False) if spend.saved else "-",
            )
            for name, spend in list(this.items())[:ROWS]
        ]
        if rows:
            titles = ("CLUSTER", "THIS WEEK", "LAST WEEK", "CHANGE", "IDLE", "SAVED")
            reply.add(Table.of(titles, rows, right=frozenset({1, 2, 3, 4, 5})))
        _opportunities(reply, found)
        reply.add(Note(NOTE))
        return reply, whole, chart

    async def opportunities(self, this: dict[str, Spend], members: Members) -> list[Opportunity]:
        """Idle clusters paying now (scale to zero or delete, as their alert recommends),
        and clusters idle this week with no schedule (a schedule), largest first; ``this``:
        the week's spend by cluster id, ``members``: each id's full names."""
        found: dict[str, Opportunity] = {}
        latest, scheduled = await asyncio.gather(self.sweeps.latest(), self._scheduled())
        entries = {e.cluster: e for e in latest.entries} if latest is not None else {}
        for entry in entries.values():
            if entry.status not in IDLE_PAYING or not entry.freed_hour:
                continue
            delete = entry.recommendation == Recommendation.DELETE
            button = (
                Button(Remedy(entry.cluster, delete=True), "Ask to delete", style="danger")
                if delete
                else Button(Remedy(entry.cluster), "Scale to zero", style="primary")
            )
            why = "idle now, " + ("rarely used: delete it" if delete else "scale it to zero")
            found[entry.cluster] = Opportunity(entry.cluster, entry.freed_hour * 168, why, button)
        names = {
            cluster_id: full for cluster_id in this for full, *_ in members.get(cluster_id, ())
        }
        for cluster_id, spend in this.items():
            name = names.get(cluster_id)
            if name is None or name in scheduled or name in found or spend.idle <= 0:
                continue
            # what nights at zero would free: none of a reservation's (billed used or not)
            seen = entries.get(name)
            if seen is None or not seen.freed_hour or not seen.cost_hour:
                continue
            weekly = spend.idle * min(1.0, seen.freed_hour / seen.cost_hour)
            button = Button(OpenForm("schedule", name), "Schedule…")
            why = f"{money(spend.idle, per_hour=False)} spent idle this week, no schedule"
            found[name] = Opportunity(name, weekly, why, button)
        return sorted(found.values(), key=lambda o: -o.weekly)[:OPPORTUNITIES]

    async def _scheduled(self) -> set[str]:
        if self.schedules is None:
            return set()
        standing = await self.schedules.schedules([ScheduleState.ACTIVE])
        return {s.cluster for s in standing if s.state == ScheduleState.ACTIVE}


def _opportunities(reply: Reply, found: list[Opportunity]) -> None:
    reply.add(Heading(f"The biggest opportunities ({len(found)})"))
    if not found:
        reply.add(Text("None this week: no idle spend that scaling down or a schedule would save."))
        return
    for n, chance in enumerate(found, 1):
        cluster_id = chance.cluster.rsplit("/", 1)[-1]
        weekly = money(chance.weekly, per_hour=False)
        reply.add(
            Text(f"{n}. {cluster_id}: {chance.why}: {weekly} a week"),
            Buttons((chance.button,)),
        )


def _day(moment: float) -> str:
    day = datetime.fromtimestamp(moment, UTC)
    return f"{day:%a} {day.day} {day:%b} {day:%H:%M} UTC"


def _since(watched: float) -> str:
    day = datetime.fromtimestamp(watched, UTC)
    return f"clusterbot has watched since {day:%a} {day.day} {day:%b}: no whole week before it"


def _against(now: Spend, before: Spend) -> str:
    if before.cost < COMPARABLE:
        return f"the week before, clusterbot saw {money(before.cost, per_hour=False)} spent"
    return f"{_change(now, before)} on last week's {money(before.cost, per_hour=False)}"


def _change(now: Spend, before: Spend) -> str:
    if before.cost < COMPARABLE:  # a share of next to nothing says nothing
        return "new" if now.cost >= COMPARABLE else "-"
    return f"{100 * (now.cost - before.cost) / before.cost:+.0f}%"
