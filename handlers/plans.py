"""Change plans: what a resize or delete will do, exactly, before anyone approves it.

A plan records the ``updateMask``, each pool's size before and after, the estimated cost per
hour before and after, what a delete loses, and a fingerprint of the cluster's configuration
when the plan was made. The API has no etag, so the fingerprint is how an approval notices
that the cluster changed in between.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.vertex.models import Cluster, ScalingSpec
from handlers.costs import PriceBook

# The parts of a cluster a change depends on; output fields (status, events) are left out.
FINGERPRINT_FIELDS = ("nodePools", "orchestratorSpec", "labels", "displayName")


class PlanError(Exception):
    """The change cannot be planned; the message is meant for the user."""


class PoolChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    pool_id: str
    machine: str
    min_before: int
    max_before: int
    min_after: int
    max_after: int
    cost_before: float | None
    cost_after: float | None

    @property
    def changed(self) -> bool:
        return (self.min_before, self.max_before) != (self.min_after, self.max_after)


class ChangePlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str  # resize | delete
    cluster: str
    update_mask: tuple[str, ...] = ()
    pools: tuple[PoolChange, ...] = ()
    cost_before: float | None = None
    cost_after: float | None = None
    fingerprint: str
    losses: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    @property
    def cost_delta(self) -> float | None:
        if self.cost_before is None or self.cost_after is None:
            return None
        return self.cost_after - self.cost_before


def fingerprint(cluster: Cluster) -> str:
    document = cluster.to_api()
    relevant: dict[str, Any] = {k: document.get(k) for k in FINGERPRINT_FIELDS}
    relevant["nodePools"] = sorted(relevant.get("nodePools") or [], key=lambda p: str(p["id"]))
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _require_running(cluster: Cluster) -> None:
    if cluster.state != "RUNNING":
        raise PlanError(
            f"{cluster.cluster_id} is {cluster.state}; changes can be requested when it is RUNNING"
        )


def plan_resize(
    cluster: Cluster, pool_id: str, min_nodes: int, max_nodes: int, prices: PriceBook
) -> ChangePlan:
    _require_running(cluster)
    pool = cluster.pool(pool_id)
    if pool is None:
        pools = ", ".join(p.id for p in cluster.node_pools)
        raise PlanError(f"{cluster.cluster_id} has no node pool {pool_id!r}; its pools are {pools}")
    if pool_id == cluster.login_pool_id and min_nodes == 0:
        raise PlanError(f"{pool_id!r} is the login pool; it cannot be scaled to zero")
    before = (pool.node_count, pool.max_node_count)
    if before == (min_nodes, max_nodes):
        raise PlanError(f"pool {pool_id!r} of {cluster.cluster_id} already has {min_nodes} nodes")
    return _plan_pools(cluster, {pool_id: (min_nodes, max_nodes)}, prices)


def plan_scale_to_zero(cluster: Cluster, prices: PriceBook) -> ChangePlan:
    """Every compute pool (not the login pool) to zero nodes."""
    _require_running(cluster)
    targets = {p.id: (0, 0) for p in cluster.compute_pools() if p.max_node_count or p.node_count}
    if not targets:
        raise PlanError(f"every compute pool of {cluster.cluster_id} is already at zero nodes")
    return _plan_pools(cluster, targets, prices)


def _plan_pools(
    cluster: Cluster, sizes: dict[str, tuple[int, int]], prices: PriceBook
) -> ChangePlan:
    changes = []
    after = apply_sizes(cluster, sizes)
    for pool in cluster.node_pools:
        new = after.pool(pool.id)
        assert new is not None
        changes.append(
            PoolChange(
                pool_id=pool.id,
                machine=pool.machine_description,
                min_before=pool.node_count,
                max_before=pool.max_node_count,
                min_after=new.node_count,
                max_after=new.max_node_count,
                cost_before=prices.pool_hour(pool),
                cost_after=prices.pool_hour(new),
            )
        )
    return ChangePlan(
        kind="resize",
        cluster=cluster.name or "",
        update_mask=("node_pools",),
        pools=tuple(changes),
        cost_before=prices.cluster_hour(cluster),
        cost_after=prices.cluster_hour(after),
        fingerprint=fingerprint(cluster),
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


def apply_plan(cluster: Cluster, plan: ChangePlan) -> Cluster:
    """The full resource to PATCH for a resize plan, built on the freshly read cluster."""
    sizes = {p.pool_id: (p.min_after, p.max_after) for p in plan.pools if p.changed}
    return apply_sizes(cluster, sizes)


def plan_delete(cluster: Cluster, prices: PriceBook) -> ChangePlan:
    if cluster.state in ("STOPPING", "PROVISIONING"):
        raise PlanError(f"{cluster.cluster_id} is {cluster.state}; it cannot be deleted now")
    nodes = sum(p.node_count for p in cluster.node_pools)
    slurm = cluster.slurm
    losses = [
        f"all {nodes} nodes in pools {', '.join(p.id for p in cluster.node_pools)}, with their "
        "local disks",
        "the Slurm controller, its queue (running and pending jobs are killed) and its "
        "accounting data",
    ]
    if slurm.partitions:
        losses.append("partitions " + ", ".join(p.id for p in slurm.partitions))
    scripts = len(slurm.prolog_bash_scripts or []) + len(slurm.epilog_bash_scripts or [])
    if scripts:
        losses.append(f"{scripts} prolog/epilog scripts and the slurm.conf settings")
    kept = []
    if slurm.home_directory_storage:
        kept.append(
            f"home directories in {slurm.home_directory_storage}: a separate resource, not "
            "deleted with the cluster"
        )
    return ChangePlan(
        kind="delete",
        cluster=cluster.name or "",
        cost_before=prices.cluster_hour(cluster),
        cost_after=0.0,
        fingerprint=fingerprint(cluster),
        losses=tuple(losses),
        kept=tuple(kept),
    )


def drift(plan: ChangePlan, current: Cluster) -> str | None:
    """Why the plan no longer fits the cluster as it is now, or None when it still does."""
    if plan.kind == "resize" and current.state != "RUNNING":
        return f"{current.cluster_id} is now {current.state}"
    if fingerprint(current) == plan.fingerprint:
        return None
    for change in plan.pools:
        pool = current.pool(change.pool_id)
        if pool is None:
            return f"pool {change.pool_id!r} no longer exists"
        if (pool.node_count, pool.max_node_count) != (change.min_before, change.max_before):
            return (
                f"pool {change.pool_id!r} now has {pool.node_count}:{pool.max_node_count} nodes "
                f"(was {change.min_before}:{change.max_before} when this was requested)"
            )
    return "its configuration changed since this was requested"
