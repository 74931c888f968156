"""The control plane's request rules as the simulator enforces them.

Field names are normalized to camelCase (requests may use snake_case, as the product docs'
own examples do); the keys of map fields (labels, slurm.conf settings) are left alone.
Each rule failure raises ``SimError`` with the status and wording the real service uses.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic.alias_generators import to_camel, to_snake

from bot.vertex.errors import HTTP_FROM_STATUS

CLUSTER_ID_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")
MAP_FIELDS = {"labels", "config", "metadata"}
SLURM = "orchestrator_spec.slurm_spec"
ALLOWED_MASK_PATHS = {
    "node_pools",
    "display_name",
    "labels",
    f"{SLURM}.partitions",
    f"{SLURM}.login_node_pool_id",
    f"{SLURM}.prolog_bash_scripts",
    f"{SLURM}.epilog_bash_scripts",
    f"{SLURM}.config",
    f"{SLURM}.default_partition_id",
    f"{SLURM}.node_sets",
}
IMMUTABLE_POOL_FIELDS = ("machineSpec", "provisioningModel", "zone")
# slurm.conf keys the service manages itself, compared lower-case with underscores removed.
REFUSED_SLURM_KEYS = {
    "prolog",
    "epilog",
    "healthcheckprogram",
    "healthcheckinterval",
    "healthchecknodestate",
    "requeueexit",
    # slurmdbd parameters
    "accountingstoragehost",
    "accountingstorageport",
    "accountingstoragepass",
    "accountingstorageuser",
    "accountingstoragebackuphost",
    "accountingstorageexternalhost",
    "dbdhost",
    "dbdaddr",
    "dbdport",
    "dbdbackuphost",
    "storagehost",
    "storageport",
    "storagepass",
    "storageuser",
    "storageloc",
    "storagetype",
}


class SimError(Exception):
    """An API error the simulator answers with, in AIP-193 shape."""

    def __init__(self, status: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason

    @property
    def http_status(self) -> int:
        return HTTP_FROM_STATUS[self.status]

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.http_status,
            "message": self.message,
            "status": self.status,
        }
        if self.reason:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason,
                    "domain": "aiplatform.googleapis.com",
                    "metadata": {},
                }
            ]
        return {"error": error}


def invalid(message: str) -> SimError:
    return SimError("INVALID_ARGUMENT", message)


def camelize(value: Any, *, keep_keys: bool = False) -> Any:
    """Convert a request document's keys to camelCase, leaving map fields' keys as given."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if keep_keys or key.startswith("@") else to_camel(key)
            out[name] = camelize(item, keep_keys=name in MAP_FIELDS and not keep_keys)
        return out
    if isinstance(value, list):
        return [camelize(item) for item in value]
    return value


def mask_paths(raw: str) -> list[str]:
    """Parse an updateMask (camelCase or snake_case paths) and refuse unknown paths."""
    paths = [p.strip() for p in raw.split(",") if p.strip()]
    if not paths:
        raise invalid("update_mask is required and must name at least one field")
    normalized = [".".join(to_snake(seg) for seg in p.split(".")) for p in paths]
    for original, path in zip(paths, normalized, strict=True):
        if path not in ALLOWED_MASK_PATHS:
            raise invalid(
                f"Invalid update_mask path: {original!r}. "
                f"Updatable fields are: {', '.join(sorted(ALLOWED_MASK_PATHS))}"
            )
    return normalized


def get_path(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for segment in path.split("."):
        value = value.get(to_camel(segment)) if isinstance(value, dict) else None
    return value


def set_path(document: dict[str, Any], path: str, value: Any) -> None:
    segments = [to_camel(s) for s in path.split(".")]
    for segment in segments[:-1]:
        document = document.setdefault(segment, {})
    if value is None:
        document.pop(segments[-1], None)
    else:
        document[segments[-1]] = value


def slurm_spec(cluster: dict[str, Any]) -> dict[str, Any]:
    spec = get_path(cluster, SLURM)
    return spec if isinstance(spec, dict) else {}


def _int_field(pool_id: str, spec: dict[str, Any], field: str) -> int:
    value = spec.get(field, 0)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(
            f"node pool {pool_id!r}: scaling_spec.{to_snake(field)} must be an integer"
        ) from None
    return number


def check_node_pools(pools: Any) -> list[str]:
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
        if not get_path(pool, "machine_spec.machine_type"):
            raise invalid(f"node pool {pool_id!r}: machine_spec.machine_type is required")
        scaling = pool.get("scalingSpec") or {}
        low = _int_field(pool_id, scaling, "minNodeCount")
        high = _int_field(pool_id, scaling, "maxNodeCount")
        if not 0 <= low <= high:
            raise invalid(
                f"node pool {pool_id!r}: scaling_spec must have 0 <= min_node_count <= "
                f"max_node_count (got min {low}, max {high})"
            )
    return ids


def check_slurm_config(config: Any, where: str = "orchestrator_spec.slurm_spec.config") -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise invalid(f"{where} must be a map of slurm.conf settings")
    for key in config:
        if str(key).lower().replace("_", "") in REFUSED_SLURM_KEYS:
            raise invalid(f"{where}: the slurm.conf key {key!r} is managed by the service")


def check_cluster(cluster: dict[str, Any], *, creating: bool) -> None:
    """Whole-resource rules that hold after any create or update."""
    pool_ids = check_node_pools(cluster.get("nodePools"))
    slurm = slurm_spec(cluster)
    if not slurm:
        raise invalid("orchestrator_spec.slurm_spec is required")
    login = slurm.get("loginNodePoolId")
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
        check_slurm_config(partition.get("config"), f"partition {pid!r} config")
    default = slurm.get("defaultPartitionId")
    if default and default not in partition_ids:
        raise invalid(
            f"orchestrator_spec.slurm_spec.default_partition_id {default!r} names no partition"
        )
    check_slurm_config(slurm.get("config"))
    for field in ("prologBashScripts", "epilogBashScripts"):
        scripts = slurm.get(field)
        if scripts is not None and not (
            isinstance(scripts, list) and all(isinstance(s, str) for s in scripts)
        ):
            raise invalid(f"orchestrator_spec.slurm_spec.{to_snake(field)} must be a list of text")


def check_immutable_pools(current: list[dict[str, Any]], proposed: list[dict[str, Any]]) -> None:
    before = {str(p.get("id")): p for p in current}
    for pool in proposed:
        old = before.get(str(pool.get("id")))
        if old is None:
            continue
        for field in IMMUTABLE_POOL_FIELDS:
            if field in pool and pool.get(field) != old.get(field):
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
