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
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from handlers.domain.facts import ClusterFacts

# Fields the server sets; a spec kept for re-creation leaves them out (schema: `output: true`).
OUTPUT_ONLY = ("name", "createTime", "updateTime", "startTime", "clusterStatus", "clusterEvents")
OUTPUT_ONLY_POOL = ("effectiveFlexStartMaxDuration",)


def open_enum(default: Any = None) -> Any:
    """A field typed ``SomeEnum | str``: known values become the enum, unknown ones stay text."""
    return Field(default, union_mode="left_to_right")


class ApiModel(BaseModel):
    """Base for API resources: camelCase on the wire, snake_case accepted, unknowns kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON body the API expects: camelCase, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- enumerations (schema "Possible values") -----------------------------------------------------


class ProvisioningModel(StrEnum):
    UNSPECIFIED = "PROVISIONING_MODEL_UNSPECIFIED"
    ON_DEMAND = "ON_DEMAND"
    RESERVATION = "RESERVATION"
    SPOT = "SPOT"
    FLEX_START = "FLEX_START"


class ReservationAffinityType(StrEnum):
    UNSPECIFIED = "TYPE_UNSPECIFIED"
    NO_RESERVATION = "NO_RESERVATION"
    ANY_RESERVATION = "ANY_RESERVATION"
    SPECIFIC_RESERVATION = "SPECIFIC_RESERVATION"


class ClusterState(StrEnum):
    UNSPECIFIED = "STATE_UNSPECIFIED"
    PROVISIONING = "PROVISIONING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    ERROR = "ERROR"
    UPDATING = "UPDATING"


class NodeState(StrEnum):
    UNSPECIFIED = "NODE_STATE_UNSPECIFIED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    ERROR = "ERROR"
    UPDATING = "UPDATING"


class NodePoolType(StrEnum):
    UNSPECIFIED = "NODE_POOL_TYPE_UNSPECIFIED"
    LOGIN = "NODE_POOL_TYPE_LOGIN"
    COMPUTE = "NODE_POOL_TYPE_COMPUTE"


class ConfidentialInstanceType(StrEnum):
    SEV = "SEV"
    SEV_SNP = "SEV_SNP"
    TDX = "TDX"


class EventType(StrEnum):
    VM_PROLOG_ERROR = "VM_PROLOG_ERROR"
    VM_EPILOG_ERROR = "VM_EPILOG_ERROR"
    VM_CONTINUOUS_GPU_ERROR = "VM_CONTINUOUS_GPU_ERROR"
    VM_SCAN_ERROR = "VM_SCAN_ERROR"
    VM_SLURM_POWER_DOWN = "VM_SLURM_POWER_DOWN"
    VM_SLURM_DRAIN = "VM_SLURM_DRAIN"
    VM_DELETION = "VM_DELETION"
    VM_REPORT_AND_REPLACEMENT = "VM_REPORT_AND_REPLACEMENT"
    VM_REBOOT = "VM_REBOOT"


# -- node pools ------------------------------------------------------------------------------------


class ReservationAffinity(ApiModel):
    reservation_affinity_type: ReservationAffinityType | str | None = open_enum()
    key: str | None = None
    values: list[str] | None = None


class MachineSpec(ApiModel):
    """Immutable once created. ``acceleratorCount`` is int32: a JSON number."""

    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    reservation_affinity: ReservationAffinity | None = None


class ScalingSpec(ApiModel):
    """``0 <= min <= max``; a pool with min < max scales with the Slurm queue (Flex Start
    pools at 0/2, the provider's samples at 1/3). The login pool keeps min == max."""

    min_node_count: int = 0
    max_node_count: int = 0


class BootDisk(ApiModel):
    boot_disk_type: str | None = None
    boot_disk_size_gb: int | None = None


class ConfidentialInstanceConfig(ApiModel):
    confidential_instance_type: ConfidentialInstanceType | str | None = open_enum()


class NodePool(ApiModel):
    id: str
    zone: str | None = None
    enable_public_ips: bool | None = None
    machine_spec: MachineSpec | None = None
    scaling_spec: ScalingSpec | None = None
    provisioning_model: ProvisioningModel | str | None = open_enum()
    boot_disk: BootDisk | None = None
    startup_script: str | None = None
    # Resource names ("projects/P/locations/ZONE/instances/NAME"), not objects.
    filestores: list[str] | None = None
    lustres: list[str] | None = None
    labels: dict[str, str] | None = None
    node_image: str | None = None
    confidential_instance_config: ConfidentialInstanceConfig | None = None
    flex_start_max_duration: str | None = None  # google.protobuf.Duration: "604800s"
    effective_flex_start_max_duration: str | None = None  # output only

    @property
    def min_nodes(self) -> int:
        return self.scaling_spec.min_node_count if self.scaling_spec else 0

    @property
    def max_nodes(self) -> int:
        return self.scaling_spec.max_node_count if self.scaling_spec else 0

    @property
    def scales_with_queue(self) -> bool:
        """min < max: Slurm adds nodes for pending jobs and removes idle ones."""
        return self.min_nodes < self.max_nodes

    @property
    def bounds(self) -> str:
        """``2`` for a fixed pool, ``0:2`` for one that scales with the queue."""
        return (
            str(self.min_nodes)
            if not self.scales_with_queue
            else f"{self.min_nodes}:{self.max_nodes}"
        )

    @property
    def reserved(self) -> bool:
        """Capacity paid for through a reservation, used or not."""
        return self.provisioning_model == ProvisioningModel.RESERVATION

    @property
    def reservation_name(self) -> str | None:
        """The reservation's short name, when the pool names one."""
        affinity = self.machine_spec.reservation_affinity if self.machine_spec else None
        values = (affinity.values or []) if affinity else []
        return values[0].rsplit("/", 1)[-1] if values else None

    @property
    def machine_description(self) -> str:
        """``a4-highgpu-8g (8 x NVIDIA_B200)``, or just the machine type without accelerators."""
        spec = self.machine_spec
        machine = (spec.machine_type if spec else None) or "?"
        if spec and spec.accelerator_type:
            return f"{machine} ({spec.accelerator_count or 1} x {spec.accelerator_type})"
        return machine


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
