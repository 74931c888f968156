"""Partitions, the default partition and the login pool: what a change to them does, checked
before a card is posted, and the resource to PATCH.

From the provider schema and the REST reference (``orchestratorSpec.slurmSpec``):
- ``partitions`` is a repeated field, replaced whole: the PATCH carries the complete list, each
  partition as read (its ``config`` and any field the bot does not model kept);
- ``defaultPartitionId`` unset means the FIRST partition is the default, so a partition is
  only ever appended, and the card shows the default before and after;
- ``defaultPartitionId`` must name a partition, a partition must name existing pools, and
  ``loginNodePoolId`` is required and names the pool of login nodes (min = max).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from handlers.domain.models import Cluster, Partition
from handlers.slurm.settings import slurm_copy
from handlers.words import plural


class LayoutAction(StrEnum):
    PARTITION_ADD = "partition add"
    PARTITION_REMOVE = "partition remove"
    PARTITION_DEFAULT = "partition default"
    LOGIN_POOL = "login-pool"


SLURM = "orchestrator_spec.slurm_spec"
MASKS = {
    LayoutAction.PARTITION_ADD: f"{SLURM}.partitions",
    LayoutAction.PARTITION_REMOVE: f"{SLURM}.partitions",
    # sent by the Terraform provider (ModelDevelopmentCluster.yaml, default_partition_id)
    LayoutAction.PARTITION_DEFAULT: f"{SLURM}.default_partition_id",
    LayoutAction.LOGIN_POOL: f"{SLURM}.login_node_pool_id",
}


class LayoutError(ValueError):
    """The change cannot be made; the message is meant for the user."""


class PartitionView(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    pools: tuple[str, ...]


class Layout(BaseModel):
    """Which pools run jobs where: the partitions in order, the default, the login pool."""

    model_config = ConfigDict(frozen=True)

    partitions: tuple[PartitionView, ...] = ()
    default: str | None = None
    login: str | None = None

    @classmethod
    def of(cls, cluster: Cluster) -> Layout:
        slurm = cluster.slurm
        return cls(
            partitions=tuple(
                PartitionView(id=p.id, pools=tuple(p.node_pool_ids)) for p in slurm.partitions or []
            ),
            default=slurm.default_partition,
            login=slurm.login_node_pool_id,
        )

    def partition(self, name: str) -> PartitionView | None:
        return next((p for p in self.partitions if p.id == name), None)


class LayoutChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: LayoutAction
    name: str
    before: Layout
    after: Layout

    @property
    def mask(self) -> str:
        return MASKS[self.action]

    @property
    def words(self) -> str:
        if self.action == LayoutAction.PARTITION_ADD:
            added = self.after.partition(self.name)
            return f"add partition {self.name} with {', '.join(added.pools if added else ())}"
        if self.action == LayoutAction.PARTITION_REMOVE:
            return f"remove partition {self.name}"
        if self.action == LayoutAction.PARTITION_DEFAULT:
            return f"default partition: {self.before.default} → {self.after.default}"
        return f"login pool: {self.before.login} → {self.after.login}"

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, before, after) for every partition and for the default and login pool."""
        names = [p.id for p in self.before.partitions]
        names += [p.id for p in self.after.partitions if p.id not in names]
        rows = []
        for name in names:
            was, now = self.before.partition(name), self.after.partition(name)
            rows.append(
                (
                    f"partition {name}",
                    ", ".join(was.pools) if was else "(new)",
                    ", ".join(now.pools) if now else "(removed)",
                )
            )
        rows.append(("default partition", self.before.default or "-", self.after.default or "-"))
        rows.append(("login pool", self.before.login or "-", self.after.login or "-"))
        return rows


def layout_change(
    cluster: Cluster, action: LayoutAction, name: str, pools: tuple[str, ...] = ()
) -> tuple[LayoutChange, tuple[str, ...]]:
    """The change and the warnings the approver must see; raises ``LayoutError`` for what
    the API would refuse or what would leave pools running no jobs."""
    before = Layout.of(cluster)
    pool_ids = [p.id for p in cluster.node_pools]
    cid = cluster.cluster_id
    warnings: tuple[str, ...] = ()
    if action == LayoutAction.LOGIN_POOL:
        after = _login_pool(cluster, before, name)
        old = before.login
        if old and not any(old in p.pools for p in after.partitions):
            nodes = cluster.pool(old)
            count = cluster.nodes(nodes) if nodes else 0
            warnings = (
                f"{old} stops being the login pool and is in no partition: its "
                f"{plural(count, 'node')} run no jobs but are billed until it is resized to 0 "
                "or added to a partition",
            )
        return LayoutChange(action=action, name=name, before=before, after=after), warnings
    existing = before.partition(name)
    if action == LayoutAction.PARTITION_ADD:
        if existing is not None:
            raise LayoutError(f"{cid} already has a partition {name!r}")
        for pool in pools:
            if pool not in pool_ids:
                raise LayoutError(
                    f"{cid} has no node pool {pool!r}; its pools are {', '.join(sorted(pool_ids))}"
                )
            if pool == before.login:
                raise LayoutError(f"{pool!r} is the login pool of {cid}: login nodes run no jobs")
        partitions = (*before.partitions, PartitionView(id=name, pools=pools))
        default = before.default or name  # appended: the first partition stays the default
        after = before.model_copy(update={"partitions": partitions, "default": default})
        return LayoutChange(action=action, name=name, before=before, after=after), warnings
    if existing is None:
        known = ", ".join(p.id for p in before.partitions) or "none"
        raise LayoutError(f"{cid} has no partition {name!r}; its partitions are {known}")
    if action == LayoutAction.PARTITION_DEFAULT:
        if before.default == name:
            raise LayoutError(f"{name!r} is already the default partition of {cid}")
        after = before.model_copy(update={"default": name})
        return LayoutChange(action=action, name=name, before=before, after=after), warnings
    if before.default == name:
        raise LayoutError(
            f"{name!r} is the default partition of {cid}: jobs without --partition go there. "
            "Make another partition the default first (partition default ID)"
        )
    partitions = tuple(p for p in before.partitions if p.id != name)
    covered = {pool for p in partitions for pool in p.pools}
    orphans = [p for p in existing.pools if p not in covered and p != before.login]
    if orphans:
        raise LayoutError(
            f"removing {name!r} would leave pool {', '.join(orphans)} of {cid} in no "
            "partition, its nodes running no jobs; add it to another partition first"
        )
    after = before.model_copy(update={"partitions": partitions})
    return LayoutChange(action=action, name=name, before=before, after=after), warnings


def _login_pool(cluster: Cluster, before: Layout, name: str) -> Layout:
    cid = cluster.cluster_id
    pool = cluster.pool(name)
    if pool is None:
        pools = ", ".join(sorted(p.id for p in cluster.node_pools))
        raise LayoutError(f"{cid} has no node pool {name!r}; its pools are {pools}")
    if before.login == name:
        raise LayoutError(f"{name!r} is already the login pool of {cid}")
    holding = [p.id for p in before.partitions if name in p.pools]
    if holding:
        raise LayoutError(
            f"{name!r} runs jobs in partition {', '.join(holding)}; a login pool runs none. "
            "Remove it from those partitions first"
        )
    # create-cluster: the login pool's min and max node counts must be equal
    if pool.min_nodes != pool.max_nodes or pool.min_nodes == 0:
        raise LayoutError(
            f"{name!r} has bounds {pool.bounds}; a login pool needs a fixed count of at least "
            f"1 node (resize it first: /cluster resize {cid} {name} 1)"
        )
    return before.model_copy(update={"login": name})


def apply_layout(cluster: Cluster, change: LayoutChange) -> Cluster:
    """The cluster to PATCH, built on the fresh read: partitions kept as read (their config
    and unknown fields too), the removed one left out, the new one appended."""
    changed, slurm = slurm_copy(cluster)
    if change.action == LayoutAction.PARTITION_ADD:
        added = change.after.partition(change.name)
        assert added is not None
        slurm.partitions = [
            *(slurm.partitions or []),
            Partition(id=added.id, node_pool_ids=list(added.pools)),
        ]
    elif change.action == LayoutAction.PARTITION_REMOVE:
        slurm.partitions = [p for p in slurm.partitions or [] if p.id != change.name]
    elif change.action == LayoutAction.PARTITION_DEFAULT:
        slurm.default_partition_id = change.name
    else:
        slurm.login_node_pool_id = change.name
    return changed


def layout_applied(change: LayoutChange, cluster: Cluster) -> bool:
    """Whether the cluster shows the change."""
    now = Layout.of(cluster)
    if change.action in (LayoutAction.PARTITION_ADD, LayoutAction.PARTITION_REMOVE):
        return now.partition(change.name) == change.after.partition(change.name)
    if change.action == LayoutAction.PARTITION_DEFAULT:
        return now.default == change.name
    return now.login == change.name
