"""Restore: a deleted cluster created again from the spec kept before its delete.

The plan holds that spec, the deleted cluster's name and when its spec was kept; the card
shows what the create makes and what it costs. The cluster must not exist when it is sent
(the ``Create`` effect), and it is done once the cluster is RUNNING.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from handlers.changes.effects import CREATE
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail
from handlers.changes.pool_changes import PoolChange
from handlers.costs import PriceBook, Range, money_range
from handlers.domain.models import Cluster
from handlers.domain.pools import ClusterState
from handlers.entities import KeptSpec
from handlers.replies import Code, Line, Note, Part, Strong, Table, Text, bullets
from handlers.words import plural, stamp

NAME: Final = "restore"
CREATE_ID = "modelDevelopmentClusterId"  # the create's query parameter
ABSENT = "absent"  # the fingerprint of a cluster that does not exist


class RestoreDetail(Detail):
    kind: Literal["restore"] = NAME
    spec: dict[str, Any]  # the body to create the cluster with
    restored_from: str  # the deleted cluster's name
    kept_at: float  # when its spec was kept
    pools: tuple[PoolChange, ...] = ()  # each pool from nothing to its bounds, priced


RestorePlan = ChangePlan[RestoreDetail]


def created_pools(cluster: Cluster, prices: PriceBook) -> tuple[PoolChange, ...]:
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


def plan_restore(kept: KeptSpec, name: str, prices: PriceBook) -> RestorePlan:
    pools = created_pools(Cluster.model_validate(kept.spec), prices)
    cost = cost_of(pools)
    detail = RestoreDetail(
        spec=kept.spec, restored_from=kept.cluster, kept_at=kept.kept_at, pools=pools
    )
    return ChangePlan(
        cluster=name,
        detail=detail,
        cost_before=0.0,
        cost_after=cost.low,
        cost_after_high=cost.high,
        fingerprint=ABSENT,
    )


def _facts(cluster: Cluster) -> list[str]:
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
    return facts


class RestoreKind(ChangeKind[RestoreDetail]):
    name = NAME
    detail = RestoreDetail
    effect = CREATE
    doing = "restore"
    heading = "Restore request"

    def ask(self, plan: RestorePlan) -> Line:
        return (" asks to create ", Strong(plan.cluster_id), " again (", Code(plan.target), ").")

    def card(self, plan: RestorePlan) -> list[Part]:
        """What the create makes: pools with machines, bounds and cost (priced when planned);
        Slurm's layout; storage."""
        detail = plan.detail
        rows = [
            (
                pool.pool_id,
                pool.machine,
                pool.bounds_after,
                money_range(Range(pool.cost_after, pool.cost_after_high), per_hour=False),
            )
            for pool in detail.pools
        ]
        return [
            Table.of(("POOL", "MACHINE", "NODES", "$/H"), rows, right=frozenset({2, 3})),
            Text(bullets(_facts(Cluster.model_validate(detail.spec)))),
            Note(
                "Created with ",
                Code(
                    f"POST …/modelDevelopmentClusters?modelDevelopmentClusterId={plan.cluster_id}"
                ),
                f" from the spec kept {stamp(detail.kept_at)}, before ",
                Code(detail.restored_from),
                " was deleted; nodes start at each pool's minimum.",
            ),
        ]

    def wanted(self, plan: RestorePlan) -> str:
        return "the cluster RUNNING"

    def words(self, plan: RestorePlan) -> str:
        return "create it again from its kept spec"

    def created(self, plan: RestorePlan) -> Cluster:
        return Cluster.model_validate(plan.detail.spec)

    def applied(self, plan: RestorePlan, current: Cluster) -> bool:
        return current.state == ClusterState.RUNNING


RESTORE = RestoreKind()
