"""Read-only use cases: resolve a cluster by short id, list every cluster, show one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bot.vertex.client import TargetListing, VertexClient
from bot.vertex.errors import NotFoundError, VertexError
from bot.vertex.models import Cluster, ClusterName, Target
from handlers.commands import CommandError
from handlers.costs import PRICES_AS_OF, PriceBook, money
from handlers.replies import Fields, Heading, Note, Reply, Table, Text, escape

LIST_ROWS = 40  # rows in one list message; more are counted, not shown
SHOW_EVENTS = 5


class ClusterDirectory:
    """Finds clusters across every configured target."""

    def __init__(self, vertex: VertexClient, targets: Sequence[Target]) -> None:
        self.vertex = vertex
        self.targets = list(targets)

    async def listings(self) -> list[TargetListing]:
        return await self.vertex.list_targets(self.targets)

    async def resolve(self, key: str, subcommand: str) -> Cluster:
        """A cluster by full name, or by short id when exactly one target has it."""
        if key.startswith("projects/"):
            try:
                return await self.vertex.get_cluster(ClusterName.parse(key))
            except NotFoundError:
                raise CommandError(f"there is no cluster {key}", subcommand) from None
        listings = await self.listings()
        found = [c for listing in listings for c in listing.clusters if c.cluster_id == key]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(c.name or "" for c in found)
            raise CommandError(f"{key} is ambiguous; use a full name: {names}", subcommand)
        failed = [f"{x.target} ({x.error.status})" for x in listings if x.error is not None]
        searched = ", ".join(str(t) for t in self.targets) or "no targets"
        reason = f"there is no cluster {key} in {searched}"
        if failed:
            reason += f"; could not list {', '.join(failed)}"
        raise CommandError(reason, subcommand)


def _pools_summary(cluster: Cluster) -> str:
    return ", ".join(
        f"{p.id}: {p.node_count} x {p.machine_description}" for p in cluster.node_pools
    )


def list_reply(listings: Sequence[TargetListing], prices: PriceBook) -> Reply:
    clusters = [c for listing in listings for c in listing.clusters]
    total = sum(len(listing.clusters) for listing in listings)
    reply = Reply(summary=f"{total} clusters")
    reply.add(Heading(f"Clusters ({total})"))
    if clusters:
        rows = [f"{'CLUSTER':<10} {'TARGET':<28} {'STATE':<12} {'$/H':>10}  POOLS"]
        for cluster in clusters[:LIST_ROWS]:
            cost = prices.cluster_hour(cluster)
            rows.append(
                f"{cluster.cluster_id:<10} {cluster.target!s:<28} {cluster.state:<12} "
                f"{money(cost, per_hour=False):>10}  {_pools_summary(cluster)}"
            )
        reply.add(Table(tuple(escape(r) for r in rows)))
    else:
        reply.add(Text("No clusters in the configured targets."))
    if total > LIST_ROWS:
        reply.add(
            Note(
                f"and {total - LIST_ROWS} more not shown; use `/cluster show CLUSTER` for one, "
                "or narrow CLUSTERBOT_TARGETS"
            )
        )
    for listing in listings:
        if listing.error is not None:
            reply.add(
                Note(f"Could not list {listing.target}: {escape(listing.error.user_message)}")
            )
    known = [prices.cluster_hour(c) for c in clusters]
    if clusters:
        priced = sum(k for k in known if k is not None)
        unknown = sum(1 for k in known if k is None)
        tail = f"; {unknown} with unknown prices" if unknown else ""
        reply.add(Note(f"Estimated total {money(priced)}{tail} (list prices {PRICES_AS_OF})."))
    return reply


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "?"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def show_reply(cluster: Cluster, prices: PriceBook) -> Reply:
    slurm = cluster.slurm
    status = cluster.cluster_status
    reply = Reply(summary=f"{cluster.cluster_id}: {cluster.state}")
    title = (
        f"{cluster.cluster_id} ({cluster.display_name})"
        if cluster.display_name
        else cluster.cluster_id
    )
    reply.add(Heading(title[:150]))
    reply.add(
        Fields(
            (
                f"*Target*\n`{escape(cluster.target)}`",
                f"*State*\n{escape(cluster.state)}",
                f"*Estimated cost*\n{money(prices.cluster_hour(cluster))}",
                f"*Created*\n{_when(cluster.create_time)}",
            )
        )
    )
    if status and status.detail:
        reply.add(Note(escape(status.detail)))
    nodes = status.nodes_status or [] if status else []
    rows = [f"{'POOL':<10} {'NODES':>7}  {'STATES':<24} {'$/H':>10}  MACHINE"]
    for pool in cluster.node_pools:
        machine = pool.machine_description
        states: dict[str, int] = {}
        for node in nodes:
            if node.node_pool_id == pool.id:
                states[node.node_state or "?"] = states.get(node.node_state or "?", 0) + 1
        state_text = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "-"
        size = (
            f"{pool.node_count}"
            if pool.node_count == pool.max_node_count
            else f"{pool.node_count}:{pool.max_node_count}"
        )
        role = " (login)" if pool.id == cluster.login_pool_id else ""
        rows.append(
            f"{pool.id + role:<10} {size:>7}  {state_text:<24} "
            f"{money(prices.pool_hour(pool), per_hour=False):>10}  "
            f"{machine} ({pool.provisioning_model or '?'})"
        )
    reply.add(Table(tuple(escape(r) for r in rows)))
    partitions = slurm.partitions or []
    default = slurm.default_partition_id or (partitions[0].id if partitions else None)
    partition_text = (
        ", ".join(
            f"`{escape(p.id)}`{' (default)' if p.id == default else ''}: "
            f"{escape(', '.join(p.node_pool_ids))}"
            for p in partitions
        )
        or "none"
    )
    config = slurm.config or {}
    settings = ", ".join(f"`{escape(k)}={escape(v)}`" for k, v in sorted(config.items())) or "none"
    reply.add(
        Fields(
            (
                f"*Partitions*\n{partition_text}",
                f"*Login pool*\n`{escape(slurm.login_node_pool_id or '?')}`",
                f"*Home storage*\n`{escape(slurm.home_directory_storage or '?')}`",
                f"*Prolog / epilog*\n{len(slurm.prolog_bash_scripts or [])} / "
                f"{len(slurm.epilog_bash_scripts or [])} scripts",
            )
        )
    )
    reply.add(Text(f"*slurm.conf settings*: {settings}"))
    events = (cluster.cluster_events or [])[:SHOW_EVENTS]
    if events:
        lines = [
            f"{_when(e.event_time)}  {e.event_type or '?'}: {e.event_message or ''}" for e in events
        ]
        reply.add(Text("*Recent events*"), Table(tuple(escape(line) for line in lines)))
    reply.add(Note(f"`{escape(cluster.name)}` · costs are estimates (list prices {PRICES_AS_OF})"))
    return reply


def error_text(error: VertexError, doing: str) -> str:
    """A control-plane failure in plain words, for the person who asked."""
    hints = {
        "PERMISSION_DENIED": "the bot's service account lacks permission",
        "UNAUTHENTICATED": "the bot's credentials were refused",
        "NOT_FOUND": "it does not exist (any more)",
        "UNAVAILABLE": "the control plane is unavailable; try again in a minute",
        "RESOURCE_EXHAUSTED": "the control plane is rate limiting; try again in a minute",
        "ABORTED": "another operation is running on the cluster; try again when it finishes",
    }
    hint = hints.get(error.status)
    return f"Could not {doing}: {error.user_message}" + (f" ({hint})" if hint else "")
