"""Restore after delete: a deleted cluster created again from the spec kept before its delete.

Before the bot sends a DELETE it keeps the cluster's full spec without its output-only fields
(``Cluster.spec``). ``/cluster restore CLUSTER [as NEW_ID]`` plans a create of that spec in
the same project and region (``POST …/modelDevelopmentClusters?modelDevelopmentClusterId=``);
the card shows what will be created and its estimated cost, and the create operation is
followed like any change. ``/cluster deleted`` lists what can be restored.
"""

from __future__ import annotations

from collections.abc import Sequence

from handlers.changes.restore import cost_of, created_pools
from handlers.costs import PriceBook, money_range
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName
from handlers.entities import KeptSpec
from handlers.grammar import CommandError
from handlers.replies import Code, Heading, Note, Reply, Table, Text
from handlers.words import stamp


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
                money_range(cost_of(created_pools(cluster, prices)), per_hour=False),
            )
        )
    return reply.add(
        Table.of(("CLUSTER", "TARGET", "DELETED", "POOLS", "$/H"), rows, right=frozenset({4})),
        Note(Code("/cluster restore CLUSTER [as NEW_ID]"), " creates one again, after approval."),
    )
