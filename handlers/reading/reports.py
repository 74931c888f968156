"""The read-only answers: the clusters, one cluster, operations in flight, the audit log and
the idle report."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from handlers.actions import SweepNow
from handlers.costs import PriceBook
from handlers.domain.errors import SlurmUnreadableError
from handlers.domain.operations import Share
from handlers.grammar import CommandError, echo
from handlers.messenger import Messenger, MessengerError
from handlers.ports import (
    ActivityReader,
    Clock,
    IdleRecordStore,
    OperationStore,
    People,
    RequestStore,
)
from handlers.reading.audit import Audit, AuditLog
from handlers.reading.clusters import ClusterDirectory, ListRow, list_reply, show_reply
from handlers.reading.deleted import deleted_reply
from handlers.replies import Button, Buttons, Heading, Note, Reply, Table, Text, UserRef, notice
from handlers.slurm.jobs_view import fairshare_reply, jobs_reply
from handlers.slurm.scripts import script_reply
from handlers.slurm.view import slurm_reply
from handlers.sweep.alert import report
from handlers.sweep.health import ClusterHealth
from handlers.sweep.report import SweepReport
from handlers.sweep.since import as_now
from handlers.words import duration


def _unreadable(cluster_id: str, error: SlurmUnreadableError) -> Reply:
    return Reply(f"Slurm on {cluster_id} could not be read").add(
        Text(f"Slurm on {cluster_id} could not be read: {error.reason}")
    )


NO_IDLE = "Idle detection is not configured."


class Sweeps(Protocol):
    """What the read side asks of the sweeper: its last report, the records it keeps, and
    a sweep now ("Sweep now"); the sweep itself, its alerts and their remedies are not here."""

    @property
    def records(self) -> IdleRecordStore: ...

    async def latest(self) -> SweepReport | None: ...

    async def sweep(self, *, alerts: bool = True, force: bool = False) -> SweepReport | None: ...


class Reports:
    def __init__(
        self,
        *,
        directory: ClusterDirectory,
        requests: RequestStore,
        operations: OperationStore,
        prices: PriceBook,
        clock: Clock,
        activity: ActivityReader,
        people: People,
        sweeper: Sweeps | None = None,
        messenger: Messenger | None = None,
    ) -> None:
        self.people = people
        self.messenger = messenger
        self.activity = activity
        self.directory = directory
        self.requests = requests
        self.operations = operations
        self.prices = prices
        self.clock = clock
        self.sweeper = sweeper
        # where "Sweep now" sweeps when not here (the service's child process): whether it did
        self.sweep_elsewhere: Callable[[bool], Awaitable[bool]] | None = None

    async def clusters(self) -> Reply:
        listings = await self.directory.kept(
            lambda cluster: ListRow.of(cluster, self.prices), self.directory.read_deadline
        )
        return list_reply(listings)

    async def cluster(self, key: str) -> Reply:
        """The cluster as the control plane has it, and its nodes as Slurm had them at the
        last sweep (a drained node is not just RUNNING)."""
        cluster = await self.directory.resolve(key, "show")
        latest = await self.sweeper.latest() if self.sweeper is not None else None
        entry = next(
            (e for e in (latest.entries if latest else []) if e.cluster == cluster.name), None
        )
        health = ClusterHealth.from_dict(entry.health) if entry and entry.health else None
        broken = {n.name: (str(n.trouble), n.reason) for n in (health.nodes if health else ())}
        swept = latest.finished if latest is not None else None
        return show_reply(cluster, self.prices, broken, swept)

    async def slurm(self, key: str) -> Reply:
        return slurm_reply(await self.directory.resolve(key, "slurm"))

    async def slurm_script(self, key: str, which: str, index: int) -> Reply:
        return script_reply(await self.directory.resolve(key, "slurm"), which, index)

    async def jobs(
        self, key: str, user: str | None, partition: str | None, state: str | None
    ) -> Reply:
        """The queue, and the fair-share factors for its pending jobs (left out, with a
        note, when slurmrestd does not serve them)."""
        cluster = await self.directory.resolve(key, "jobs")
        name, cid = cluster.name or "", cluster.cluster_id
        try:
            jobs = await self.activity.jobs(name)
        except SlurmUnreadableError as error:
            return _unreadable(cid, error)
        shares: list[Share] | None = None
        missing = None
        if any(j.pending for j in jobs):
            try:
                shares = await self.activity.shares(name)
            except SlurmUnreadableError as error:
                missing = error.reason
        reply = jobs_reply(
            cid, jobs, shares, self.clock(), user=user, partition=partition, state=state
        )
        if missing:
            reply.add(Note(f"Fair-share factors not shown: {missing}"))
        return reply

    async def deleted(self) -> Reply:
        return deleted_reply(await self.requests.deleted_specs(), self.prices)

    async def fairshare(self, key: str) -> Reply:
        cluster = await self.directory.resolve(key, "fairshare")
        try:
            shares = await self.activity.shares(cluster.name or "")
        except SlurmUnreadableError as error:
            return _unreadable(cluster.cluster_id, error)
        return fairshare_reply(cluster.cluster_id, shares)

    async def idle(self) -> Reply:
        """The last sweep's report, at once, saying how old it is, with "Sweep now"."""
        if self.sweeper is None:
            return Reply("Idle report").add(Text(NO_IDLE))
        latest = await self.sweeper.latest()
        if latest is None:
            return Reply("Idle report").add(
                Heading("Idle report"),
                Text("No sweep has finished yet. Sweep now, or wait for the scheduled sweep."),
                Buttons((Button(SweepNow(), "Sweep now", style="primary"),)),
            )
        now = self.clock()
        names = [e.cluster for e in latest.entries]
        records = await self.sweeper.records.get_many(names)
        entries = as_now(latest.entries, {k: r for k, (r, _v) in records.items()}, now)
        return report(
            entries,
            latest.failures,
            now,
            swept_at=latest.finished,
            sweep_button=True,
        )

    async def sweep_now(self, then: Callable[[], Awaitable[Reply]] | None = None) -> Reply:
        """Sweep at once (unless another replica is sweeping) and report: idleness, or what
        ``then`` makes of the new sweep (health's own reading of it)."""
        if self.sweeper is None:
            return Reply("Idle report").add(Text(NO_IDLE))
        if self.sweep_elsewhere is not None:
            swept = await self.sweep_elsewhere(True)
        else:
            swept = await self.sweeper.sweep(force=True) is not None
        reply = await (then or self.idle)()
        if not swept:
            reply.add(Text("Another replica is sweeping right now; this is the last report."))
        return reply

    async def ops(self) -> Reply:
        operations = [o for o in await self.operations.active_operations() if not o.done]
        reply = Reply(f"{len(operations)} operations in flight")
        reply.add(Heading(f"Operations in flight ({len(operations)})"))
        if not operations:
            return reply.add(Text("None: no change is running right now."))
        now = self.clock()
        rows = [
            (
                operation.cluster.rsplit("/", 1)[-1],
                duration(now - operation.started_at),
                operation.request_id,
                operation.progress or "starting",
            )
            for operation in operations
        ]
        return reply.add(
            Table.of(("CLUSTER", "AGE", "REQUEST", "PROGRESS"), rows, right=frozenset({1}))
        )

    def _person(self, query: Audit) -> Audit:
        """The query with its ``by`` as the person's id; a word that names nobody is refused."""
        if query.by is None:
            return query
        person = self.people.named(query.by)
        if person is None:
            raise CommandError(
                f"{echo(query.by)} is not a person: mention them (@name) or give their user id",
                "audit",
            )
        return replace(query, by=person)

    async def audit(self, query: Audit) -> Reply:
        return await AuditLog(self.requests).page(self._person(query), self.clock())

    async def audit_csv(self, query: Audit, channel: str, user: str) -> Reply:
        """The log as a CSV file shared in the channel it was asked in."""
        if self.messenger is None or not channel:
            return notice("No file", "clusterbot cannot share files here.")
        name, text, rows = await AuditLog(self.requests).csv(self._person(query), self.clock())
        try:
            await self.messenger.upload(
                channel, name, text, (f"Audit log, {rows} entries, asked by ", UserRef(user))
            )
        except MessengerError as error:
            return notice("No file", f"The file could not be shared ({error.code}).")
        return notice("Audit log shared", f"{name} ({rows} entries) is in the channel.")
