"""What a cluster's name, pools and node list say, shared by the whole resource (``Cluster``)
and by the listing's reading of it (``ClusterSummary``): ids, state, the login pool, and how
many nodes each pool has now. Handlers that only count and price nodes take either."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from handlers.domain.names import ClusterName, Target

if TYPE_CHECKING:
    from datetime import datetime

    from handlers.domain.pools import NodePool


class NodeView(Protocol):
    @property
    def node_pool_id(self) -> str | None: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def instance_name(self) -> str | None: ...


class ErrorView(Protocol):
    @property
    def message(self) -> str: ...


class StatusView(Protocol):
    @property
    def state(self) -> str | None: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def error(self) -> ErrorView | None: ...
    @property
    def nodes_status(self) -> Sequence[NodeView] | None: ...


class ClusterFacts:
    """Mixed into a model that has these fields (declared for the type checker only, so the
    model's own declarations are the fields)."""

    if TYPE_CHECKING:
        name: str | None
        labels: dict[str, str] | None
        node_pools: list[NodePool]
        cluster_status: StatusView | None
        update_time: datetime | None

        @property
        def login_pool_id(self) -> str | None: ...

    @property
    def parsed_name(self) -> ClusterName:
        return ClusterName.parse(self.name or "")

    @property
    def cluster_id(self) -> str:
        return self.parsed_name.cluster_id

    @property
    def target(self) -> Target:
        return self.parsed_name.target

    @property
    def state(self) -> str:
        return (self.cluster_status.state if self.cluster_status else None) or "STATE_UNSPECIFIED"

    @property
    def status_message(self) -> str:
        """The control plane's own words for the state (``clusterStatus.detail``, else its
        ``error``'s message); "" when it gives none."""
        status = self.cluster_status
        if status is None:
            return ""
        return status.detail or (status.error.message if status.error else "") or ""

    @property
    def updated_at(self) -> float | None:
        """When the cluster last changed (``updateTime``), epoch seconds; None when unsaid."""
        return self.update_time.timestamp() if self.update_time else None

    def pool(self, pool_id: str) -> NodePool | None:
        """A pool by id; the API may return pools in another order than they were sent."""
        return next((p for p in self.node_pools if p.id == pool_id), None)

    def compute_pools(self) -> Iterator[NodePool]:
        """Pools that run jobs: every pool but the login pool."""
        return (p for p in self.node_pools if p.id != self.login_pool_id)

    def gpu_instances(self) -> tuple[tuple[str, str, str], ...]:
        """The VMs of its compute pools that carry GPUs: (instance id, instance name, pool),
        a Slurm node being named as its VM."""
        pools = {p.id for p in self.compute_pools() if p.has_gpus}
        listed = self.cluster_status.nodes_status if self.cluster_status else None
        return tuple(
            sorted(
                (n.instance_id, n.instance_name, n.node_pool_id)
                for n in listed or ()
                if n.node_pool_id in pools and n.instance_id and n.instance_name
            )
        )

    @property
    def reports_nodes(self) -> bool:
        """Whether ``clusterStatus.nodesStatus`` lists the nodes. The login pool always has a
        node, so a cluster with nodes reports at least one; an absent list means the status
        is not known yet (while provisioning, say), not that there are none."""
        return bool(self.cluster_status and self.cluster_status.nodes_status)

    def nodes(self, pool: NodePool) -> int:
        """Nodes of a pool that exist now (and are paid for): counted from ``nodesStatus``,
        or the pool's minimum, which Slurm always keeps, when nodes are not reported."""
        listed = self.cluster_status.nodes_status if self.cluster_status else None
        if not listed:
            return pool.min_nodes
        wanted = pool.id
        return sum(1 for n in listed if n.node_pool_id == wanted)
