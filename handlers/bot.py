"""What the bot does for each command: typed command and caller in, neutral reply out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bot.store import Store
from handlers.cards import duration
from handlers.changes import ChangeService
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
from handlers.idle_cards import report
from handlers.policy import Role
from handlers.replies import Heading, Note, Reply, Table, Text, escape
from handlers.sweep import SweepReport

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
        changes: ChangeService,
        store: Store,
        prices: PriceBook,
        clock: Callable[[], float],
        sweep: Callable[[], Awaitable[SweepReport]] | None = None,
    ) -> None:
        self.sweep = sweep
        self.directory = directory
        self.changes = changes
        self.store = store
        self.prices = prices
        self.clock = clock

    async def handle(self, command: Command, actor: str, channel: str) -> Reply | None:
        """The reply for the caller, or None when the answer was posted in the channel."""
        if isinstance(command, Help):
            return help_reply(command.topic)
        if isinstance(command, ListClusters):
            return list_reply(await self.directory.listings(), self.prices)
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
        if self.sweep is None:
            return Reply("Idle report").add(Text("Idle detection is not configured."))
        result = await self.sweep()
        return report(result.entries, result.failures, self.clock())

    async def ops(self) -> Reply:
        operations = [o for o in await self.store.active_operations() if not o.done]
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
        entries = await self.store.audit_log(limit=500 if cluster else AUDIT_ROWS)
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
