"""The weekly cost digest in the alert channel: each cluster's spend this week against last,
the part spent idle, what clusterbot saved, the three biggest opportunities each with its
button, and the week's chart.

It is fired on a cron of the service's (``CLUSTERBOT_DIGEST_CRON``); every replica's cron
fires, and the firing is claimed once in the database, so one replica posts it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from handlers.actions import OpenForm, Remedy
from handlers.costs import money
from handlers.idle.alert import IDLE_PAYING
from handlers.idle.report import SweepReport
from handlers.idle.rules import Recommendation
from handlers.messenger import Messenger, MessengerError
from handlers.ports import Clock, ScheduleStore
from handlers.replies import Button, Buttons, Heading, Note, Reply, Table, Text
from handlers.schedules.model import ScheduleState
from handlers.spend.chart import Chart, daily
from handlers.spend.report import NOTE, SpendReport
from handlers.spend.totals import Spend, overall, totals

log = logging.getLogger(__name__)
WEEK = 7 * 24 * 3600.0
ROWS = 20  # clusters in the table; the rest are summed
OPPORTUNITIES = 3
COMPARABLE = 1.0  # dollars: a week that cost less is not compared in percent
COVERED = 6 * 3600.0  # a ledger begun this soon after the week before began still covers it


class DigestStore(Protocol):
    async def claim_digest(self, fired_at: float, owner: str, now: float) -> bool:
        """Whether this call is the one to post the digest of the firing at ``fired_at``."""
        ...

    async def digest_posted(self, fired_at: float, message: str) -> None: ...


class LatestSweep(Protocol):
    async def latest(self) -> SweepReport | None: ...


@dataclass(frozen=True)
class Opportunity:
    cluster: str  # full name
    weekly: float  # dollars a week it would save
    why: str
    button: Button


class Digest:
    def __init__(
        self,
        *,
        spend: SpendReport,
        store: DigestStore,
        sweeps: LatestSweep,
        schedules: ScheduleStore | None,
        messenger: Messenger,
        channel: str | None,
        owner: str,
        clock: Clock,
    ) -> None:
        self.spend = spend
        self.store = store
        self.sweeps = sweeps
        self.schedules = schedules
        self.messenger = messenger
        self.channel = channel
        self.owner = owner
        self.clock = clock

    async def fire(self, fired_at: float) -> bool:
        """Post the digest of the week to now, once for this firing whichever replicas fire."""
        if self.channel is None:
            return False
        if not await self.store.claim_digest(fired_at, self.owner, self.clock()):
            return False
        reply, whole, chart = await self.build(self.clock())
        try:
            message = await self.messenger.post(self.channel, reply)
        except MessengerError as error:
            log.warning("weekly digest not posted: %s", error.code)
            return False
        await self.store.digest_posted(fired_at, message)
        await self.spend.share_chart(chart, self.channel, whole)
        return True

    async def build(self, until: float) -> tuple[Reply, Spend, Chart]:
        """The digest, this week's spend, and its chart, from one read of the ledger."""
        week, before = until - WEEK, until - 2 * WEEK
        runs = await self.spend.runs(before, until)
        saved = await self.spend.saved(runs)
        chart = daily(runs, saved, week, until, "all clusters, last 7d")
        this = totals(runs, week, until, saved=saved)
        last = totals(runs, before, week, saved=saved)
        whole, previous = overall(this), overall(last)
        # a week is compared with the one before only when clusterbot watched that one
        # whole: a ledger begun midweek would make any change look like thousands of percent
        watched = min((r.start for r in runs), default=until)
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
        await self._opportunities(reply, this)
        reply.add(Note(NOTE))
        return reply, whole, chart

    async def _opportunities(self, reply: Reply, this: dict[str, Spend]) -> None:
        found = await self.opportunities(this)
        reply.add(Heading(f"The biggest opportunities ({len(found)})"))
        if not found:
            reply.add(
                Text("None this week: no idle spend that scaling down or a schedule would save.")
            )
            return
        for n, chance in enumerate(found, 1):
            cluster_id = chance.cluster.rsplit("/", 1)[-1]
            weekly = money(chance.weekly, per_hour=False)
            reply.add(
                Text(f"{n}. {cluster_id}: {chance.why}: {weekly} a week"),
                Buttons((chance.button,)),
            )

    async def opportunities(self, this: dict[str, Spend]) -> list[Opportunity]:
        """Idle clusters paying now (scale to zero or delete, as their alert recommends),
        and clusters idle this week with no schedule (a schedule), largest first."""
        found: dict[str, Opportunity] = {}
        latest = await self.sweeps.latest()
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
        scheduled = await self._scheduled()
        names = {r.rsplit("/", 1)[-1]: r for r in await self._clusters()}
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

    async def _clusters(self) -> list[str]:
        return [record.cluster for record in await self.spend.records.all()]


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
