"""The shapes of JSON on the wire: camelCase keys (map fields' keys left alone), proto3's
omission of zero values, and dotted field paths."""

from __future__ import annotations

from typing import Any

from pydantic.alias_generators import to_camel

# Map fields: their keys are data, not field names (schema type KeyValuePairs/KeyValueLabels).
MAP_FIELDS = {"labels", "config", "metadata", "endpoints"}
SLURM = "orchestrator_spec.slurm_spec"


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


def _zero(value: Any) -> bool:
    if value is None or value is False or value == "" or value == [] or value == {}:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def proto3(value: Any, *, is_map: bool = False) -> Any:
    """A document as proto3 JSON emits it: fields holding a zero value (0, "", false, an
    empty list or message) are left out; a map's entries are kept whatever their value."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            shown = proto3(item, is_map=not is_map and key in MAP_FIELDS)
            if is_map or not _zero(shown):
                out[key] = shown
        return out
    if isinstance(value, list):
        return [proto3(item) for item in value]
    return value


def normalize(cluster: dict[str, Any]) -> dict[str, Any]:
    """Values as the API stores them: a boolean given as text (the Flex Start page writes
    ``"enable_public_ips": "true"``) is read as the boolean it names."""
    for pool in cluster.get("nodePools") or []:
        if isinstance(pool, dict) and isinstance(pool.get("enablePublicIps"), str):
            pool["enablePublicIps"] = pool["enablePublicIps"].strip().lower() == "true"
    return cluster


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
