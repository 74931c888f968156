"""Typed views of the modelDevelopmentClusters resources and google.longrunning.Operation.

The API emits camelCase and accepts snake_case; these models read both and emit camelCase.
Every model keeps fields it does not declare (``extra="allow"``) so that a read-modify-PATCH
sends back everything the server returned, including fields newer than this code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

CLUSTER_NAME_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)"
    r"/modelDevelopmentClusters/(?P<cluster_id>[^/:]+)$"
)
TARGET_RE = re.compile(r"^(?P<project>[a-z][a-z0-9-]{4,61}[a-z0-9])/(?P<region>[a-z]+-[a-z]+\d+)$")


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


class ReservationAffinity(ApiModel):
    reservation_affinity_type: str | None = None
    key: str | None = None
    values: list[str] | None = None


class MachineSpec(ApiModel):
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    reservation_affinity: ReservationAffinity | None = None


class ScalingSpec(ApiModel):
    min_node_count: int = 0
    max_node_count: int = 0


class BootDisk(ApiModel):
    boot_disk_type: str | None = None
    boot_disk_size_gb: int | None = None


class NodePool(ApiModel):
    id: str
    zone: str | None = None
    enable_public_ips: bool | None = None
    machine_spec: MachineSpec | None = None
    scaling_spec: ScalingSpec | None = None
    provisioning_model: str | None = None
    boot_disk: BootDisk | None = None
    startup_script: str | None = None
    filestores: list[dict[str, Any]] | None = None
    lustres: list[dict[str, Any]] | None = None
    labels: dict[str, str] | None = None
    node_image: str | None = None

    @property
    def node_count(self) -> int:
        """Nodes the pool is scaled to (its minimum: the API keeps min equal to max)."""
        return self.scaling_spec.min_node_count if self.scaling_spec else 0

    @property
    def max_node_count(self) -> int:
        return self.scaling_spec.max_node_count if self.scaling_spec else 0

    @property
    def machine_description(self) -> str:
        """``a4-highgpu-8g (8 x NVIDIA_B200)``, or just the machine type without accelerators."""
        spec = self.machine_spec
        machine = (spec.machine_type if spec else None) or "?"
        if spec and spec.accelerator_type:
            return f"{machine} ({spec.accelerator_count or 1} x {spec.accelerator_type})"
        return machine


class Partition(ApiModel):
    id: str
    node_pool_ids: list[str] = Field(default_factory=list)
    config: dict[str, Any] | None = None


class SlurmSpec(ApiModel):
    partitions: list[Partition] | None = None
    default_partition_id: str | None = None
    login_node_pool_id: str | None = None
    home_directory_storage: str | None = None
    config: dict[str, str] | None = None
    prolog_bash_scripts: list[str] | None = None
    epilog_bash_scripts: list[str] | None = None


class OrchestratorSpec(ApiModel):
    slurm_spec: SlurmSpec | None = None


class Network(ApiModel):
    network: str | None = None
    subnetwork: str | None = None


class Status(ApiModel):
    """google.rpc.Status: a numeric code, a developer-facing message, typed details."""

    code: int = 0
    message: str = ""
    details: list[dict[str, Any]] | None = None


class NodeStatus(ApiModel):
    node_pool_id: str | None = None
    node_pool_type: str | None = None
    node_state: str | None = None
    instance_id: str | None = None
    instance_name: str | None = None
    create_time: datetime | None = None
    last_update_time: datetime | None = None
    detail: str | None = None


class ClusterStatus(ApiModel):
    state: str | None = None
    detail: str | None = None
    error: Status | None = None
    nodes_status: list[NodeStatus] | None = None


class ClusterEvent(ApiModel):
    event_type: str | None = None
    event_message: str | None = None
    event_time: datetime | None = None


@dataclass(frozen=True, order=True)
class Target:
    """A project and region the bot watches, written ``project/region``."""

    project: str
    region: str

    @classmethod
    def parse(cls, text: str) -> Target:
        match = TARGET_RE.match(text.strip())
        if not match:
            raise ValueError(
                f"{text.strip()!r} is not a target; "
                "write project/region, e.g. my-project/us-central1"
            )
        return cls(match["project"], match["region"])

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def __str__(self) -> str:
        return f"{self.project}/{self.region}"


@dataclass(frozen=True)
class ClusterName:
    """The parts of ``projects/{p}/locations/{r}/modelDevelopmentClusters/{id}``."""

    project: str
    region: str
    cluster_id: str

    @classmethod
    def parse(cls, name: str) -> ClusterName:
        match = CLUSTER_NAME_RE.match(name)
        if not match:
            raise ValueError(f"{name!r} is not a cluster resource name")
        return cls(match["project"], match["region"], match["cluster_id"])

    @property
    def target(self) -> Target:
        return Target(self.project, self.region)

    def __str__(self) -> str:
        return f"{self.target.parent}/modelDevelopmentClusters/{self.cluster_id}"


class Cluster(ApiModel):
    name: str | None = None
    display_name: str | None = None
    labels: dict[str, str] | None = None
    network: Network | None = None
    node_pools: list[NodePool] = Field(default_factory=list)
    orchestrator_spec: OrchestratorSpec | None = None
    create_time: datetime | None = None
    update_time: datetime | None = None
    start_time: datetime | None = None
    cluster_status: ClusterStatus | None = None
    cluster_events: list[ClusterEvent] | None = None

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
    def slurm(self) -> SlurmSpec:
        spec = self.orchestrator_spec.slurm_spec if self.orchestrator_spec else None
        return spec or SlurmSpec()

    @property
    def login_pool_id(self) -> str | None:
        return self.slurm.login_node_pool_id

    def pool(self, pool_id: str) -> NodePool | None:
        return next((p for p in self.node_pools if p.id == pool_id), None)

    def compute_pools(self) -> Iterator[NodePool]:
        """Pools that run jobs: every pool but the login pool."""
        return (p for p in self.node_pools if p.id != self.login_pool_id)


class Operation(ApiModel):
    """google.longrunning.Operation. ``done`` is absent, not false, while it runs."""

    name: str
    metadata: dict[str, Any] | None = None
    done: bool = False
    response: dict[str, Any] | None = None
    error: Status | None = None

    @property
    def progress_message(self) -> str | None:
        value = (self.metadata or {}).get("progressMessage")
        return value if isinstance(value, str) else None

    @property
    def succeeded(self) -> bool:
        return self.done and self.error is None


class SlurmResponse(ApiModel):
    """The reply of ``:callSlurmRestApi``: slurmrestd's status and its JSON body as a string."""

    status: int = 0
    body: str = ""
