"""Slurm's view of a cluster, read through the control plane's ``:callSlurmRestApi`` proxy.

slurmrestd's JSON is read here and nowhere else. Per manage-clusters-slurm: a GET carries no
``body``; the docs' examples use data parser ``v0.0.42`` with a trailing slash
(``/slurm/v0.0.42/jobs/``); calls run as the caller's own Linux account, so other users'
jobs may be hidden (PrivateData) while nodes are not; an unreachable Slurm controller answers
UNAVAILABLE ("retry after a short wait"), so the sweep gives each cluster a short deadline.
"""

from __future__ import annotations

import json
from typing import Any

from bot.vertex.client import VertexClient
from bot.vertex.errors import InvalidArgumentError, SlurmUnreadableError, VertexError
from bot.vertex.operations import Share, SlurmActivity, SlurmJob, SlurmResponse

# Data parser versions the node images' slurmrestd serves (Slurm 24.05 to 25.05), the docs'
# own first. Tried in this order when a version is refused, then remembered per cluster.
SUPPORTED_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.43")
RUNNING_JOB_STATES = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "RESIZING"}
BUSY_NODE_STATES = {"ALLOCATED", "MIXED", "COMPLETING"}
SWEEP_DEADLINE = 10.0  # seconds a cluster's Slurm may take in all, retries included


def _states(value: Any) -> set[str]:
    """A slurmrestd state: a list of flags (v0.0.40+) or one string (older), upper-cased."""
    if isinstance(value, str):
        return {value.upper()}
    if isinstance(value, list):
        return {str(v).upper() for v in value}
    return set()


def _document(reply: SlurmResponse, what: str) -> dict[str, Any]:
    try:
        document = json.loads(reply.body) if reply.body else {}
    except ValueError:
        raise SlurmUnreadableError(f"slurmrestd sent a {what} reply that is not JSON") from None
    if not isinstance(document, dict):
        raise SlurmUnreadableError(f"slurmrestd sent a {what} reply that is not an object")
    if reply.status != 200:
        errors = document.get("errors") or []
        first = errors[0] if errors and isinstance(errors[0], dict) else {}
        detail = first.get("error") or first.get("description") or ""
        raise SlurmUnreadableError(
            f"slurmrestd answered HTTP {reply.status} to the {what} query"
            + (f": {detail}" if detail else "")
        )
    return document


def count_jobs(document: dict[str, Any]) -> tuple[int, int]:
    """Running and pending jobs in a ``GET /jobs/`` reply."""
    running = pending = 0
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise SlurmUnreadableError("slurmrestd's job reply has no job list")
    for job in jobs:
        states = _states(job.get("job_state") if isinstance(job, dict) else None)
        if "PENDING" in states:
            pending += 1
        elif RUNNING_JOB_STATES & states:
            running += 1
    return running, pending


def count_nodes(document: dict[str, Any]) -> tuple[int, int]:
    """Nodes that are working (allocated, mixed, completing) and all nodes, in ``GET /nodes/``."""
    nodes = document.get("nodes")
    if not isinstance(nodes, list):
        raise SlurmUnreadableError("slurmrestd's node reply has no node list")
    busy = sum(
        1
        for node in nodes
        if isinstance(node, dict) and BUSY_NODE_STATES & _states(node.get("state"))
    )
    return busy, len(nodes)


def _number(value: Any) -> Any:
    """A slurmrestd number: ``{"set", "infinite", "number"}`` (v0.0.40+) or a bare number;
    None when not set or infinite."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _float(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else float(number)


def read_jobs(document: dict[str, Any]) -> list[SlurmJob]:
    """The jobs of a ``GET /jobs/`` reply (JOB_INFO: job_id, name, user_name, account,
    partition, job_state, state_reason, priority, qos, node_count, nodes, submit_time,
    start_time); an entry that is not an object is skipped."""
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise SlurmUnreadableError("slurmrestd's job reply has no job list")
    found = []
    for job in jobs:
        if not isinstance(job, dict):
            continue
        found.append(
            SlurmJob(
                job_id=_int(job.get("job_id")) or 0,
                name=str(job.get("name") or ""),
                user=str(job.get("user_name") or ""),
                account=str(job.get("account") or ""),
                partition=str(job.get("partition") or ""),
                states=frozenset(_states(job.get("job_state"))),
                reason=str(job.get("state_reason") or "None"),
                priority=_int(job.get("priority")),
                qos=str(job.get("qos") or ""),
                node_count=_int(job.get("node_count")) or 0,
                nodes=str(job.get("nodes") or ""),
                submitted=_int(job.get("submit_time")) or None,
                started=_int(job.get("start_time")) or None,
            )
        )
    return found


def read_shares(document: dict[str, Any]) -> list[Share]:
    """The associations of a ``GET /shares`` reply (``shares.shares[]``, each
    ASSOC_SHARES_OBJ_WRAP: a USER row is named for the user, its parent the account)."""
    message = document.get("shares")
    rows = message.get("shares") if isinstance(message, dict) else None
    if not isinstance(rows, list):
        raise SlurmUnreadableError("slurmrestd's shares reply has no share list")
    found = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        is_user = "USER" in _states(row.get("type"))
        fairshare = row.get("fairshare")
        name, parent = str(row.get("name") or ""), str(row.get("parent") or "")
        found.append(
            Share(
                account=parent if is_user else name,
                user=name if is_user else None,
                shares=_int(row.get("shares")),
                shares_normalized=_float(row.get("shares_normalized")),
                usage_normalized=_float(row.get("usage_normalized")),
                effective_usage=_float(row.get("effective_usage")),
                fairshare=_float(fairshare.get("factor")) if isinstance(fairshare, dict) else None,
            )
        )
    return found


class SlurmReader:
    """Reads a cluster's jobs and nodes, finding the slurmrestd version each cluster serves."""

    def __init__(
        self,
        vertex: VertexClient,
        preferred: str = SUPPORTED_VERSIONS[0],
        deadline: float = SWEEP_DEADLINE,
    ) -> None:
        self.vertex = vertex
        self.preferred = preferred
        self.deadline = deadline
        self.known: dict[str, str] = {}  # cluster name -> the version that answered

    def versions(self, cluster: str) -> list[str]:
        order = [self.known.get(cluster, ""), self.preferred, *SUPPORTED_VERSIONS]
        return list(dict.fromkeys(v for v in order if v))

    async def get(self, cluster: str, resource: str) -> dict[str, Any]:
        """``GET /slurm/{version}/{resource}``, trying versions until one is served;
        ``resource`` is spelled as slurmrestd's OpenAPI paths are (``jobs/``, ``shares``)."""
        tried = []
        for version in self.versions(cluster):
            path = f"/slurm/{version}/{resource}"
            try:
                reply = await self.vertex.call_slurm_rest_api(cluster, path, deadline=self.deadline)
            except InvalidArgumentError:
                tried.append(version)  # "the path is not a valid Slurm path"
                continue
            except VertexError as error:
                raise SlurmUnreadableError(
                    f"Slurm could not be reached: {error.user_message}"
                ) from error
            if reply.status == 404:
                tried.append(version)  # slurmrestd serves no such data parser version
                continue
            self.known[cluster] = version
            return _document(reply, resource.strip("/").rstrip("s"))
        raise SlurmUnreadableError(
            f"slurmrestd served none of the versions {', '.join(tried)}; set "
            "CLUSTERBOT_SLURM_API_VERSION to the one your node image runs"
        )

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        return read_jobs(await self.get(cluster, "jobs/"))

    async def shares(self, cluster: str) -> list[Share]:
        """The fair-share tree; slurmrestd serves it from data parser v0.0.40 on."""
        return read_shares(await self.get(cluster, "shares"))

    async def activity(self, cluster: str) -> SlurmActivity:
        """Running and pending jobs; nodes too when no job is visible (jobs may be hidden)."""
        running, pending = count_jobs(await self.get(cluster, "jobs/"))
        version = self.known.get(cluster, "")
        if running or pending:
            return SlurmActivity(running, pending, version=version)
        busy, total = count_nodes(await self.get(cluster, "nodes/"))
        return SlurmActivity(running, pending, busy_nodes=busy, nodes=total, version=version)
