"""The idle sweep: observe every cluster, apply the idle policy, save, report, alert.

One sweep serves the scheduler, "Sweep now" and `clusterbot sweep --once`. Replicas take
turns: a sweep runs under a lease in the database and only when the last one finished at
least an interval ago, so one replica sweeps per interval and each alert is posted once.
Observations are taken concurrently (bounded); records are read and written in bulk with a
compare-and-set per cluster, so a click during a sweep is never lost. The report is kept in
the database: `/cluster idle` shows the latest at once on any replica.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from handlers.costs import PriceBook
from handlers.domain.names import target_of
from handlers.health import episodes
from handlers.health.alerts import drawn_as
from handlers.health.episodes import Episode
from handlers.idle.alert import IdleEntry
from handlers.idle.observe import ActivityObserver, Seen, SweepListener, Swept
from handlers.idle.reach import REACH, Reach
from handlers.idle.report import SweepReport, paced
from handlers.idle.rules import (
    IdleRecord,
    IdleRules,
    Status,
    Verdict,
    assess,
)
from handlers.ports import (
    Clock,
    CrashPoint,
    IdleRecordStore,
    LeaseStore,
    OperationStore,
    ReportStore,
    ScheduleStore,
    SpendStore,
    no_crash,
)
from handlers.reading.clusters import ClusterDirectory
from handlers.schedules.model import ScheduleState
from handlers.spend.runs import advance, closing, still_open

log = logging.getLogger(__name__)
SWEEP_LEASE = "idle-sweep"


@dataclass(frozen=True)
class SweepStores:
    """What a sweep reads and keeps: the idle records, the operations the bot follows, the
    reports, the lease that lets one replica sweep at a time, and, where kept, the spend
    ledger and the schedules."""

    records: IdleRecordStore
    operations: OperationStore
    reports: ReportStore
    leases: LeaseStore
    spend: SpendStore | None = None
    schedules: ScheduleStore | None = None


class Sweeper:
    lease = 600.0  # seconds the sweep's lease holds; renewed by finishing

    def __init__(
        self,
        *,
        directory: ClusterDirectory,
        observer: ActivityObserver,
        stores: SweepStores,
        rules: IdleRules,
        prices: PriceBook,
        clock: Clock,
        owner: str,
        interval: float,
        listeners: Sequence[SweepListener] = (),
        crash: CrashPoint = no_crash,
    ) -> None:
        self.directory = directory
        self.observer = observer
        self.records = stores.records
        self.operations = stores.operations
        self.reports = stores.reports
        self.leases = stores.leases
        self.rules = rules
        self.prices = prices
        self.clock = clock
        self.owner = owner
        self.interval = interval
        self.spend = stores.spend
        self.schedules = stores.schedules
        self.listeners = tuple(listeners)  # what each sweep's clusters are handed to
        self.crash = crash
        self.lock = asyncio.Lock()

    async def sweep(self, *, alerts: bool = True, force: bool = False) -> SweepReport | None:
        """One sweep, unless another replica is sweeping or (``force`` aside) swept less than
        an interval ago; returns the report, or None when this replica did not sweep."""
        gap = 0.0 if force else self.interval * 0.9
        async with self.lock:
            if not await self.leases.take_lease(
                SWEEP_LEASE, self.owner, self.clock(), self.lease, gap
            ):
                return None
            try:
                report = await self._sweep(alerts)
            finally:
                await self.leases.finish_lease(SWEEP_LEASE, self.owner, self.clock())
        await self.reports.save_report(report.finished, await report.to_json())
        await self._save_reach(report)
        return report

    async def _save_reach(self, report: SweepReport) -> None:
        saved = await self.reports.latest_report(kind=REACH)
        before = Reach.from_json(saved[1]) if saved else Reach(report.started, 0)
        reach = before.then(report.finished, report.targets, report.unreadable_targets)
        await self.reports.save_report(reach.at, reach.to_json(), kind=REACH)

    async def reach(self) -> Reach | None:
        """Whether the last sweeps could read their targets."""
        saved = await self.reports.latest_report(kind=REACH)
        return Reach.from_json(saved[1]) if saved else None

    async def latest(self) -> SweepReport | None:
        saved = await self.reports.latest_report()
        return SweepReport.from_dict(json.loads(saved[1])) if saved else None

    async def _sweep(self, alerts: bool) -> SweepReport:
        started = self.clock()
        listings = await self.directory.kept(lambda c: Swept.of(c, self.prices))
        unreadable = {
            str(listing.target): listing.error.user_message
            for listing in listings
            if listing.error is not None
        }
        for target, why in unreadable.items():
            log.warning("idle sweep: cannot read target %s: %s", target, why)
        failures = [f"Could not list {target}: {why}" for target, why in unreadable.items()]
        failures += [
            f"Could not read {bad.name}: {bad.problem}"
            for listing in listings
            for bad in listing.unreadable
        ]
        operations = await self.operations.active_operations()
        busy = {o.cluster for o in operations if not o.done}
        clusters = [c for listing in listings for c in listing.kept]
        observations = await self.observer.observe_all(clusters, busy)
        notes = await self._schedule_notes()
        seen = [
            Seen(c, replace(o, asleep=notes[c.name][0], scheduled=notes[c.name][1]))
            if c.name in notes
            else Seen(c, o)
            for c, o in zip(clusters, observations, strict=True)
        ]
        await self._assess_all(seen)
        posted = 0
        for listener in self.listeners if alerts else ():
            posted += await listener.swept(seen)
        entries = [item.entry for item in seen if item.entry is not None]
        failures += [
            f"{e.cluster_id}: activity unknown ({e.reason}); not alerted"
            for e in entries
            if e.status == Status.UNKNOWN
        ]
        listed = {str(listing.target) for listing in listings if listing.error is None}
        await self._forget_deleted({c.name for c in clusters}, listed)
        return SweepReport(
            started,
            self.clock(),
            entries,
            failures,
            posted,
            targets=len(listings),
            unreadable_targets=unreadable,
            episodes=_episodes(seen),
        )

    async def _schedule_notes(self) -> dict[str, tuple[str | None, str | None]]:
        """Each scheduled cluster's note: asleep by its schedule, or when it goes off."""
        if self.schedules is None:
            return {}
        standing = await self.schedules.schedules([ScheduleState.ACTIVE, ScheduleState.PAUSED])
        notes: dict[str, tuple[str | None, str | None]] = {}
        for schedule in standing:
            asleep, coming = schedule.note()
            before = notes.get(schedule.cluster, (None, None))
            notes[schedule.cluster] = (before[0] or asleep, before[1] or coming)
        return notes

    async def _assess_all(self, seen: list[Seen]) -> None:
        """Assess every cluster, saving all records in one transaction; a record that changed
        meanwhile (a click) is assessed again on its own. The event loop is given back every
        ``TURN`` of work, so a sweep of thousands never holds up an ack."""
        names = [item.cluster.name for item in seen]
        records = await self.records.get_many(names)
        async for item, name in paced(zip(seen, names, strict=True)):
            item.record, item.verdict = self._assess(records[name][0], item)
        # the ledger first: a crash before the records are saved writes the same runs again
        # at the next sweep, each the same row with its latest end
        await self._record_spend(seen)
        self.crash("after-spend")
        lost = await self.records.put_many(
            [(item.record, records[name][1]) for item, name in zip(seen, names, strict=True)],  # type: ignore[misc]
            self.clock(),
        )
        async for item, name in paced(zip(seen, names, strict=True)):
            if name in lost:
                await self._assess_again(item)
            item.entry = self._entry(item)

    async def _assess_again(self, item: Seen) -> None:
        name = item.cluster.name
        for _ in range(5):
            record, version = await self.records.get(name)
            item.record, item.verdict = self._assess(record, item)
            await self._record_spend([item])
            if await self.records.put(item.record, version, self.clock()):
                return
        raise RuntimeError(f"could not save the idle record of {name}")

    def _assess(self, record: IdleRecord, item: Seen) -> tuple[IdleRecord, Verdict]:
        """The policy's verdict, and the pools' runs of spend carried on in the record (the
        runs the observation closed kept in ``item.spent``)."""
        seen = item.observation
        after, verdict = assess(record, seen, self.rules)
        since = after.idle_since
        idle = verdict.status not in (Status.BUSY, Status.UNKNOWN) and (
            since is not None and seen.at - since >= self.rules.idle_after
        )
        cluster = item.cluster
        runs, ended = advance(
            record.spending, seen.at, cluster.pools, idle=idle, interval=self.interval
        )
        item.spent = closing(cluster.name, cluster.target, dict(cluster.labels), ended)
        episode = self._episode(record.episode, item)
        return replace(after, spending=runs, labels=cluster.labels, episode=episode), verdict

    def _episode(self, before: Episode | None, item: Seen) -> Episode | None:
        """The cluster's health episode after this sweep: its alert is owed when it changed,
        and a posted alert of an open episode at every sweep, so that its figures (for how
        long, what it has cost) are current; saved before the alert is drawn. A snooze
        carries into a new episode."""
        health = item.observation.health
        if health is None:  # not read this sweep: nothing is known to have changed
            return before
        episode, item.health_change = episodes.advance(
            before, item.cluster.name, health, item.observation.at, self.interval
        )
        if episode is None:
            return None
        if before is not None and episode.opened_at != before.opened_at:
            episode = replace(episode, snoozed_until=before.snoozed_until)
        current = (
            episode.open
            and episode.alert_message is not None
            and (before is None or drawn_as(episode) != drawn_as(before))
        )
        owed = episode.owed or current or item.health_change != episodes.Change.NONE
        if not episode.open and not owed:
            return episode
        return replace(episode, owed=owed, health=health.to_dict())

    async def _record_spend(self, seen: Sequence[Seen]) -> None:
        runs = [run for item in seen for run in item.spent]
        if self.spend is not None and runs:
            await self.spend.record_spend(runs)

    def _entry(self, item: Seen) -> IdleEntry:
        cluster = item.cluster
        assert item.verdict is not None and item.record is not None
        return IdleEntry.of(
            cluster.name,
            cluster.target,
            item.verdict,
            item.record,
            nodes=cluster.nodes,
            cost_hour=cluster.cost_hour,
            freed_hour=cluster.freed_hour,
            reservations=cluster.reservations,
            jobs_hidden=item.observation.jobs_hidden,
            notes=item.observation.queue_notes + item.observation.node_notes + _said(item),
            health=item.observation.health.to_dict() if item.observation.health else None,
        )

    async def _forget_deleted(self, present: set[str], listed_targets: set[str]) -> None:
        for record in await self.records.all():
            target = target_of(record.cluster)
            if record.cluster in present or target not in listed_targets:
                continue  # still there, or its target could not be listed this time
            for listener in self.listeners:
                await listener.gone(record)
            if self.spend is not None and record.spending:  # its last runs end where it went
                labels = dict(record.labels)
                ended = still_open(
                    record.cluster, target, labels, record.spending, self.clock(), self.interval
                )
                await self.spend.record_spend(ended)
            await self.records.delete(record.cluster)


def _episodes(seen: Sequence[Seen]) -> dict[str, int]:
    """How many health episodes this sweep opened (a new one, or one back within the quiet
    period) and healed."""
    changes = [item.health_change for item in seen]
    opened = (episodes.Change.OPENED, episodes.Change.REOPENED)
    return {
        "opened": sum(1 for c in changes if c in opened),
        "healed": changes.count(episodes.Change.HEALED),
    }


def _said(item: Seen) -> tuple[tuple[str, ...], ...]:
    """The schedule's note on an idle cluster: when it takes the cluster to zero anyway."""
    scheduled = item.observation.scheduled
    return ((scheduled[0].upper() + scheduled[1:],),) if scheduled else ()
