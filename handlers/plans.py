"""Change plans: what a resize, a delete or a slurm.conf change will do, exactly, before
anyone approves it.

A plan records the ``updateMask``, each pool's bounds before and after in numbers and in
words, the estimated cost per hour before and after (a range when a pool scales with the
queue), warnings the approver must see, what a delete loses, and a fingerprint of the
cluster's configuration when the plan was made. The API has no etag, so the fingerprint is
how an approval notices that the cluster changed in between.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.vertex.models import Cluster, ClusterState, ScalingSpec
from handlers.costs import PriceBook, Range
from handlers.pool_changes import PoolChange, bounds, describe, pool_change, pool_warnings
from handlers.slurm_commands import LayoutAction
from handlers.slurm_layout import (
    LayoutChange,
    LayoutError,
    apply_layout,
    layout_applied,
    layout_change,
)
from handlers.slurm_scripts import (
    ScriptAction,
    ScriptChange,
    ScriptError,
    apply_scripts,
    script_change,
    scripts_applied,
)
from handlers.slurm_settings import (
    SettingChange,
    SettingError,
    config_after,
    same_config,
    setting_changes,
    slurm_copy,
)

# The parts of a cluster a change depends on; output fields (status, events) are left out.
FINGERPRINT_FIELDS = ("nodePools", "orchestratorSpec", "labels", "displayName")


class PlanKind(StrEnum):
    RESIZE = "resize"
    DELETE = "delete"
    SLURM_CONFIG = "slurm_config"
    SLURM_LAYOUT = "slurm_layout"  # partitions, the default partition, the login pool
    RESTORE = "restore"  # create a deleted cluster again from its kept spec
    SLURM_SCRIPTS = "slurm_scripts"  # prolog or epilog scripts added, replaced, removed, moved


SLURM_CONFIG_MASK = "orchestrator_spec.slurm_spec.config"  # the REST document's mask path


class PlanError(Exception):
    """The change cannot be planned; the message is meant for the user."""


class ChangePlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: PlanKind
    cluster: str
    update_mask: tuple[str, ...] = ()
    pools: tuple[PoolChange, ...] = ()
    settings: tuple[SettingChange, ...] = ()
    layout: LayoutChange | None = None
    scripts: ScriptChange | None = None
    spec: dict[str, Any] | None = None  # RESTORE: the body to create the cluster with
    restored_from: str | None = None  # RESTORE: the deleted cluster's name
    kept_at: float | None = None  # RESTORE: when its spec was kept
    cost_before: float | None = None
    cost_after: float | None = None  # with every changed pool at its new minimum
    cost_after_high: float | None = None  # at the new maxima; None: same as cost_after
    fingerprint: str
    losses: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    @property
    def after(self) -> Range:
        high = self.cost_after if self.cost_after_high is None else self.cost_after_high
        return Range(self.cost_after, high)

    @property
    def cost_delta(self) -> Range:
        if self.cost_before is None or not self.after.known:
            return Range(None, None)
        assert self.after.low is not None and self.after.high is not None
        return Range(self.after.low - self.cost_before, self.after.high - self.cost_before)

    @property
    def changed_pools(self) -> list[PoolChange]:
        return [p for p in self.pools if p.changed]


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
    return _plan_pools(cluster, {pool_id: (min_nodes, max_nodes)}, prices)


def plan_scale_to_zero(cluster: Cluster, prices: PriceBook) -> ChangePlan:
    """Every compute pool (not the login pool) to zero nodes."""
    _require_running(cluster)
    targets = {p.id: (0, 0) for p in cluster.compute_pools() if p.max_nodes or p.min_nodes}
    if not targets:
        raise PlanError(f"every compute pool of {cluster.cluster_id} is already at zero nodes")
    return _plan_pools(cluster, targets, prices)


def _plan_pools(
    cluster: Cluster, sizes: dict[str, tuple[int, int]], prices: PriceBook
) -> ChangePlan:
    after = apply_sizes(cluster, sizes)
    changes = []
    for pool in cluster.node_pools:
        new = after.pool(pool.id)
        assert new is not None
        changes.append(pool_change(cluster, pool, new, prices))
    low = _sum(c.cost_after for c in changes)
    high = _sum(c.cost_after if c.cost_after_high is None else c.cost_after_high for c in changes)
    return ChangePlan(
        kind=PlanKind.RESIZE,
        cluster=cluster.name or "",
        update_mask=("node_pools",),
        pools=tuple(changes),
        cost_before=prices.cluster_hour(cluster),
        cost_after=low,
        cost_after_high=high,
        fingerprint=fingerprint(cluster),
        warnings=pool_warnings(changes),
    )


def _sum(values: Any) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total


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
    """The full resource to PATCH, built on the freshly read cluster: every field the plan
    does not change is kept as read, known or not."""
    if plan.layout is not None:
        return apply_layout(cluster, plan.layout)
    if plan.scripts is not None:
        return apply_scripts(cluster, plan.scripts)
    if plan.kind == PlanKind.SLURM_CONFIG:
        changed, slurm = slurm_copy(cluster)
        # a map field is replaced whole by its mask: send every key, changed or not
        slurm.config = config_after(cluster.slurm.config or {}, plan.settings)
        return changed
    return apply_sizes(cluster, plan_sizes(plan))


def _costless(
    cluster: Cluster, kind: PlanKind, mask: str, prices: PriceBook, **change: Any
) -> ChangePlan:
    """A Slurm change under one mask path: the cluster costs what it costs now."""
    cost = prices.cluster_hour(cluster)
    return ChangePlan(
        kind=kind,
        cluster=cluster.name or "",
        update_mask=(mask,),
        cost_before=cost,
        cost_after=cost,
        fingerprint=fingerprint(cluster),
        **change,
    )


def plan_slurm_config(
    cluster: Cluster, sets: dict[str, str], unsets: list[str], prices: PriceBook
) -> ChangePlan:
    """Set and unset slurm.conf keys; refused before any card when a key is managed by the
    service, a known key's value is malformed, or nothing would change."""
    _require_running(cluster)
    try:
        changes = setting_changes(cluster.slurm.config or {}, sets, unsets)
    except SettingError as error:
        raise PlanError(f"{error} on {cluster.cluster_id}") from None
    return _costless(
        cluster, PlanKind.SLURM_CONFIG, SLURM_CONFIG_MASK, prices, settings=tuple(changes)
    )


def plan_slurm_layout(
    cluster: Cluster,
    action: LayoutAction,
    name: str,
    pools: tuple[str, ...],
    prices: PriceBook,
) -> ChangePlan:
    """Add, remove or choose the default partition, or move the login pool; refused before
    any card when the API would refuse it or pools would be left running no jobs."""
    _require_running(cluster)
    try:
        change, warnings = layout_change(cluster, action, name, pools)
    except LayoutError as error:
        raise PlanError(str(error)) from None
    return _costless(
        cluster, PlanKind.SLURM_LAYOUT, change.mask, prices, layout=change, warnings=warnings
    )


def plan_slurm_scripts(
    cluster: Cluster,
    which: str,
    action: ScriptAction,
    index: int,
    to: int | None,
    prices: PriceBook,
    content: str | None = None,
) -> ChangePlan:
    """Add, replace, remove or move one prolog or epilog script; the whole list is sent."""
    _require_running(cluster)
    try:
        change = script_change(cluster, which, action, index, to, content)
    except ScriptError as error:
        raise PlanError(str(error)) from None
    return _costless(cluster, PlanKind.SLURM_SCRIPTS, change.mask, prices, scripts=change)


def wanted(plan: ChangePlan) -> str:
    """What the plan asks for, in a few words (for a change that did not happen)."""
    if plan.layout is not None:
        return plan.layout.words
    if plan.scripts is not None:
        return plan.scripts.words
    if plan.kind == PlanKind.SLURM_CONFIG:
        return ", ".join(c.words for c in plan.settings)
    if plan.kind == PlanKind.RESTORE:
        return "the cluster RUNNING"
    return ", ".join(f"{p} {lo}:{hi}" for p, (lo, hi) in plan_sizes(plan).items())


def plan_sizes(plan: ChangePlan) -> dict[str, tuple[int, int]]:
    return {p.pool_id: (p.min_after, p.max_after) for p in plan.pools if p.changed}


def plan_delete(cluster: Cluster, prices: PriceBook) -> ChangePlan:
    if cluster.state in ("STOPPING", "PROVISIONING"):
        raise PlanError(f"{cluster.cluster_id} is {cluster.state}; it cannot be deleted now")
    nodes = sum(cluster.nodes(p) for p in cluster.node_pools)
    slurm = cluster.slurm
    losses = [
        f"all {nodes} node{'s' if nodes != 1 else ''} in pools "
        f"{', '.join(p.id for p in cluster.node_pools)}, with their local disks",
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
    for pool in cluster.node_pools:
        mounts = [*(pool.filestores or []), *(pool.lustres or [])]
        for mount in mounts:
            kept.append(f"{mount}, mounted on {pool.id}: not deleted with the cluster")
    reserved = [p for p in cluster.node_pools if p.reserved]
    for pool in reserved:
        name = f" {pool.reservation_name}" if pool.reservation_name else ""
        kept.append(
            f"the reservation{name} behind {pool.id}: deleting the cluster does not release "
            "it, and it is billed until it is released"
        )
    freed = prices.freed_hour(cluster, cluster.node_pools)
    before = prices.cluster_hour(cluster)
    after = None if before is None or freed is None else before - freed
    return ChangePlan(
        kind=PlanKind.DELETE,
        cluster=cluster.name or "",
        cost_before=before,
        cost_after=after,
        fingerprint=fingerprint(cluster),
        losses=tuple(losses),
        kept=tuple(dict.fromkeys(kept)),
    )


def drift(plan: ChangePlan, current: Cluster) -> str | None:
    """Why the plan no longer fits the cluster as it is now, or None when it still does."""
    if plan.kind != PlanKind.DELETE and current.state != "RUNNING":
        return f"{current.cluster_id} is now {current.state}"
    if fingerprint(current) == plan.fingerprint:
        return None
    for change in plan.pools:
        pool = current.pool(change.pool_id)
        if pool is None:
            return f"pool {change.pool_id!r} no longer exists"
        if (pool.min_nodes, pool.max_nodes) != (change.min_before, change.max_before):
            return (
                f"pool {change.pool_id!r} now has bounds {pool.bounds} "
                f"(was {change.bounds_before} when this was requested)"
            )
    return "its configuration changed since this was requested"


def applied(plan: ChangePlan, current: Cluster) -> bool:
    """Whether the cluster shows the plan's change (its changed pools at the new bounds, its
    slurm.conf keys set and unset, its partitions or login pool as asked)."""
    if plan.layout is not None:
        return layout_applied(plan.layout, current)
    if plan.scripts is not None:
        return scripts_applied(plan.scripts, current)
    if plan.kind == PlanKind.RESTORE:
        return current.state == ClusterState.RUNNING
    if plan.kind == PlanKind.SLURM_CONFIG:
        now = current.slurm.config or {}
        return same_config(config_after(now, plan.settings), now)
    for pool_id, (low, high) in plan_sizes(plan).items():
        pool = current.pool(pool_id)
        if pool is None or (pool.min_nodes, pool.max_nodes) != (low, high):
            return False
    return True
