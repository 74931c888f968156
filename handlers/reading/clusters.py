"""Read-only use cases: resolve a cluster by short id, list every cluster, show one.

Interactive reads have a deadline (``READ_DEADLINE``): a target that does not answer in time is
named with the reason, and the rest is shown. A cluster that cannot be read is named with the
field at fault and never hides the others.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from handlers.costs import PRICES_AS_OF, PriceBook, money
from handlers.domain.errors import CredentialsError, NotFoundError, VertexError
from handlers.domain.facts import ClusterFacts
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName, Target
from handlers.grammar import CommandError, Refused
from handlers.ports import ControlPlane, K, Listing, TargetKept
from handlers.reading.shortage import shortage_advice
from handlers.replies import (
    Code,
    Field,
    Fields,
    Heading,
    Line,
    Link,
    Note,
    Reply,
    Strong,
    Table,
    Text,
    Time,
    joined,
)
from handlers.words import stamp

# The cluster's page in the Google Cloud console, under Vertex AI's training section. The
# console's paths are not documented (only the REST API is): this one may need changing.
CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/training/training-clusters/locations/"
    "{location}/clusters/{cluster}?project={project}"
)
LIST_ROWS = 40  # rows in one list message; more are counted, not shown
SHOW_EVENTS = 5
READ_DEADLINE = 10.0  # seconds an interactive read waits for a slow or failing target


class ClusterDirectory:
    """Finds clusters across every configured target."""

    def __init__(
        self, vertex: ControlPlane, targets: Sequence[Target], read_deadline: float = READ_DEADLINE
    ) -> None:
        self.vertex = vertex
        self.targets = list(targets)
        self.read_deadline = read_deadline

    async def listings(self, deadline: float | None = None) -> Sequence[Listing]:
        return await self.vertex.list_targets(self.targets, deadline)

    async def kept(
        self, keep: Callable[[ClusterFacts], K], deadline: float | None = None
    ) -> Sequence[TargetKept[K]]:
        """Every target, keeping only ``keep(cluster)`` of each cluster (for a sweep of
        thousands, whose whole resources need not be held at once)."""
        return await self.vertex.list_kept(self.targets, keep, deadline)

    def confine(self, name: str) -> None:
        """Refuse a cluster outside ``CLUSTERBOT_TARGETS`` before anything is asked of the
        control plane: the service account may reach other projects, and the people in the
        channel must not through it. The answer names no target, since a caller of the
        release hook may not see them."""
        try:
            target = ClusterName.parse(name).target
        except ValueError as error:
            raise Refused(str(error)) from None
        if target not in self.targets:
            raise Refused(f"{name} is not in a project and region clusterbot manages")

    async def resolve(self, key: str, subcommand: str) -> Cluster:
        """A cluster by full name, or by short id when exactly one target has it."""
        if key.startswith("projects/"):
            self.confine(key)
            try:
                return await self.vertex.get_cluster(ClusterName.parse(key), self.read_deadline)
            except NotFoundError:
                raise CommandError(f"there is no cluster {key}", subcommand) from None
        listings = await self.listings(self.read_deadline)
        found = [c for listing in listings for c in listing.clusters if c.cluster_id == key]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(c.name or "" for c in found)
            raise CommandError(f"{key} is ambiguous; use a full name: {names}", subcommand)
        for listing in listings:
            for bad in listing.unreadable:
                if bad.name.rsplit("/", 1)[-1] == key:
                    raise Refused(f"{key} exists but clusterbot cannot read it ({bad.problem})")
        failed = [x for x in listings if x.error is not None]
        if failed:
            reasons = "; ".join(f"{x.target}: {x.error.user_message}" for x in failed)
            read = ", ".join(str(x.target) for x in listings if x.error is None) or "none"
            raise Refused(
                f"{key} is not in the targets that could be read ({read}); these could not be "
                f"read, so it may be there: {reasons}"
            )
        searched = ", ".join(str(t) for t in self.targets) or "no targets"
        known = [c.cluster_id for listing in listings for c in listing.clusters]
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise CommandError(f"there is no cluster {key} in {searched}{hint}", subcommand)


def console_link(name: str) -> Link | str:
    """A link to the cluster in the console, for a full resource name (else the name)."""
    parts = name.split("/")
    if len(parts) != 6 or parts[0] != "projects":
        return name
    url = CONSOLE_URL.format(project=parts[1], location=parts[3], cluster=parts[5])
    return Link(url, "open in the console")


def pool_lines(cluster: ClusterFacts, pools: Sequence[str] | None = None) -> tuple[str, ...]:
    """``a4: 2 x a4-highgpu-8g (8 x NVIDIA_B200)`` for each pool, its nodes as they are now."""
    parts = []
    for pool in cluster.node_pools:
        if pools is not None and pool.id not in pools:
            continue
        scaling = f" (scales {pool.min_nodes}–{pool.max_nodes})" if pool.scales_with_queue else ""
        parts.append(f"{pool.id}: {cluster.nodes(pool)} x {pool.machine_description}{scaling}")
    return tuple(parts)


def pools_summary(cluster: ClusterFacts, pools: Sequence[str] | None = None) -> str:
    return ", ".join(pool_lines(cluster, pools))


class ListRow(NamedTuple):
    """What the list shows of a cluster, taken from each page as it is read (a tuple of text
    and numbers: the pools and nodes it was read into are freed at once)."""

    cluster_id: str
    target: str
    state: str
    cost_hour: float | None
    pools: tuple[str, ...]

    @classmethod
    def of(cls, cluster: ClusterFacts, prices: PriceBook) -> ListRow:
        cost = prices.cluster_hour(cluster)
        return cls(
            cluster.cluster_id, str(cluster.target), cluster.state, cost, pool_lines(cluster)
        )


def listing_notes(listings: Sequence[TargetKept[Any]]) -> list[Note]:
    """Every target that could not be listed and every cluster that could not be read."""
    notes = []
    for listing in listings:
        if listing.error is not None:
            notes.append(Note(f"Could not list {listing.target}: {listing.error.user_message}"))
        for bad in listing.unreadable:
            notes.append(Note("Could not read ", Code(bad.name), f": {bad.problem}"))
    return notes


def _where(target: str, region_only: bool) -> str:
    return target.split("/", 1)[-1] if region_only else target


def list_reply(listings: Sequence[TargetKept[ListRow]]) -> Reply:
    clusters = [c for listing in listings for c in listing.kept]
    costs = [c.cost_hour for c in clusters]
    total = len(clusters)
    reply = Reply(summary=f"{total} clusters")
    projects = {c.target.split("/", 1)[0] for c in clusters}
    one = len(projects) == 1  # the project said once, above; each row its region
    where = f" in {next(iter(projects))}" if one else ""
    reply.add(Heading(f"Clusters ({total}){where}"))
    if clusters:
        # a row for each pool, the cluster's own cells on its first: a table that fits the
        # message pane where one line of every pool would not
        rows = [
            (c.cluster_id, _where(c.target, one), c.state, money(c.cost_hour, per_hour=False), pool)
            if i == 0
            else ("", "", "", "", pool)
            for c in clusters[:LIST_ROWS]
            for i, pool in enumerate(c.pools or ("-",))
        ]
        columns = ("CLUSTER", "REGION" if one else "TARGET", "STATE", "$/H", "POOLS")
        reply.add(Table.of(columns, rows, right=frozenset({3})))
    else:
        reply.add(Text("No clusters could be listed in the configured targets."))
    if total > LIST_ROWS:
        reply.add(
            Note(
                f"and {total - LIST_ROWS} more not shown; use ",
                Code("/cluster show CLUSTER"),
                " for one, or narrow CLUSTERBOT_TARGETS",
            )
        )
    reply.add(*listing_notes(listings))
    if clusters:
        priced = sum(k for k in costs if k is not None)
        unknown = sum(1 for k in costs if k is None)
        tail = f"; {unknown} with unknown prices" if unknown else ""
        reply.add(
            Note(
                f"Estimated total {money(priced)} for the nodes that exist now{tail} "
                f"(list prices {PRICES_AS_OF})."
            )
        )
    return reply


def _pools_table(
    cluster: Cluster, prices: PriceBook, broken: Mapping[str, tuple[str, str]]
) -> Table:
    """Each pool: its nodes, bounds, states (Slurm's out-of-service ones as Slurm said them),
    cost and machine."""
    status = cluster.cluster_status
    reported = (status.nodes_status or []) if status else []
    rows = []
    for pool in cluster.node_pools:
        states: dict[str, int] = {}
        for node in reported:
            if node.node_pool_id == pool.id:
                said = broken.get(node.instance_name or "", (node.node_state or "?", ""))[0]
                states[said] = states.get(said, 0) + 1
        state_text = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "-"
        role = " (login)" if pool.id == cluster.login_pool_id else ""
        model = pool.provisioning_model or "?"
        if pool.reserved and pool.reservation_name:
            model = f"{model} {pool.reservation_name}"
        rows.append(
            (
                pool.id + role,
                str(cluster.nodes(pool)),
                pool.bounds,
                state_text,
                money(prices.pool_hour(pool, cluster.nodes(pool)), per_hour=False),
                f"{pool.machine_description} ({model})",
            )
        )
    return Table.of(
        ("POOL", "NODES", "MIN:MAX", "STATES", "$/H", "MACHINE"),
        rows,
        right=frozenset({1, 2, 4}),
    )


def _slurm_parts(reply: Reply, cluster: Cluster) -> None:
    """The partitions, login pool, storage, scripts and slurm.conf settings."""
    slurm = cluster.slurm
    mounts: list[Line] = [
        (Code(pool.id), f": {m.rsplit('/', 1)[-1]}")
        for pool in cluster.node_pools
        for m in [*(pool.filestores or []), *(pool.lustres or [])]
    ]
    partitions = slurm.partitions or []
    default = slurm.default_partition
    partition_text: Line = joined(
        [
            (
                Code(p.id),
                f"{' (default)' if p.id == default else ''}: {', '.join(p.node_pool_ids)}",
            )
            for p in partitions
        ]
    ) or ("none",)
    config = slurm.config or {}
    settings = joined([Code(f"{k}={v}") for k, v in sorted(config.items())]) or ("none",)
    scripts = f"{len(slurm.prolog_bash_scripts or [])} / {len(slurm.epilog_bash_scripts or [])}"
    reply.add(
        Fields(
            (
                Field("Partitions", *partition_text),
                Field("Login pool", Code(slurm.login_node_pool_id or "?")),
                Field("Home storage", Code(slurm.home_directory_storage or "?")),
                Field("Prolog / epilog", f"{scripts} scripts"),
            )
        )
    )
    if mounts:
        reply.add(Text(Strong("Mounted storage"), ": ", *joined(mounts)))
    reply.add(Text(Strong("slurm.conf settings"), ": ", *settings))


def show_reply(
    cluster: Cluster,
    prices: PriceBook,
    broken: Mapping[str, tuple[str, str]] | None = None,
    swept_at: float | None = None,
) -> Reply:
    """The cluster as the control plane describes it; ``broken``: its nodes Slurm had out
    of service at the last sweep (name -> trouble, reason), counted by that state in the
    pools' states and named below them, so that show and health agree."""
    broken = broken or {}
    status = cluster.cluster_status
    reply = Reply(summary=f"{cluster.cluster_id}: {cluster.state}")
    title = (
        f"{cluster.cluster_id} · {cluster.display_name}"
        if cluster.display_name and cluster.display_name != cluster.cluster_id
        else cluster.cluster_id
    )
    reply.add(Heading(title[:150]))
    reply.add(
        Fields(
            (
                Field("Target", Code(str(cluster.target))),
                Field("State", cluster.state),
                Field("Estimated cost", money(prices.cluster_hour(cluster))),
                Field("Created", stamp(cluster.create_time)),
            )
        )
    )
    if status and status.detail:
        reply.add(Note(status.detail))
    reply.add(_pools_table(cluster, prices, broken))
    if broken:
        named = [(Code(name), f" {what} ({why})") for name, (what, why) in broken.items()]
        reply.add(
            Note(
                "Slurm at the last sweep",
                *((" (", Time(swept_at), ")") if swept_at is not None else ()),
                ": ",
                *joined(named),
                "; its VM may still run and be paid for (",
                Code(f"/cluster health {cluster.cluster_id}"),
                ").",
            )
        )
    _slurm_parts(reply, cluster)
    events = (cluster.cluster_events or [])[:SHOW_EVENTS]
    if events:
        happened = [
            (stamp(e.event_time), f"{e.event_type or '?'}: {e.event_message or ''}") for e in events
        ]
        reply.add(Text(Strong("Recent events")), Table.of(("", ""), happened))
    reply.add(
        Note(
            Code(cluster.name or ""),
            f" · costs are estimates (list prices {PRICES_AS_OF}) · ",
            console_link(cluster.name or ""),
        )
    )
    return reply


def error_text(error: VertexError, doing: str) -> str:
    """A control-plane failure in plain words, for the person who asked."""
    if isinstance(error, CredentialsError):
        return f"Could not {doing}: {error.user_message}"
    hints = {
        "PERMISSION_DENIED": "the bot's service account lacks permission",
        "UNAUTHENTICATED": "the bot's credentials were refused",
        "NOT_FOUND": "it does not exist (any more)",
        "UNAVAILABLE": "the control plane is unavailable; try again in a minute",
        "ABORTED": "another operation is running on the cluster; try again when it finishes",
        "DEADLINE_EXCEEDED": "the control plane did not answer in time; try again in a minute",
    }
    hint = shortage_advice(error) or hints.get(error.status)
    return f"Could not {doing}: {error.user_message}" + (f" ({hint})" if hint else "")
