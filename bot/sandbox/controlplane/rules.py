"""The control plane's request rules as the simulator enforces them, each with its source.

Sources: the provider schema (``mmv1/products/vertexai/ModelDevelopmentCluster.yaml`` in
GoogleCloudPlatform/magic-modules, "schema" below), the training-cluster docs
(create-cluster, manage-cluster, view-clusters, Flex Start, manage-clusters-slurm) and
Google's API design rules (AIP-134, 193). Field names are normalized to camelCase (requests
may use snake_case, as the docs' own examples do); the keys of map fields (labels, slurm.conf
settings) are left alone. Each failure raises ``SimError`` with the status the service uses.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic.alias_generators import to_snake

from bot.sandbox.controlplane.rpc import invalid
from bot.sandbox.controlplane.slurm_keys import (
    CLUSTER_KEYS,
    NODE_KEYS,
    PARTITION_KEYS,
    REFUSED_KEYS,
    normal,
)
from bot.sandbox.controlplane.wire import SLURM, get_path, proto3, slurm_spec

# schema: modelDevelopmentClusterId "1-10 characters ... When using slurm_spec, hyphens are
# not allowed (/^[a-z][a-z0-9]{0,9}$/)".
CLUSTER_ID_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")
# The resource's name (schema ModelDevelopmentCluster.name): projects/{project}/locations/
# {location}/modelDevelopmentClusters/{modelDevelopmentCluster}.
CLUSTER_NAME_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)"
    r"/modelDevelopmentClusters/(?P<cluster_id>[^/:]+)$"
)


def cluster_parts(name: str) -> tuple[str, str, str]:
    """The project, region and id of a cluster's resource name; ValueError when it is not one."""
    match = CLUSTER_NAME_RE.match(name)
    if not match:
        raise ValueError(f"{name!r} is not a cluster resource name")
    return match["project"], match["region"], match["cluster_id"]


# Every updateMask path the provider sends (schema update_mask_fields; manage-cluster lists
# node_pools and the slurm_spec partitions, login pool and scripts).
ALLOWED_MASK_PATHS = {
    "node_pools",
    "display_name",
    "labels",
    "lustre_export_config",
    f"{SLURM}.partitions",
    f"{SLURM}.login_node_pool_id",
    f"{SLURM}.prolog_bash_scripts",
    f"{SLURM}.epilog_bash_scripts",
    f"{SLURM}.config",
    f"{SLURM}.scheduling",
    f"{SLURM}.accounting",
    f"{SLURM}.default_partition_id",
    f"{SLURM}.node_sets",
}
# manage-cluster: updateMode is UPDATE_MODE_UNSPECIFIED, USER_ONLY or USER_AND_SERVICE.
UPDATE_MODES = {"UPDATE_MODE_UNSPECIFIED", "USER_ONLY", "USER_AND_SERVICE"}
# schema: machineSpec, provisioningModel, confidentialInstanceConfig and id are immutable.
IMMUTABLE_POOL_FIELDS = ("machineSpec", "provisioningModel", "confidentialInstanceConfig", "zone")
# schema "Possible values" of each enumeration.
PROVISIONING_MODELS = {"ON_DEMAND", "RESERVATION", "SPOT", "FLEX_START"}
RESERVATION_AFFINITY_TYPES = {"NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION"}
CONFIDENTIAL_TYPES = {"SEV", "SEV_SNP", "TDX"}
BOOT_DISK_TYPES = {"pd-ssd", "pd-standard", "hyperdisk-balanced"}  # schema bootDiskType
DAYS_OF_WEEK = {"MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY"}
ACCELERATOR_TYPES = {
    "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "NVIDIA_L4",
    "NVIDIA_H100_80GB",
    "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB",
    "NVIDIA_B200",
    "NVIDIA_GB200",
}
DISPLAY_NAME_LIMIT = 128  # schema displayName: "up to 128 characters"
LABEL_LIMIT = 64  # schema labels: "no longer than 64 characters"
# schema labels: "lowercase letters, numeric characters, underscores and dashes.
# International characters are allowed"; keys start with a letter (goo.gl/xmQnxf).
LABEL_KEY_RE = re.compile(r"^[^\W\dA-Z_][\w-]*$")
LABEL_VALUE_RE = re.compile(r"^[\w-]*$")


def mask_paths(raw: str, body: dict[str, Any]) -> list[str]:
    """Parse an updateMask (camelCase or snake_case paths) and refuse unknown paths. Without
    one (AIP-134), every updatable field the request carries is updated."""
    paths = [p.strip() for p in raw.split(",") if p.strip()]
    if not paths:
        present = [p for p in sorted(ALLOWED_MASK_PATHS) if get_path(body, p) is not None]
        if not present:
            raise invalid("the request sets no field that can be updated")
        return present
    normalized = [".".join(to_snake(seg) for seg in p.split(".")) for p in paths]
    for original, path in zip(paths, normalized, strict=True):
        if path not in ALLOWED_MASK_PATHS:
            raise invalid(
                f"Invalid update_mask path: {original!r}. "
                f"Updatable fields are: {', '.join(sorted(ALLOWED_MASK_PATHS))}"
            )
    return normalized


def check_update_mode(value: str | None) -> None:
    if value is not None and value not in UPDATE_MODES:
        raise invalid(
            f"Invalid value for update_mode: {value!r}; "
            f"use one of {', '.join(sorted(UPDATE_MODES))}"
        )


def _int_field(pool_id: str, spec: dict[str, Any], field: str) -> int:
    value = spec.get(field, 0)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(
            f"node pool {pool_id!r}: scaling_spec.{to_snake(field)} must be an integer"
        ) from None
    return number


def _enum(where: str, value: Any, allowed: set[str]) -> None:
    """An enumeration value outside the schema's "Possible values" is refused."""
    if value is not None and value not in allowed:
        raise invalid(
            f"Invalid value at '{where}': {value!r} is not one of {', '.join(sorted(allowed))}"
        )


def _is_gpu(pool: dict[str, Any]) -> bool:
    spec = pool.get("machineSpec") or {}
    machine = str(spec.get("machineType", ""))
    return bool(spec.get("acceleratorType")) or machine.startswith(("a2-", "a3-", "a4", "g2-"))


def check_pool(pool: dict[str, Any], pool_id: str, login: str | None) -> None:
    spec = pool.get("machineSpec") or {}
    if not spec.get("machineType"):
        raise invalid(f"node pool {pool_id!r}: machine_spec.machine_type is required")
    _enum(
        f"node_pools[{pool_id}].machine_spec.accelerator_type",
        spec.get("acceleratorType"),
        ACCELERATOR_TYPES,
    )
    affinity = spec.get("reservationAffinity")
    if affinity is not None:
        _enum(
            f"node_pools[{pool_id}].machine_spec.reservation_affinity.reservation_affinity_type",
            affinity.get("reservationAffinityType"),
            RESERVATION_AFFINITY_TYPES,
        )
    model = pool.get("provisioningModel")
    if model == "PROVISIONING_MODEL_UNSPECIFIED":
        model = None
    _enum(f"node_pools[{pool_id}].provisioning_model", model, PROVISIONING_MODELS)
    # schema provisioningModel: "reservation_affinity must be set if provisioning_model is
    # RESERVATION" and "must not be set if provisioning_model is ON_DEMAND, SPOT or
    # FLEX_START"; for a GPU pool with neither, "the request will be rejected".
    if model == "RESERVATION" and affinity is None:
        raise invalid(
            f"node pool {pool_id!r}: machine_spec.reservation_affinity must be set for the "
            "RESERVATION provisioning model"
        )
    if model in ("ON_DEMAND", "SPOT", "FLEX_START") and affinity is not None:
        raise invalid(
            f"node pool {pool_id!r}: machine_spec.reservation_affinity must not be set for the "
            f"{model} provisioning model"
        )
    if model is None and affinity is None and _is_gpu(pool):
        raise invalid(
            f"node pool {pool_id!r}: a GPU node pool needs an explicit provisioning_model "
            "(or a reservation_affinity)"
        )
    disk = pool.get("bootDisk") or {}
    _enum(
        f"node_pools[{pool_id}].boot_disk.boot_disk_type", disk.get("bootDiskType"), BOOT_DISK_TYPES
    )
    confidential = pool.get("confidentialInstanceConfig") or {}
    _enum(
        f"node_pools[{pool_id}].confidential_instance_config.confidential_instance_type",
        confidential.get("confidentialInstanceType"),
        CONFIDENTIAL_TYPES,
    )
    for field in ("filestores", "lustres"):
        mounts = pool.get(field)
        if mounts is not None and not (
            isinstance(mounts, list) and all(isinstance(m, str) for m in mounts)
        ):
            # schema: "List of the existing Filestore instances", items of type String
            raise invalid(f"node pool {pool_id!r}: {field} must be a list of instance names")
    check_labels(pool.get("labels"), f"node pool {pool_id!r} labels")
    scaling = pool.get("scalingSpec") or {}
    low = _int_field(pool_id, scaling, "minNodeCount")
    high = _int_field(pool_id, scaling, "maxNodeCount")
    if not 0 <= low <= high:
        raise invalid(
            f"node pool {pool_id!r}: scaling_spec must have 0 <= min_node_count <= "
            f"max_node_count (got min {low}, max {high})"
        )
    # create-cluster: "For the login node pool, the MAX_NODE_COUNT must be the same as the
    # MIN_NODE_COUNT."
    if pool_id == login and low != high:
        raise invalid(
            f"node pool {pool_id!r} is the login node pool: its min_node_count and "
            f"max_node_count must be equal (got {low} and {high})"
        )


def check_node_pools(pools: Any, login: str | None) -> list[str]:
    if not isinstance(pools, list) or not pools:
        raise invalid("node_pools must list at least one node pool")
    ids: list[str] = []
    for pool in pools:
        if not isinstance(pool, dict) or not pool.get("id"):
            raise invalid("every node pool needs an id")
        pool_id = str(pool["id"])
        if pool_id in ids:
            raise invalid(f"node pool ids must be unique; {pool_id!r} appears twice")
        ids.append(pool_id)
        check_pool(pool, pool_id, login)
    return ids


def check_slurm_config(
    config: Any,
    where: str = "orchestrator_spec.slurm_spec.config",
    known: frozenset[str] = CLUSTER_KEYS,
) -> None:
    """schema config: unsupported, reserved or misspelled keys are refused, naming the key."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise invalid(f"{where} must be a map of slurm.conf settings")
    for key, value in config.items():
        name = normal(str(key))
        if name in REFUSED_KEYS:
            raise invalid(f"{where}: the slurm.conf key {key!r} is managed by the service")
        if name not in known:
            raise invalid(f"{where}: {key!r} is not a supported slurm.conf parameter here")
        if not isinstance(value, str):
            raise invalid(f"{where}: the value of {key!r} must be text")


def check_labels(labels: Any, where: str) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        raise invalid(f"{where} must be a map")
    for key, value in labels.items():
        key, value = str(key), str(value)
        if not key or len(key) > LABEL_LIMIT or not LABEL_KEY_RE.match(key):
            raise invalid(
                f"{where}: label key {key!r} is invalid: start with a lowercase letter and use "
                f"only lowercase letters, digits, '_' and '-', at most {LABEL_LIMIT} characters"
            )
        if len(value) > LABEL_LIMIT or not LABEL_VALUE_RE.match(value) or value != value.lower():
            raise invalid(
                f"{where}: label value {value!r} of {key!r} is invalid: use only lowercase "
                f"letters, digits, '_' and '-', at most {LABEL_LIMIT} characters"
            )


def check_cluster(cluster: dict[str, Any], *, creating: bool) -> None:
    """Whole-resource rules that hold after any create or update."""
    display = cluster.get("displayName")
    if isinstance(display, str) and len(display) > DISPLAY_NAME_LIMIT:
        raise invalid(
            f"display_name is {len(display)} characters; at most {DISPLAY_NAME_LIMIT} are allowed"
        )
    check_labels(cluster.get("labels"), "labels")
    slurm = slurm_spec(cluster)
    if not slurm:
        raise invalid("orchestrator_spec.slurm_spec is required")
    login = slurm.get("loginNodePoolId")
    pool_ids = check_node_pools(cluster.get("nodePools"), login)
    if not login:
        raise invalid("orchestrator_spec.slurm_spec.login_node_pool_id is required")
    if login not in pool_ids:
        raise invalid(
            f"orchestrator_spec.slurm_spec.login_node_pool_id {login!r} names no node pool"
        )
    if creating and not slurm.get("homeDirectoryStorage"):
        raise invalid("orchestrator_spec.slurm_spec.home_directory_storage is required")
    partition_ids: list[str] = []
    for partition in slurm.get("partitions") or []:
        if not isinstance(partition, dict) or not partition.get("id"):
            raise invalid("every partition needs an id")
        pid = str(partition["id"])
        if pid in partition_ids:
            raise invalid(f"partition ids must be unique; {pid!r} appears twice")
        partition_ids.append(pid)
        members = partition.get("nodePoolIds") or []
        if not members:
            raise invalid(f"partition {pid!r} must name at least one node pool")
        for member in members:
            if member not in pool_ids:
                raise invalid(f"partition {pid!r} names node pool {member!r}, which does not exist")
        config = partition.get("config")
        if isinstance(config, dict) and any(normal(str(k)) == "default" for k in config):
            # schema partitions[].config: "`Default` is rejected here".
            raise invalid(
                f"partition {pid!r} config: 'Default' is not allowed; set "
                "orchestrator_spec.slurm_spec.default_partition_id instead"
            )
        check_slurm_config(config, f"partition {pid!r} config", PARTITION_KEYS)
    default = slurm.get("defaultPartitionId")
    if default and default not in partition_ids:
        raise invalid(
            f"orchestrator_spec.slurm_spec.default_partition_id {default!r} names no partition"
        )
    if slurm.get("config") and (slurm.get("scheduling") or slurm.get("accounting")):
        # schema config supersedes the older scheduling / accounting messages.
        raise invalid(
            "orchestrator_spec.slurm_spec.config cannot be set together with scheduling or "
            "accounting, which it supersedes"
        )
    check_slurm_config(slurm.get("config"))
    for node_set in slurm.get("nodeSets") or []:
        pool_id = node_set.get("nodePoolId") if isinstance(node_set, dict) else None
        if pool_id not in pool_ids:
            raise invalid(f"node_sets: node pool {pool_id!r} does not exist")
        if pool_id == login:
            raise invalid(f"node_sets: {pool_id!r} is the login node pool, which runs no jobs")
        check_slurm_config(node_set.get("config"), f"node_sets[{pool_id}] config", NODE_KEYS)
    seen_sets = [n.get("nodePoolId") for n in slurm.get("nodeSets") or []]
    if len(seen_sets) != len(set(seen_sets)):
        raise invalid("node_sets: at most one entry per node pool")
    for field in ("prologBashScripts", "epilogBashScripts"):
        scripts = slurm.get(field)
        if scripts is not None and not (
            isinstance(scripts, list) and all(isinstance(s, str) for s in scripts)
        ):
            raise invalid(f"orchestrator_spec.slurm_spec.{to_snake(field)} must be a list of text")
    export = cluster.get("lustreExportConfig")
    if isinstance(export, dict):
        for day in export.get("daysOfWeek") or []:
            _enum("lustre_export_config.days_of_week", day, DAYS_OF_WEEK)


def check_immutable_pools(current: list[dict[str, Any]], proposed: list[dict[str, Any]]) -> None:
    before = {str(p.get("id")): p for p in current}
    for pool in proposed:
        old = before.get(str(pool.get("id")))
        if old is None:
            continue
        for field in IMMUTABLE_POOL_FIELDS:
            if field in pool and proto3(pool.get(field)) != proto3(old.get(field)):
                raise invalid(f"node pool {pool['id']!r}: {to_snake(field)} is immutable")


def check_cluster_id(cluster_id: str | None) -> str:
    if not cluster_id:
        raise invalid("model_development_cluster_id is required")
    if not CLUSTER_ID_RE.match(cluster_id):
        raise invalid(
            f"cluster id {cluster_id!r} is invalid: use 1-10 characters, a lowercase letter "
            "first, then lowercase letters or digits"
        )
    return cluster_id
