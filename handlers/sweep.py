"""The idle sweep: observe every cluster, apply the idle policy, alert, and act on clicks.

One sweep serves the scheduler, `/cluster idle` and `clusterbot sweep --once`. Observations
are taken concurrently (bounded); each cluster's record is changed by compare-and-set, so a
click during a sweep is never lost. Posting and editing alerts happens after the record is
saved.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot.store import IdleRecords, Store
from bot.vertex.client import VertexClient
from bot.vertex.errors import VertexError
from bot.vertex.models import Cluster
from handlers.cards import slack_time
from handlers.changes import ChangeService
from handlers.clusters import ClusterDirectory
from handlers.commands import CommandError
from handlers.costs import PriceBook
from handlers.idle import (
    EXEMPT_LABEL,
    IdleRecord,
    IdleRules,
    Observation,
    Status,
    Verdict,
    assess,
)
from handlers.idle_cards import IdleEntry, alert_card, closed_alert, kept_text, paying_pools
from handlers.messenger import Messenger
from handlers.plans import ChangePlan, PlanError, plan_delete, plan_scale_to_zero
from handlers.policy import Role, may_approve
from handlers.records import RequestState
from handlers.replies import Reply, Text, escape, mention

log = logging.getLogger(__name__)
RUNNING_STATES = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "RESIZING"}
CAS_TRIES = 5


@dataclass
class SweepReport:
    started: float
    finished: float
    entries: list[IdleEntry]
    failures: list[str]
    alerts: int = 0


def count_jobs(body: str) -> tuple[int, int]:
    """Running and pending jobs in a slurmrestd ``GET /jobs`` reply."""
    document = json.loads(body)
    running = pending = 0
    for job in document.get("jobs") or []:
        states = job.get("job_state") or []
        states = [states] if isinstance(states, str) else states
        if "PENDING" in states:
            pending += 1
        elif RUNNING_STATES & set(states):
            running += 1
    return running, pending


class IdleSweeper:
    def __init__(
        self,
        store: Store,
        vertex: VertexClient,
        directory: ClusterDirectory,
        changes: ChangeService,
        rules: IdleRules,
        prices: PriceBook,
        messenger: Messenger | None,
        alert_channel: str | None,
        clock: Callable[[], float],
        slurm_version: str = "v0.0.41",
        concurrency: int = 8,
    ) -> None:
        self.store = store
        self.records = IdleRecords(store)
        self.vertex = vertex
        self.directory = directory
        self.changes = changes
        self.rules = rules
        self.prices = prices
        self.messenger = messenger
        self.alert_channel = alert_channel
        self.clock = clock
        self.slurm_path = f"/slurm/{slurm_version}/jobs"
        self.bound = asyncio.Semaphore(concurrency)
        self.lock = asyncio.Lock()

    # -- observing -----------------------------------------------------------------------------

    async def observe(self, cluster: Cluster, busy_clusters: set[str]) -> Observation:
        name = cluster.name or ""
        paying = sum(p.node_count for p in cluster.compute_pools())
        labels = cluster.labels or {}
        seen = Observation(
            at=self.clock(),
            state=cluster.state,
            tracked_operation=name in busy_clusters,
            paying_nodes=paying,
            exempt_label=labels.get(EXEMPT_LABEL[0]) == EXEMPT_LABEL[1],
        )
        if seen.busy_reason() is not None:
            return seen  # busy already: no need to ask Slurm

        def unknown(reason: str) -> Observation:
            return replace(seen, running_jobs=None, pending_jobs=None, unknown_reason=reason)

        try:
            async with self.bound:
                reply = await self.vertex.call_slurm_rest_api(name, self.slurm_path)
        except VertexError as error:
            return unknown(f"Slurm could not be asked: {error.user_message}")
        if reply.status != 200:
            return unknown(f"slurmrestd answered HTTP {reply.status}")
        try:
            running, pending = count_jobs(reply.body)
        except (ValueError, AttributeError, TypeError):
            return unknown("slurmrestd sent a reply that is not a job list")
        return replace(seen, running_jobs=running, pending_jobs=pending)

    async def _busy_clusters(self) -> set[str]:
        operations = await self.store.active_operations()
        return {o.cluster for o in operations if not o.done}

    # -- sweeping ------------------------------------------------------------------------------

    async def sweep(self, *, alerts: bool = True) -> SweepReport:
        async with self.lock:
            return await self._sweep(alerts)

    async def _sweep(self, alerts: bool) -> SweepReport:
        started = self.clock()
        listings = await self.directory.listings()
        failures = [
            f"Could not list {listing.target}: {listing.error.user_message}"
            for listing in listings
            if listing.error is not None
        ]
        busy = await self._busy_clusters()
        clusters = [c for listing in listings for c in listing.clusters]
        observations = await asyncio.gather(*(self.observe(c, busy) for c in clusters))
        entries = await self._apply_all(clusters, list(observations))
        posted = 0
        if alerts:
            for entry in entries:
                posted += await self._announce(entry)
        failures += [
            f"{e.cluster_id}: activity unknown ({e.verdict.reason}); not alerted"
            for e in entries
            if e.verdict.status == Status.UNKNOWN
        ]
        listed_targets = {str(listing.target) for listing in listings if listing.error is None}
        await self._forget_deleted({c.name or "" for c in clusters}, listed_targets)
        return SweepReport(started, self.clock(), entries, failures, posted)

    async def _apply_all(
        self, clusters: list[Cluster], observations: list[Observation]
    ) -> list[IdleEntry]:
        """Assess every cluster, saving all records in one transaction; a record that changed
        meanwhile (a click) is assessed again on its own."""
        names = [c.name or "" for c in clusters]
        records = await self.records.get_many(names)
        assessed = [
            assess(records[name][0], seen, self.rules)
            for name, seen in zip(names, observations, strict=True)
        ]
        lost = await self.records.put_many(
            [
                (updated, records[name][1])
                for name, (updated, _) in zip(names, assessed, strict=True)
            ],
            self.clock(),
        )
        entries = []
        for cluster, seen, (updated, verdict) in zip(clusters, observations, assessed, strict=True):
            if cluster.name in lost:
                entries.append(await self._apply(cluster, seen))
            else:
                entries.append(self._entry(cluster, updated, verdict))
        return entries

    def _entry(self, cluster: Cluster, record: IdleRecord, verdict: Verdict) -> IdleEntry:
        return IdleEntry(
            cluster=cluster.name or "",
            target=str(cluster.target),
            verdict=verdict,
            nodes=paying_pools(cluster),
            cost_hour=self.prices.pools_hour(list(cluster.compute_pools())),
            record=record,
        )

    async def _apply(self, cluster: Cluster, seen: Observation) -> IdleEntry:
        name = cluster.name or ""
        for _ in range(CAS_TRIES):
            record, version = await self.records.get(name)
            updated, verdict = assess(record, seen, self.rules)
            if await self.records.put(updated, version, self.clock()):
                break
        else:
            raise RuntimeError(f"could not save the idle record of {name}")
        return self._entry(cluster, updated, verdict)

    async def _update(self, cluster: str, change: Callable[[IdleRecord], IdleRecord]) -> IdleRecord:
        for _ in range(CAS_TRIES):
            record, version = await self.records.get(cluster)
            updated = change(record)
            if await self.records.put(updated, version, self.clock()):
                return updated
        raise RuntimeError(f"could not save the idle record of {cluster}")

    async def _announce(self, entry: IdleEntry) -> int:
        """Post a due alert, close an alert that no longer applies, run a due auto-action."""
        if self.messenger is None or self.alert_channel is None:
            return 0
        verdict, record = entry.verdict, entry.record
        now = self.clock()
        if verdict.ended_alert and record.alert_ts and record.alert_channel:
            if verdict.status == Status.FREE:
                text = "*Scaled to zero*: its compute pools have no nodes, so it costs nothing now."
            else:
                text = f"*No longer idle*: {escape(verdict.ended_alert)}."
            await self.messenger.update(
                record.alert_channel,
                record.alert_ts,
                closed_alert(entry.cluster, "no longer idle", text),
            )
            await self._update(
                entry.cluster, lambda r: replace(r, alert_ts=None, alert_channel=None)
            )
            return 0
        if verdict.alert:
            if record.alert_ts and record.alert_channel:
                text = f"*Still idle*: alerted again at {slack_time(now)}, below."
                await self.messenger.update(
                    record.alert_channel,
                    record.alert_ts,
                    closed_alert(entry.cluster, "still idle", text),
                )
            ts = await self.messenger.post(
                self.alert_channel, alert_card(entry, now, self.rules.auto_action)
            )
            channel = self.alert_channel
            await self._update(
                entry.cluster, lambda r: replace(r, alert_ts=ts, alert_channel=channel)
            )
            return 1
        if verdict.auto_action_due:
            await self._auto_act(entry)
        return 0

    async def _auto_act(self, entry: IdleEntry) -> None:
        cancelled = await self._update(entry.cluster, lambda r: replace(r, auto_action_at=None))
        kind = self.rules.auto_action
        try:
            cluster = await self.vertex.get_cluster(entry.cluster)
            plan = (
                plan_scale_to_zero(cluster, self.prices)
                if kind == "scale_to_zero"
                else plan_delete(cluster, self.prices)
            )
            channel = cancelled.alert_channel or self.alert_channel or ""
            request = await self.changes.submit_approved(
                "policy", channel, plan, origin="idle-auto"
            )
        except (PlanError, CommandError, VertexError) as error:
            log.warning("auto-action on %s not taken: %s", entry.cluster, error)
            return
        if cancelled.alert_ts and cancelled.alert_channel and self.messenger is not None:
            text = (
                f"*Auto-action*: no one responded, so clusterbot asked to "
                f"{kind.replace('_', ' ')} (request `{request.id}`); progress under its card."
            )
            await self.messenger.update(
                cancelled.alert_channel,
                cancelled.alert_ts,
                closed_alert(entry.cluster, "auto-action", text),
            )

    async def _forget_deleted(self, present: set[str], listed_targets: set[str]) -> None:
        for record in await self.records.all():
            target = "/".join(record.cluster.split("/")[1:4:2])
            if record.cluster in present or target not in listed_targets:
                continue  # still there, or its target could not be listed this time
            if record.alert_ts and record.alert_channel and self.messenger is not None:
                await self.messenger.update(
                    record.alert_channel,
                    record.alert_ts,
                    closed_alert(
                        record.cluster, "deleted", "*Deleted*: the cluster no longer exists."
                    ),
                )
            await self.records.delete(record.cluster)

    # -- clicks --------------------------------------------------------------------------------

    async def click(self, action: str, actor: str, role: Role, value: str) -> Reply | None:
        """Answer an idle-alert button; a reply is shown to the clicker alone."""
        if role < Role.OPERATOR:
            return Reply("Not allowed").add(
                Text(f"Acting on idle alerts needs the operator role; you are {role.label}.")
            )
        if action == "idle_snooze":
            seconds_text, _, cluster = value.partition("|")
            until = self.clock() + float(seconds_text)
            record = await self._update(
                cluster,
                lambda r: replace(r, snoozed_until=until, snoozed_by=actor, auto_action_at=None),
            )
            await self._close(
                record,
                f"*Snoozed* by {mention(actor)} for {float(seconds_text) / 3600:g} h; clusterbot "
                "will say again if it is still idle then.",
            )
            return None
        if action == "idle_keep":
            record = await self._update(
                value,
                lambda r: replace(r, kept_by=actor, kept_at=self.clock(), auto_action_at=None),
            )
            await self._close(record, kept_text(record))
            return None
        if action == "idle_unkeep":
            # watched again from now: a cluster still idle is alerted at the next sweep
            await self._update(
                value,
                lambda r: replace(r, kept_by=None, kept_at=None, alerted_at=None, alert_ts=None),
            )
            return Reply("No longer kept").add(
                Text(f"{escape(value.rsplit('/', 1)[-1])} is watched for idleness again.")
            )
        kind = "delete" if action == "idle_delete" else "scale_to_zero"
        return await self._request(kind, actor, role, value)

    async def _request(self, kind: str, actor: str, role: Role, cluster_name: str) -> Reply | None:
        record = await self._update(cluster_name, lambda r: replace(r, auto_action_at=None))
        try:
            cluster = await self.vertex.get_cluster(cluster_name)
            plan: ChangePlan = (
                plan_delete(cluster, self.prices)
                if kind == "delete"
                else plan_scale_to_zero(cluster, self.prices)
            )
            channel = record.alert_channel or self.alert_channel or ""
            if may_approve(self.changes.policy, role, plan.kind):
                request = await self.changes.submit_approved(actor, channel, plan, origin="idle")
                verb = "approved"
            else:
                request = await self.changes.submit(actor, channel, plan, origin="idle")
                verb = "requested (an approver must approve the card)"
        except (PlanError, CommandError) as error:
            return Reply("Not possible").add(Text(escape(str(error))))
        except VertexError as error:
            return Reply("Control plane error").add(Text(escape(error.user_message)))
        what = "delete" if kind == "delete" else "scale to zero"
        await self._close(
            record,
            f"*{what.capitalize()}* {verb} by {mention(actor)}: request `{request.id}`"
            + (", running" if request.state == RequestState.RUNNING else ""),
        )
        return None

    async def _close(self, record: IdleRecord, text: str) -> None:
        if record.alert_ts and record.alert_channel and self.messenger is not None:
            await self.messenger.update(
                record.alert_channel,
                record.alert_ts,
                closed_alert(record.cluster, "answered", text),
            )
