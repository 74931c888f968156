"""The modelDevelopmentClusters resource's base model and its node pools: the part of the
resource that the facts shared by a cluster and its listing read (``facts.py``). The
conventions (camelCase, proto3 defaults, open enumerations, unknown fields kept) are
``models.py``'s."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

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
    def has_gpus(self) -> bool:
        """Whether its VMs carry GPUs: accelerators named, or an accelerator-optimized machine
        family, whose GPUs come with the machine type (A2, A3, A4, G2)."""
        spec = self.machine_spec
        machine = (spec.machine_type if spec else None) or ""
        named = bool(spec and spec.accelerator_type)
        return named or machine.startswith(("a2-", "a3-", "a4-", "a4x-", "g2-"))

    @property
    def machine_description(self) -> str:
        """``a4-highgpu-8g (8 x NVIDIA_B200)``, or just the machine type without accelerators."""
        spec = self.machine_spec
        machine = (spec.machine_type if spec else None) or "?"
        if spec and spec.accelerator_type:
            return f"{machine} ({spec.accelerator_count or 1} x {spec.accelerator_type})"
        return machine
