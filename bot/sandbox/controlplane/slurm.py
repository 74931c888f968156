"""slurmrestd replies as ``:callSlurmRestApi`` relays them (data_parser v0.0.40 to v0.0.42)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

SUPPORTED = re.compile(r"^/slurm/v0\.0\.(40|41|42)/(jobs|ping)/?$")


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def _meta(cluster_id: str, version: str) -> dict[str, Any]:
    return {
        "plugin": {
            "type": "openapi/slurmctld",
            "name": "Slurm OpenAPI slurmctld",
            "data_parser": f"data_parser/v0.0.{version}",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "[control-plane-proxy]", "user": "root", "group": "root"},
        "command": [],
        "slurm": {
            "version": {"major": "24", "minor": "05", "micro": "5"},
            "release": "24.05.5",
            "cluster": cluster_id,
        },
    }


def job_document(cluster_id: str, index: int, job: dict[str, Any], now: datetime) -> dict[str, Any]:
    state = job.get("job_state", "RUNNING")
    states = state if isinstance(state, list) else [state]
    epoch = int(now.timestamp())
    running = "RUNNING" in states
    return {
        "job_id": int(job.get("job_id", 100 + index)),
        "name": job.get("name", f"job-{index}"),
        "user_name": job.get("user_name", "researcher"),
        "account": job.get("account", "default"),
        "partition": job.get("partition", "default"),
        "job_state": states,
        "node_count": _number(int(job.get("node_count", 1))),
        "nodes": job.get("nodes", f"{cluster_id}-node-{index}" if running else ""),
        "submit_time": _number(epoch - 600),
        "start_time": _number(epoch - 300 if running else 0),
        "time_limit": _number(1440),
    }


def reply(
    cluster_id: str, method: str, path: str, jobs: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """The ``{"status", "body"}`` pair for one proxied request."""
    match = SUPPORTED.match(path)
    if method != "HTTP_METHOD_GET" or match is None:
        error = {"error_number": 9003, "error": "Unable to find requested URL", "source": path}
        body = {"meta": _meta(cluster_id, "41"), "errors": [error], "warnings": []}
        return {"status": 404, "body": json.dumps(body)}
    version, resource = match.groups()
    document: dict[str, Any] = {"meta": _meta(cluster_id, version), "errors": [], "warnings": []}
    if resource == "ping":
        document["pings"] = [
            {"hostname": f"{cluster_id}-controller", "pinged": "UP", "mode": "primary"}
        ]
    else:
        document["jobs"] = [job_document(cluster_id, i, job, now) for i, job in enumerate(jobs)]
        document["last_backfill"] = _number(int(now.timestamp()) - 30)
        document["last_update"] = _number(int(now.timestamp()))
    return {"status": 200, "body": json.dumps(document)}
