"""A cluster as a listing reads it: name, labels, pools, login pool, state and the pool of
each node, and nothing more.

``/cluster list`` and the idle sweep read every cluster of every target, and use only these
fields. Reading the whole resource builds about twice as many objects (each node's times,
ids and states, the Slurm spec, events), and the cycle collector then walks them all, so
those readings take this model instead. Fields it does not declare are skipped, not kept:
it is never sent back (a change reads the whole ``Cluster`` again). A field it does declare
is checked as strictly as in ``Cluster``: a pool that cannot be read names the cluster.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from handlers.domain.facts import ClusterFacts
from handlers.domain.pools import ClusterState, NodePool, open_enum


class _Read(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore"
    )


class NodeSummary(_Read):
    node_pool_id: str | None = None
    instance_id: str | None = None  # a GPU node's VM, named in its GPU metrics' filter
    instance_name: str | None = None  # its Slurm node


class ErrorSummary(_Read):
    message: str = ""


class StatusSummary(_Read):
    state: ClusterState | str | None = open_enum()
    detail: str | None = None  # the control plane's words for the state, for health
    error: ErrorSummary | None = None
    nodes_status: list[NodeSummary] | None = None


class SlurmSummary(_Read):
    login_node_pool_id: str | None = None


class OrchestratorSummary(_Read):
    slurm_spec: SlurmSummary | None = None


class ClusterSummary(ClusterFacts, _Read):
    name: str | None = None
    labels: dict[str, str] | None = None
    node_pools: list[NodePool] = Field(default_factory=list)
    orchestrator_spec: OrchestratorSummary | None = None
    cluster_status: StatusSummary | None = None
    update_time: datetime | None = None  # when its state last changed: a stuck change

    @property
    def login_pool_id(self) -> str | None:
        slurm = self.orchestrator_spec.slurm_spec if self.orchestrator_spec else None
        return slurm.login_node_pool_id if slurm else None
