"""What the bot does for each command: typed command and caller in, neutral reply out."""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.approvals import Approvals
from handlers.clusters import ClusterDirectory, list_reply, show_reply
from handlers.commands import (
    CLUSTER_HELP,
    SUMMARY,
    USAGE,
    Audit,
    Command,
    Delete,
    Help,
    Idle,
    ListClusters,
    Ops,
    Resize,
    Show,
)
from handlers.costs import PriceBook
from handlers.idle_alert import report
from handlers.policy import Role
from handlers.ports import Clock, OperationStore, RequestStore
from handlers.replies import Button, Buttons, Heading, Note, Reply, Table, Text, escape
from handlers.sweep import Sweeper
from handlers.words import duration

AUDIT_ROWS = 20


def needed_role(command: Command) -> Role:
    return Role.OPERATOR if isinstance(command, Resize | Delete) else Role.VIEWER


def help_reply(topic: str | None) -> Reply:
    if topic:
        return Reply(f"/cluster {topic}").add(
            Text(f"`{escape(USAGE[topic])}`\n{escape(SUMMARY[topic])}"), Note(escape(CLUSTER_HELP))
        )
    lines = [f"{USAGE[name]:<48} {SUMMARY[name]}" for name in USAGE]
    return Reply("clusterbot help").add(
        Heading("clusterbot: Vertex AI training clusters from Slack"),
        Table(tuple(escape(line) for line in lines)),
        Note(escape(CLUSTER_HELP)),
        Note("Changes are posted as a card in the channel; a second person approves them."),
    )


class ClusterBot:
    def __init__(
        self,
        directory: ClusterDirectory,
        changes: Approvals,
        requests: RequestStore,
        operations: OperationStore,
        prices: PriceBook,
        clock: Clock,
        sweeper: Sweeper | None = None,
    ) -> None:
        self.sweeper = sweeper
        self.directory = directory
        self.changes = changes
        self.requests = requests
        self.operations = operations
        self.prices = prices
        self.clock = clock

    async def handle(self, command: Command, actor: str, channel: str) -> Reply | None:
        """The reply for the caller, or None when the answer was posted in the channel."""
        if isinstance(command, Help):
            return help_reply(command.topic)
        if isinstance(command, ListClusters):
            listings = await self.directory.listings(self.directory.read_deadline)
            return list_reply(listings, self.prices)
        if isinstance(command, Show):
            return show_reply(await self.directory.resolve(command.cluster, "show"), self.prices)
        if isinstance(command, Resize | Delete):
            await self.changes.request_change(actor, channel, command)
            return None
        if isinstance(command, Ops):
            return await self.ops()
        if isinstance(command, Audit):
            return await self.audit(command.cluster)
        assert isinstance(command, Idle)
        return await self.idle_report()

    async def idle_report(self) -> Reply:
        """The last sweep's report, at once, saying how old it is, with "Sweep now"."""
        if self.sweeper is None:
            return Reply("Idle report").add(Text("Idle detection is not configured."))
        latest = await self.sweeper.latest()
        if latest is None:
            return Reply("Idle report").add(
                Heading("Idle report"),
                Text("No sweep has finished yet. Sweep now, or wait for the scheduled sweep."),
                Buttons((Button("idle_sweep_now", "Sweep now", "sweep", style="primary"),)),
            )
        return report(
            latest.entries,
            latest.failures,
            self.clock(),
            swept_at=latest.finished,
            sweep_button=True,
        )

    async def ops(self) -> Reply:
        operations = [o for o in await self.operations.active_operations() if not o.done]
        reply = Reply(f"{len(operations)} operations in flight")
        reply.add(Heading(f"Operations in flight ({len(operations)})"))
        if not operations:
            return reply.add(Text("None: no change is running right now."))
        now = self.clock()
        rows = [f"{'CLUSTER':<10} {'AGE':>12}  {'REQUEST':<14} PROGRESS"]
        for operation in operations:
            rows.append(
                f"{operation.cluster.rsplit('/', 1)[-1]:<10} "
                f"{duration(now - operation.started_at):>12}  {operation.request_id:<14} "
                f"{operation.progress or 'starting'}"
            )
        return reply.add(Table(tuple(escape(r) for r in rows)))

    async def audit(self, cluster: str | None) -> Reply:
        entries = await self.requests.audit_log(limit=500 if cluster else AUDIT_ROWS)
        if cluster:
            entries = [
                e for e in entries if e.cluster == cluster or e.cluster.endswith(f"/{cluster}")
            ][:AUDIT_ROWS]
        title = f"Audit log{f' for {cluster}' if cluster else ''}"
        reply = Reply(title).add(Heading(title))
        if not entries:
            return reply.add(Text("Nothing recorded yet."))
        rows = []
        for entry in entries:
            when = datetime.fromtimestamp(entry.at, UTC).strftime("%m-%d %H:%M:%S")
            rows.append(
                f"{when}  {entry.cluster.rsplit('/', 1)[-1]:<10} {entry.action:<18} "
                f"{entry.actor:<12} {entry.request_id or ''}"
            )
        return reply.add(Table(tuple(escape(r) for r in rows)), Note("Newest first, times in UTC."))
