"""Cluster health, from what the sweep already reads: Slurm nodes out of service, a cluster
that left RUNNING, and pending jobs held up by nodes that are not available. Pure functions
of what was read and the time, each rule beside the page it comes from, checked on the
real slurmrestd captures (``tests/test_health_rules.py``).

- *A broken node* (sinfo(1) NODE STATE CODES):
  - DOWN: "The node is unavailable for use";
  - DRAIN with no job: *drained*, "unavailable for use per system administrator request";
    DRAIN with a job still on it (ALLOCATED, MIXED or COMPLETING): *draining*, "will not be
    allocated additional jobs";
  - FAIL: "expected to fail soon and is unavailable for use";
  - NOT_RESPONDING (the ``*`` of sinfo): "presently not responding and will not be
    allocated any new work".
  - A node POWERED_DOWN by Slurm's power saving is no VM: with none of the states above,
    nothing is wrong with it (a reason left on it is stale); with one (a node that failed to
    resume is set DOWN and powered down), it is broken but costs nothing.
  - Each is named with Slurm's ``reason``, who set it (``reason_set_by_user``) and since when
    (``reason_changed_at``), as ``scontrol show node`` shows them.
- *A cluster out of RUNNING* (the API's ``clusterStatus.state``, vertex-api.md): ERROR, or a
  state the API does not say, is a problem at once, with the control plane's own words
  (``clusterStatus.detail``, or its ``error``'s message). PROVISIONING and UPDATING are
  changes under way: a problem only when one lasts longer than ``stuck_after`` and clusterbot
  follows no operation on it. STOPPING is a delete: never a health problem.
- *A stuck queue* (job_reason_codes.html): a pending job waiting on ReqNodeNotAvail ("Some
  node specifically required by the job is not currently available ... DOWN, DRAINED, or not
  responding"), NodeDown ("A node required by the job is down") or PartitionNodeLimit (which
  "can also indicate that required nodes are DOWN or DRAINED") for longer than
  ``stuck_after``. The nodes are those Slurm names in the job's reason
  (``UnavailableNodes:…``), else the cluster's broken nodes in the job's partition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.slurm.reasons import MAINTENANCE_FLAG, Wait, wait_of

STUCK_AFTER = 2 * 3600.0  # seconds a change or a blocked queue lasts before it is a problem
UNAVAILABLE = re.compile(r"UnavailableNodes:(\S+)")
# slurmctld names them as a host list (node_scheduler.c, bitmap2node_name): cn[3,5-6],gpu1
HOSTLIST_COMMA = re.compile(r",(?![^\[]*\])")  # a comma between hosts, not in a range
WORKING = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


class NodeTrouble(StrEnum):
    DOWN = "down"
    DRAINED = "drained"
    DRAINING = "draining"
    FAILING = "failing"
    NOT_RESPONDING = "not responding"


@dataclass(frozen=True)
class BrokenNode:
    name: str
    trouble: NodeTrouble
    reason: str  # Slurm's, or "no reason given"
    by: str  # who set the reason ("" when Slurm does not say)
    since: float | None  # when the reason was set
    partitions: tuple[str, ...] = ()
    billed: bool = True  # its VM exists (not POWERED_DOWN): paid for while broken

    @property
    def key(self) -> str:
        """What makes it the same problem from one sweep to the next."""
        return f"{self.name}:{self.trouble}"


# sinfo(1) NODE STATE CODES, flags: REBOOT_REQUESTED "a request to reboot this node has been
# made", REBOOT_ISSUED "a reboot request has been sent"; ``scontrol reboot ASAP`` drains the
# node until it is back (proc_req.c, reason "Reboot ASAP"): planned, not broken
REBOOTING = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})


def trouble_of(node: SlurmNode) -> NodeTrouble | None:
    """What is wrong with the node as Slurm's state says, or None; a node drained for a reboot
    someone asked for is not broken (it is back once rebooted), nor is one in a maintenance
    reservation."""
    states = node.states
    if MAINTENANCE_FLAG in states:
        return None
    if states & REBOOTING and "DOWN" not in states and "FAIL" not in states:
        return None
    if "DOWN" in states:
        return NodeTrouble.DOWN
    if "FAIL" in states:
        return NodeTrouble.FAILING
    if "DRAIN" in states or "DRAINED" in states or "DRAINING" in states:
        return NodeTrouble.DRAINING if states & WORKING else NodeTrouble.DRAINED
    if "NOT_RESPONDING" in states:
        return NodeTrouble.NOT_RESPONDING
    return None


def broken_nodes(nodes: Iterable[SlurmNode]) -> list[BrokenNode]:
    """The nodes out of service, by name."""
    found = []
    for node in nodes:
        trouble = trouble_of(node)
        if trouble is not None:
            found.append(
                BrokenNode(
                    node.name,
                    trouble,
                    node.reason or "no reason given",
                    node.reason_by,
                    node.reason_at,
                    node.partitions,
                    billed="POWERED_DOWN" not in node.states,
                )
            )
    return sorted(found, key=lambda b: b.name)


@dataclass(frozen=True)
class ClusterTrouble:
    state: str
    message: str  # the control plane's own words, or what the state means


def cluster_trouble(
    state: str, message: str, *, changing_for: float | None, followed: bool, stuck_after: float
) -> ClusterTrouble | None:
    """A cluster out of RUNNING as a health problem, or None; ``changing_for``: how long it
    has been PROVISIONING or UPDATING, when known."""
    if state in ("RUNNING", "STOPPING"):
        return None
    if state in ("PROVISIONING", "UPDATING"):
        if followed or changing_for is None or changing_for < stuck_after:
            return None
        hours = changing_for / 3600
        return ClusterTrouble(
            state, message or f"{state} for {hours:.1f} h, longer than a change takes"
        )
    return ClusterTrouble(state, message or f"the control plane reports {state}")


@dataclass(frozen=True)
class BlockedJob:
    job_id: int
    user: str
    partition: str
    reason: str  # Slurm's word
    pending_for: float
    nodes: tuple[str, ...]  # the nodes it waits on, as far as Slurm or the census says
    text: str = ""  # slurmctld's own words beside the reason (``state_description``)


def blocked_jobs(
    jobs: Iterable[SlurmJob],
    broken: Sequence[BrokenNode],
    now: float,
    stuck_after: float = STUCK_AFTER,
) -> list[BlockedJob]:
    """Pending jobs held up by unavailable nodes for longer than ``stuck_after``."""
    found = []
    for job in jobs:
        if "PENDING" not in job.states:
            continue
        if wait_of(job.reason, job.reason_text).wait != Wait.BLOCKED:
            continue
        waited = now - job.submitted if job.submitted else None
        if waited is None or waited < stuck_after:
            continue
        named = UNAVAILABLE.search(job.reason_text)
        if named is not None:
            nodes = tuple(HOSTLIST_COMMA.split(named.group(1).rstrip(")")))
        else:
            nodes = tuple(
                b.name for b in broken if not b.partitions or job.partition in b.partitions
            )
        found.append(
            BlockedJob(
                job.job_id, job.user, job.partition, job.reason, waited, nodes, job.reason_text
            )
        )
    return sorted(found, key=lambda j: -j.pending_for)


@dataclass(frozen=True)
class ClusterHealth:
    """One cluster's health at a sweep: plain data, kept in the sweep's report."""

    nodes: tuple[BrokenNode, ...] = ()
    trouble: ClusterTrouble | None = None
    blocked: tuple[BlockedJob, ...] = ()
    broken_hour: float | None = 0.0  # what the broken nodes' VMs cost an hour (None: unknown)

    @property
    def healthy(self) -> bool:
        return not self.nodes and self.trouble is None and not self.blocked

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [
                [n.name, str(n.trouble), n.reason, n.by, n.since, list(n.partitions), n.billed]
                for n in self.nodes
            ],
            "trouble": [self.trouble.state, self.trouble.message] if self.trouble else None,
            "blocked": [
                [j.job_id, j.user, j.partition, j.reason, j.pending_for, list(j.nodes), j.text]
                for j in self.blocked
            ],
            "broken_hour": self.broken_hour,
        }

    def shown(self) -> dict[str, Any]:
        """The health as ``sweep --once --json`` tells it (DESIGN.md's contract): named keys,
        empty lists when healthy."""
        return {
            "nodes": [
                {
                    "name": n.name,
                    "problem": str(n.trouble),
                    "reason": n.reason,
                    "set_by": n.by or None,
                    "since": n.since,
                    "billed": n.billed,
                }
                for n in self.nodes
            ],
            "blocked_jobs": [
                {
                    "job_id": j.job_id,
                    "reason": j.reason,
                    "slurm_says": j.text or None,
                    "user": j.user,
                    "partition": j.partition,
                    "waited_s": round(j.pending_for),
                    "nodes": list(j.nodes),
                }
                for j in self.blocked
            ],
            "cluster": (
                {"state": self.trouble.state, "message": self.trouble.message}
                if self.trouble
                else None
            ),
            "broken_cost_per_hour": self.broken_hour,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterHealth:
        nodes = tuple(
            BrokenNode(n[0], NodeTrouble(n[1]), n[2], n[3], n[4], tuple(n[5]), bool(n[6]))
            for n in data.get("nodes", [])
        )
        trouble = data.get("trouble")
        blocked = tuple(
            BlockedJob(int(j[0]), j[1], j[2], j[3], float(j[4]), tuple(j[5]), str(j[6:7] and j[6]))
            for j in data.get("blocked", [])
        )
        return cls(
            nodes,
            ClusterTrouble(trouble[0], trouble[1]) if trouble else None,
            blocked,
            data.get("broken_hour"),
        )


def broken_cost(
    broken: Iterable[BrokenNode], node_hour: Mapping[str, float | None]
) -> float | None:
    """What the broken nodes whose VM exists cost an hour: each at its partition's price
    (``node_hour`` by partition), or at the dearest compute price when Slurm names none."""
    total = 0.0
    dearest = max((p for p in node_hour.values() if p is not None), default=None)
    for node in broken:
        if not node.billed:
            continue
        prices = [node_hour.get(p) for p in node.partitions if p in node_hour]
        price = prices[0] if prices else dearest
        if price is None:
            return None
        total += price
    return total
