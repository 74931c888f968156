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
from handlers.keeping import save_all
from handlers.pacing import paced
from handlers.ports import (
    Clock,
    CrashPoint,
    IdleRecordStore,
    LeaseStore,
    OperationStore,
    ReportStore,
    no_crash,
)
from handlers.reading.clusters import ClusterDirectory
from handlers.sweep.alert import IdleEntry
from handlers.sweep.gpus import lengthened
from handlers.sweep.observe import ActivityObserver, Note, Seen, SweepListener, Swept
from handlers.sweep.reach import REACH, Reach
from handlers.sweep.report import SweepReport
from handlers.sweep.rules import (
    IdleRecord,
    IdleRules,
    Status,
    Verdict,
    assess,
)

log = logging.getLogger(__name__)
SWEEP_LEASE = "idle-sweep"


@dataclass(frozen=True)
class SweepStores:
    """What a sweep reads and keeps: the idle records, the operations the bot follows, the
    reports, and the lease that lets one replica sweep at a time."""

    records: IdleRecordStore
    operations: OperationStore
    reports: ReportStore
    leases: LeaseStore


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
        self.listeners = tuple(listeners)  # what each sweep's clusters are handed to
        self.crash = crash
        self.lock = asyncio.Lock()

    async def sweep(self, *, alerts: bool = True, force: bool = False) -> SweepReport | None:
        """One sweep, unless another replica is sweeping or (``force`` aside) swept less than
        an interval ago; returns the report, or None when this replica did not sweep."""
        gap = 0.0 if force else self.interval * 0.9
        async with self.lock:
            try:
                took = await self.leases.take_lease(
                    SWEEP_LEASE, self.owner, self.clock(), self.lease, gap
                )
            except asyncio.CancelledError:
                # cut off once the database may have given it: given back all the same
                await self.leases.finish_lease(SWEEP_LEASE, self.owner, self.clock())
                raise
            if not took:
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
        # what the listeners say is read while the clusters are observed, not after them
        noting = asyncio.ensure_future(self._notes())
        try:
            observations = await self.observer.observe_all(clusters, busy)
        except BaseException:
            noting.cancel()
            raise
        notes = await noting
        seen = [
            Seen(c, replace(o, asleep=notes[c.name][0], scheduled=notes[c.name][1]))
            if c.name in notes
            else Seen(c, o)
            for c, o in zip(clusters, observations, strict=True)
        ]
        await self._assess_all(seen)
        for listener in self.listeners:  # each keeps its own record, alerts or not
            await listener.observed(seen)
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
            tallies=_tallies(seen),
        )

    async def _notes(self) -> dict[str, Note]:
        """What the listeners say of clusters before they are judged: asleep by a plan, or
        when a plan takes one to zero anyway (the first that says each wins)."""
        notes: dict[str, Note] = {}
        for listener in self.listeners:
            for cluster, (asleep, coming) in (await listener.notes()).items():
                before = notes.get(cluster, (None, None))
                notes[cluster] = (before[0] or asleep, before[1] or coming)
        return notes

    async def _assess_all(self, seen: list[Seen]) -> None:
        """Assess every cluster, saving all records in one transaction; a record that changed
        meanwhile (a click) is assessed again on its own. The event loop is given back every
        ``TURN`` of work, so a sweep of thousands never holds up an ack."""
        names = [item.cluster.name for item in seen]
        items = dict(zip(names, seen, strict=True))

        def assessed(name: str, record: IdleRecord) -> IdleRecord:
            item = items[name]
            item.record, item.verdict = self._assess(record, item)
            return item.record

        await save_all(self.records, names, assessed, self.clock)
        async for item in paced(seen):
            item.entry = self._entry(item)

    def _assess(self, record: IdleRecord, item: Seen) -> tuple[IdleRecord, Verdict]:
        """The policy's verdict, and whether the cluster is idle past the threshold (its
        pools' spend is counted idle)."""
        seen = item.observation
        window = self.observer.gpu_rules.window
        found, first = lengthened(seen.idle_allocations, dict(record.gpu_idle), seen.at, window)
        record = replace(record, gpu_idle=tuple(sorted(first.items())))
        item.observation = seen = replace(seen, idle_allocations=found)
        after, verdict = assess(record, seen, self.rules)
        since = after.idle_since
        item.idle = verdict.status not in (Status.BUSY, Status.UNKNOWN) and (
            since is not None and seen.at - since >= self.rules.idle_after
        )
        return after, verdict

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
            notes=item.observation.queue_notes
            + item.observation.node_notes
            + _said(item)
            + tuple(a.words() for a in item.observation.idle_allocations),
            health=item.observation.health.to_dict() if item.observation.health else None,
            allocations=tuple(a.to_dict() for a in item.observation.idle_allocations),
        )

    async def _forget_deleted(self, present: set[str], listed_targets: set[str]) -> None:
        for cluster, _record in await self.records.all():
            if cluster in present or target_of(cluster) not in listed_targets:
                continue  # still there, or its target could not be listed this time
            for listener in self.listeners:
                await listener.gone(cluster)
            await self.records.delete(cluster)


def _tallies(seen: Sequence[Seen]) -> dict[str, dict[str, int]]:
    """What the listeners noted of this sweep's clusters, counted by name and mark."""
    counted: dict[str, dict[str, int]] = {}
    for item in seen:
        for name, mark in item.marks.items():
            marks = counted.setdefault(name, {})
            marks[mark] = marks.get(mark, 0) + 1
    return counted


def _said(item: Seen) -> tuple[tuple[str, ...], ...]:
    """The schedule's note on an idle cluster: when it takes the cluster to zero anyway."""
    scheduled = item.observation.scheduled
    return ((scheduled[0].upper() + scheduled[1:],),) if scheduled else ()
