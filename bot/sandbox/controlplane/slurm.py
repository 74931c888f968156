"""slurmrestd replies as ``:callSlurmRestApi`` relays them (data parsers v0.0.40 to v0.0.42).

From manage-clusters-slurm: the reply is ``{"status", "body"}`` with slurmrestd's JSON as a
string; calls run as the caller's own Linux account ("you can't run the job as another
user"), so with slurm.conf ``PrivateData=jobs`` other users' jobs are not listed, while
nodes always are; a path that is not a Slurm path is INVALID_ARGUMENT; a data parser version
the node image does not serve is slurmrestd's own 404.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

PATH = re.compile(r"^/(slurm|slurmdb)/(v\d+\.\d+\.\d+)/(?P<rest>[A-Za-z_/0-9.-]*)$")
RESOURCES = re.compile(r"^(jobs|nodes|ping|shares)/?$")
CALLER = "clusterbot"  # the Linux account the bot's service account maps to
BUSY_JOB_STATES = {"RUNNING", "COMPLETING"}


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def _meta(cluster_id: str, version: str) -> dict[str, Any]:
    return {
        "plugin": {
            "type": "openapi/slurmctld",
            "name": "Slurm OpenAPI slurmctld",
            "data_parser": f"data_parser/{version}",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "[control-plane-proxy]", "user": CALLER, "group": CALLER},
        "command": [],
        "slurm": {
            "version": {"major": "24", "minor": "05", "micro": "5"},
            "release": "24.05.5",
            "cluster": cluster_id,
        },
    }


def _states(job: dict[str, Any]) -> list[str]:
    state = job.get("job_state", "RUNNING")
    return [str(s) for s in state] if isinstance(state, list) else [str(state)]


def job_document(cluster_id: str, index: int, job: dict[str, Any], now: datetime) -> dict[str, Any]:
    states = _states(job)
    epoch = int(now.timestamp())
    running = bool(BUSY_JOB_STATES & set(states))
    return {
        "job_id": int(job.get("job_id", 100 + index)),
        "name": job.get("name", f"job-{index}"),
        "user_name": job.get("user_name", "researcher"),
        "account": job.get("account", "default"),
        "partition": job.get("partition", "default"),
        "job_state": states,
        # JOB_INFO state_reason: "None" once running; a pending job says why it waits
        "state_reason": job.get("state_reason", "None" if running else "Priority"),
        "priority": _number(int(job.get("priority", 10_000 - index))),
        "qos": job.get("qos", "normal"),
        "node_count": _number(int(job.get("node_count", 1))),
        "nodes": job.get("nodes", f"{cluster_id}-node-{index}" if running else ""),
        "submit_time": _number(epoch - 600),
        "start_time": _number(epoch - 300 if running else 0),
        "time_limit": _number(1440),
    }


def node_documents(
    cluster: dict[str, Any], jobs: list[dict[str, Any]], sizes: dict[str, tuple[int, int]]
) -> list[dict[str, Any]]:
    """Slurm's nodes, consistent with the cluster's VMs and its jobs: each existing node of a
    compute pool is IDLE or, while running jobs need it, ALLOCATED; the rest of a pool that
    scales with the queue is known to Slurm as powered-down cloud nodes."""
    cluster_id = str(cluster.get("name", "")).rsplit("/", 1)[-1]
    login = ((cluster.get("orchestratorSpec") or {}).get("slurmSpec") or {}).get("loginNodePoolId")
    busy = sum(int(job.get("node_count", 1)) for job in jobs if BUSY_JOB_STATES & set(_states(job)))
    nodes = []
    for pool in cluster.get("nodePools", []):
        if pool["id"] == login:
            continue
        existing, high = sizes.get(pool["id"], (0, 0))
        for index in range(max(existing, high)):
            if index >= existing:
                state = ["IDLE", "POWERED_DOWN", "CLOUD"]
            elif busy > 0:
                state, busy = ["ALLOCATED"], busy - 1
            else:
                state = ["IDLE"]
            nodes.append(
                {
                    "name": f"{cluster_id}-{pool['id']}-{index}",
                    "state": state,
                    "partitions": [pool["id"]],
                    "cpus": 8,
                }
            )
    return nodes


def _float(value: float) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def share_documents(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """SHARES_RESP_MSG for the accounts and users of the jobs: each account an ASSOCIATION
    row under root with equal shares, each user a USER row under its account. Usage is the
    nodes its running jobs hold (standing in for decayed usage), and the factor is the
    classic fair-share formula F = 2^(-EffectvUsage / NormShares) from Slurm's priority/
    multifactor documentation."""
    users: dict[str, set[str]] = {}
    used: dict[tuple[str, str], int] = {}
    for job in jobs:
        account, user = str(job.get("account", "default")), str(job.get("user_name", "researcher"))
        users.setdefault(account, set()).add(user)
        if BUSY_JOB_STATES & set(_states(job)):
            used[account, user] = used.get((account, user), 0) + int(job.get("node_count", 1))
    total = sum(used.values()) or 1
    rows: list[dict[str, Any]] = []

    def row(name: str, parent: str, kind: str, norm_shares: float, usage: int) -> None:
        effective = usage / total
        rows.append(
            {
                "id": len(rows) + 1,
                "cluster": "",
                "name": name,
                "parent": parent,
                "partition": "",
                "shares_normalized": _float(round(norm_shares, 6)),
                "shares": _number(1),
                "effective_usage": _float(round(effective, 6)),
                "usage_normalized": _float(round(effective, 6)),
                "usage": usage * 3600,
                "fairshare": {
                    "factor": _float(round(2 ** (-effective / norm_shares), 6)),
                    "level": _float(round(norm_shares / effective, 6) if effective else 0.0),
                },
                "type": [kind],
            }
        )

    for account in sorted(users):
        share = 1 / len(users)
        row(
            account,
            "root",
            "ASSOCIATION",
            share,
            sum(used.get((account, u), 0) for u in users[account]),
        )
        for user in sorted(users[account]):
            row(user, account, "USER", share / len(users[account]), used.get((account, user), 0))
    return {"shares": rows, "total_shares": len(rows)}


def _not_found(cluster_id: str, version: str, path: str) -> dict[str, Any]:
    error = {"error_number": 9003, "error": "Unable to find requested URL", "source": path}
    body = {"meta": _meta(cluster_id, version), "errors": [error], "warnings": []}
    return {"status": 404, "body": json.dumps(body)}


def reply(
    cluster: dict[str, Any],
    method: str,
    path: str,
    jobs: list[dict[str, Any]],
    now: datetime,
    *,
    versions: tuple[str, ...],
    private_jobs: bool,
    sizes: dict[str, tuple[int, int]],
) -> dict[str, Any]:
    """The ``{"status", "body"}`` pair for one proxied request (the path is already a Slurm
    path)."""
    cluster_id = str(cluster.get("name", "")).rsplit("/", 1)[-1]
    match = PATH.match(path)
    assert match is not None
    version = match.group(2)
    resource = RESOURCES.match(match["rest"])
    if version not in versions or match.group(1) != "slurm" or resource is None:
        return _not_found(cluster_id, versions[-1], path)
    if method != "HTTP_METHOD_GET":
        return _not_found(cluster_id, version, path)
    document: dict[str, Any] = {"meta": _meta(cluster_id, version), "errors": [], "warnings": []}
    kind = resource.group(1)
    if kind == "ping":
        document["pings"] = [
            {"hostname": f"{cluster_id}-controller", "pinged": "UP", "mode": "primary"}
        ]
    elif kind == "shares":
        document["shares"] = share_documents(jobs)
    elif kind == "nodes":
        document["nodes"] = node_documents(cluster, jobs, sizes)
        document["last_update"] = _number(int(now.timestamp()))
    else:
        visible = [
            job_document(cluster_id, i, job, now)
            for i, job in enumerate(jobs)
            if not private_jobs or job.get("user_name") == CALLER
        ]
        document["jobs"] = visible
        document["last_backfill"] = _number(int(now.timestamp()) - 30)
        document["last_update"] = _number(int(now.timestamp()))
    return {"status": 200, "body": json.dumps(document)}
