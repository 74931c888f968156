"""Typed views of the modelDevelopmentClusters resource (its operations: ``operations.py``).

Every field of ``ModelDevelopmentCluster`` is modelled as the provider schema
(``mmv1/products/vertexai/ModelDevelopmentCluster.yaml``) and the training-cluster docs
(create-cluster, view-clusters, manage-cluster, Flex Start) define it. The API emits camelCase
and accepts snake_case; these models read both and emit camelCase.

Replies are proto3 JSON: zero and empty values are left out (a missing ``minNodeCount`` is 0,
a missing ``nodesStatus`` is an empty list), so every field has a default. Enumerations are
open: a value this code does not know is kept as a string instead of failing the read. Every
model keeps fields it does not declare (``extra="allow"``), so a read-modify-PATCH sends back
everything the server returned, including fields newer than this code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from handlers.domain.facts import ClusterFacts
from handlers.domain.pools import (
    OUTPUT_ONLY,
    OUTPUT_ONLY_POOL,
    ApiModel,
    ClusterState,
    EventType,
    NodePool,
    NodePoolType,
    NodeState,
    open_enum,
)

# -- Slurm ---------------------------------------------------------------------------------------


class Partition(ApiModel):
    id: str
    node_pool_ids: list[str] = Field(default_factory=list)
    config: dict[str, str] | None = None


class NodeSet(ApiModel):
    node_pool_id: str = ""
    config: dict[str, str] | None = None


class SlurmSpec(ApiModel):
    partitions: list[Partition] | None = None
    default_partition_id: str | None = None  # empty: the first partition is the default
    login_node_pool_id: str | None = None
    home_directory_storage: str | None = None
    config: dict[str, str] | None = None  # slurm.conf, replaced wholesale on update
    node_sets: list[NodeSet] | None = None
    prolog_bash_scripts: list[str] | None = None
    epilog_bash_scripts: list[str] | None = None
    # Superseded by ``config``; sending both is refused. Kept as given.
    scheduling: dict[str, Any] | None = None
    accounting: dict[str, Any] | None = None

    @property
    def default_partition(self) -> str | None:
        """The default partition's id: the one named, else the first partition."""
        partitions = self.partitions or []
        return self.default_partition_id or (partitions[0].id if partitions else None)


class OrchestratorSpec(ApiModel):
    slurm_spec: SlurmSpec | None = None


# -- the rest of the cluster -----------------------------------------------------------------------


class Network(ApiModel):
    network: str | None = None
    subnetwork: str | None = None


class TimeOfDay(ApiModel):
    hours: int | None = None
    minutes: int | None = None


class LustreExportConfig(ApiModel):
    days_of_week: list[str] | None = None
    destination_bucket: str | None = None
    lustres: list[str] | None = None
    start_time: TimeOfDay | None = None


class RuntimeSpec(ApiModel):
    service_account: str | None = None


class RpcStatus(ApiModel):
    """google.rpc.Status: a numeric code, a developer-facing message, typed details."""

    code: int = 0
    message: str = ""
    details: list[dict[str, Any]] | None = None


class PhysicalHost(ApiModel):
    block_id: str | None = None
    cluster_name: str | None = None
    host_id: str | None = None
    subblock_id: str | None = None


class NodeStatus(ApiModel):
    node_pool_id: str | None = None
    node_pool_type: NodePoolType | str | None = open_enum()
    node_state: NodeState | str | None = open_enum()
    instance_id: str | None = None
    instance_name: str | None = None
    create_time: datetime | None = None
    last_update_time: datetime | None = None
    detail: str | None = None
    physical_host: PhysicalHost | None = None


class ClusterStatus(ApiModel):
    state: ClusterState | str | None = open_enum()
    detail: str | None = None
    error: RpcStatus | None = None
    nodes_status: list[NodeStatus] | None = None  # one entry per node that exists


class ClusterEvent(ApiModel):
    event_type: EventType | str | None = open_enum()
    event_message: str | None = None
    event_time: datetime | None = None


class Cluster(ClusterFacts, ApiModel):
    name: str | None = None
    display_name: str | None = None
    labels: dict[str, str] | None = None
    network: Network | None = None
    node_pools: list[NodePool] = Field(default_factory=list)
    orchestrator_spec: OrchestratorSpec | None = None
    lustre_export_config: LustreExportConfig | None = None
    runtime_spec: RuntimeSpec | None = None
    create_time: datetime | None = None
    update_time: datetime | None = None
    start_time: datetime | None = None
    cluster_status: ClusterStatus | None = None
    cluster_events: list[ClusterEvent] | None = None
    runtime: dict[str, Any] | None = None  # output only: training services, XManager

    @property
    def slurm(self) -> SlurmSpec:
        spec = self.orchestrator_spec.slurm_spec if self.orchestrator_spec else None
        return spec or SlurmSpec()

    @property
    def login_pool_id(self) -> str | None:
        return self.slurm.login_node_pool_id

    def spec(self) -> dict[str, Any]:
        """What it takes to create this cluster again: the resource without output fields."""
        document = self.to_api()
        for field in OUTPUT_ONLY:
            document.pop(field, None)
        document.pop("runtime", None)
        for pool in document.get("nodePools", []):
            for field in OUTPUT_ONLY_POOL:
                pool.pop(field, None)
        return document
