"""Resize: a node pool's MIN:MAX bounds changed, or every compute pool scaled to zero.

The plan holds each pool's bounds and cost before and after; the card shows them as a table,
and the PATCH sends the whole ``node_pools`` list with only those bounds changed.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.changes.effects import PATCH
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, fingerprint, require_running, total
from handlers.changes.pool_changes import PoolChange, bounds, describe, pool_change, pool_warnings
from handlers.costs import PriceBook, Range, money, money_range
from handlers.domain.models import Cluster
from handlers.domain.pools import ScalingSpec
from handlers.replies import Part, Table, Text, bullets

NAME: Final = "resize"


class ResizeDetail(Detail):
    kind: Literal["resize"] = NAME
    pools: tuple[PoolChange, ...] = ()

    @property
    def changed_pools(self) -> list[PoolChange]:
        return [p for p in self.pools if p.changed]

    @property
    def sizes(self) -> dict[str, tuple[int, int]]:
        return {p.pool_id: (p.min_after, p.max_after) for p in self.changed_pools}


ResizePlan = ChangePlan[ResizeDetail]


def plan_resize(
    cluster: Cluster, pool_id: str, min_nodes: int, max_nodes: int, prices: PriceBook
) -> ResizePlan:
    require_running(cluster)
    pool = cluster.pool(pool_id)
    if pool is None:
        pools = ", ".join(sorted(p.id for p in cluster.node_pools))
        raise PlanError(f"{cluster.cluster_id} has no node pool {pool_id!r}; its pools are {pools}")
    if pool_id == cluster.login_pool_id:
        if min_nodes != max_nodes:
            raise PlanError(
                f"{pool_id!r} is the login pool, whose min and max node counts must be equal "
                "(the API refuses otherwise); give one number"
            )
        if min_nodes == 0:
            raise PlanError(f"{pool_id!r} is the login pool; it cannot be scaled to zero")
    if (pool.min_nodes, pool.max_nodes) == (min_nodes, max_nodes):
        raise PlanError(
            f"pool {pool_id!r} of {cluster.cluster_id} already has bounds "
            f"{bounds(min_nodes, max_nodes)} ({describe(min_nodes, max_nodes)})"
        )
    return plan_pools(cluster, {pool_id: (min_nodes, max_nodes)}, prices)


def plan_scale_to_zero(cluster: Cluster, prices: PriceBook) -> ResizePlan:
    """Every compute pool (not the login pool) to zero nodes."""
    require_running(cluster)
    targets = {p.id: (0, 0) for p in cluster.compute_pools() if p.max_nodes or p.min_nodes}
    if not targets:
        raise PlanError(f"every compute pool of {cluster.cluster_id} is already at zero nodes")
    return plan_pools(cluster, targets, prices)


def plan_pools(
    cluster: Cluster, sizes: dict[str, tuple[int, int]], prices: PriceBook
) -> ResizePlan:
    after = apply_sizes(cluster, sizes)
    changes = []
    for pool in cluster.node_pools:
        new = after.pool(pool.id)
        assert new is not None
        changes.append(pool_change(cluster, pool, new, prices))
    high = (c.cost_after if c.cost_after_high is None else c.cost_after_high for c in changes)
    return ChangePlan(
        cluster=cluster.name or "",
        detail=ResizeDetail(pools=tuple(changes)),
        update_mask=("node_pools",),
        cost_before=prices.cluster_hour(cluster),
        cost_after=total(c.cost_after for c in changes),
        cost_after_high=total(high),
        fingerprint=fingerprint(cluster),
        warnings=pool_warnings(changes),
    )


def apply_sizes(cluster: Cluster, sizes: dict[str, tuple[int, int]]) -> Cluster:
    """The cluster with these pools resized; every other field, known or not, kept as is."""
    changed = cluster.model_copy(deep=True)
    for pool in changed.node_pools:
        if pool.id in sizes:
            low, high = sizes[pool.id]
            if pool.scaling_spec is None:
                pool.scaling_spec = ScalingSpec()
            pool.scaling_spec.min_node_count = low
            pool.scaling_spec.max_node_count = high
    return changed


def _diff(pools: tuple[PoolChange, ...]) -> Table:
    rows = []
    for change in pools:
        if change.changed:
            nodes = f"{change.bounds_before} -> {change.bounds_after}"
            after = Range(change.cost_after, change.cost_after_high or change.cost_after)
        else:
            nodes = f"{change.bounds_after} (same)"
            after = Range(change.cost_after, change.cost_after)
        cost_before = money(change.cost_before, per_hour=False)
        after_words = money_range(after, per_hour=False)
        rows.append((change.pool_id, change.machine, nodes, cost_before, after_words))
    titles = ("POOL", "MACHINE", "NODES", "$/H BEFORE", "$/H AFTER")
    return Table.of(titles, rows, right=frozenset({2, 3, 4}))


class ResizeKind(ChangeKind[ResizeDetail]):
    name = NAME
    detail = ResizeDetail
    effect = PATCH
    doing = "resize"
    heading = "Resize request"
    verb = "resize"

    def title(self, plan: ResizePlan) -> str:
        changed = ", ".join(c.pool_id for c in plan.detail.changed_pools)
        return f"{self.heading}: {plan.cluster_id} / {changed}"

    def card(self, plan: ResizePlan) -> list[Part]:
        words = [c.words for c in plan.detail.changed_pools]
        return [Text(bullets(words)), _diff(plan.detail.pools)]

    def wanted(self, plan: ResizePlan) -> str:
        return ", ".join(f"{p} {lo}:{hi}" for p, (lo, hi) in plan.detail.sizes.items())

    def words(self, plan: ResizePlan) -> str:
        return "; ".join(c.words for c in plan.detail.changed_pools) or self.wanted(plan)

    def apply(self, cluster: Cluster, plan: ResizePlan) -> Cluster:
        return apply_sizes(cluster, plan.detail.sizes)

    def applied(self, plan: ResizePlan, current: Cluster) -> bool:
        for pool_id, (low, high) in plan.detail.sizes.items():
            pool = current.pool(pool_id)
            if pool is None or (pool.min_nodes, pool.max_nodes) != (low, high):
                return False
        return True

    def changed(self, plan: ResizePlan, current: Cluster) -> str | None:
        for change in plan.detail.pools:
            pool = current.pool(change.pool_id)
            if pool is None:
                return f"pool {change.pool_id!r} no longer exists"
            if (pool.min_nodes, pool.max_nodes) != (change.min_before, change.max_before):
                return (
                    f"pool {change.pool_id!r} now has bounds {pool.bounds} "
                    f"(was {change.bounds_before} when this was requested)"
                )
        return None


RESIZE = ResizeKind()
