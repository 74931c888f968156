"""Restore after delete: a deleted cluster created again from the spec kept before its delete.

Before the bot sends a DELETE it keeps the cluster's full spec without its output-only fields
(``Cluster.spec``). ``/cluster restore CLUSTER [as NEW_ID]`` plans a create of that spec in
the same project and region (``POST …/modelDevelopmentClusters?modelDevelopmentClusterId=``);
the card shows what will be created and its estimated cost, and the create operation is
followed like any change. ``/cluster deleted`` lists what can be restored.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.vertex.models import Cluster
from bot.vertex.names import ClusterName
from handlers.costs import PriceBook, Range, money_range
from handlers.entities import KeptSpec
from handlers.grammar import CommandError
from handlers.plans import ChangePlan, PlanKind
from handlers.pool_changes import PoolChange
from handlers.replies import Code, Heading, Note, Part, Reply, Table, Text
from handlers.words import plural, stamp

ABSENT = "absent"  # the fingerprint of a cluster that does not exist


def find_kept(kept: Sequence[KeptSpec], key: str) -> KeptSpec:
    """The kept spec for a short id or a full name; an unknown or ambiguous one is an error
    that says what can be restored."""
    found = [k for k in kept if key in (k.cluster, k.cluster_id)]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(k.cluster for k in found)
        raise CommandError(f"{key} is ambiguous; use a full name: {names}", "restore")
    known = ", ".join(sorted({k.cluster_id for k in kept})) or "none"
    raise CommandError(
        f"clusterbot kept no spec of a deleted cluster {key} (deleted clusters it can restore: "
        f"{known}; /cluster deleted lists them)",
        "restore",
    )


def restored_name(kept: KeptSpec, new_id: str | None) -> str:
    """The name to create: the same project and region, under its own id or ``new_id``."""
    name = ClusterName.parse(kept.cluster)
    return str(ClusterName(name.project, name.region, new_id or name.cluster_id))


def _pools(cluster: Cluster, prices: PriceBook) -> tuple[PoolChange, ...]:
    """Each pool from nothing to its bounds, with what it costs at its minimum and maximum."""
    changes = []
    for pool in cluster.node_pools:
        cost = prices.bounds_hour(pool, pool.min_nodes, pool.max_nodes)
        changes.append(
            PoolChange(
                pool_id=pool.id,
                machine=pool.machine_description,
                min_before=0,
                max_before=0,
                min_after=pool.min_nodes,
                max_after=pool.max_nodes,
                cost_before=0.0,
                cost_after=cost.low,
                cost_after_high=cost.high,
            )
        )
    return tuple(changes)


def cost_of(pools: Sequence[PoolChange]) -> Range:
    """What the pools cost once created: each at its minimum, up to its maximum."""
    low = high = 0.0
    for pool in pools:
        if pool.cost_after is None or pool.cost_after_high is None:
            return Range(None, None)
        low, high = low + pool.cost_after, high + pool.cost_after_high
    return Range(low, high)


def plan_restore(kept: KeptSpec, name: str, prices: PriceBook) -> ChangePlan:
    pools = _pools(Cluster.model_validate(kept.spec), prices)
    cost = cost_of(pools)
    return ChangePlan(
        kind=PlanKind.RESTORE,
        cluster=name,
        pools=pools,
        cost_before=0.0,
        cost_after=cost.low,
        cost_after_high=cost.high,
        fingerprint=ABSENT,
        spec=kept.spec,
        restored_from=kept.cluster,
        kept_at=kept.kept_at,
    )


def restore_parts(plan: ChangePlan) -> list[Part]:
    """What the create makes: pools with machines, bounds and cost (priced when planned);
    Slurm's layout; storage."""
    assert plan.spec is not None
    cluster = Cluster.model_validate(plan.spec)
    rows = [
        (
            pool.pool_id,
            pool.machine,
            pool.bounds_after,
            money_range(Range(pool.cost_after, pool.cost_after_high), per_hour=False),
        )
        for pool in plan.pools
    ]
    slurm = cluster.slurm
    facts = [
        f"partitions {', '.join(p.id for p in slurm.partitions or []) or 'none'} "
        f"(default {slurm.default_partition or 'none'}), login pool {slurm.login_node_pool_id}",
        f"{plural(len(slurm.config or {}), 'slurm.conf setting')}, "
        f"{plural(len(slurm.prolog_bash_scripts or []), 'prolog script')}, "
        f"{plural(len(slurm.epilog_bash_scripts or []), 'epilog script')}",
    ]
    if slurm.home_directory_storage:
        facts.append(
            f"home directories from {slurm.home_directory_storage}, which must still exist"
        )
    return [
        Table.of(("POOL", "MACHINE", "NODES", "$/H"), rows, right=frozenset({2, 3})),
        Text("\n".join(f"• {fact}" for fact in facts)),
        Note(
            "Created with ",
            Code(f"POST …/modelDevelopmentClusters?modelDevelopmentClusterId={plan.cluster_id}"),
            f" from the spec kept {stamp(plan.kept_at)}, before ",
            Code(plan.restored_from or ""),
            " was deleted; nodes start at each pool's minimum.",
        ),
    ]


def deleted_reply(kept: Sequence[KeptSpec], prices: PriceBook) -> Reply:
    """Every deleted cluster the bot can create again."""
    reply = Reply("Deleted clusters").add(Heading("Deleted clusters that can be restored"))
    if not kept:
        return reply.add(
            Text("None: clusterbot keeps a cluster's spec when it deletes one; none yet.")
        )
    rows = []
    for each in kept:
        cluster = Cluster.model_validate(each.spec)
        name = ClusterName.parse(each.cluster)
        pools = ", ".join(f"{p.id} {p.bounds}" for p in cluster.node_pools)
        rows.append(
            (
                each.cluster_id,
                name.target,
                stamp(each.kept_at),
                pools,
                money_range(cost_of(_pools(cluster, prices)), per_hour=False),
            )
        )
    return reply.add(
        Table.of(("CLUSTER", "TARGET", "DELETED", "POOLS", "$/H"), rows, right=frozenset({4})),
        Note(Code("/cluster restore CLUSTER [as NEW_ID]"), " creates one again, after approval."),
    )
