"""Where a cluster's Slurm puts things: its nodes, one per VM a compute pool has (the rest
of a pool that scales with the queue powered down, power_save.html), the state each shows,
and the nodes each running job holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.controlplane import slurm_reservations, wire
from bot.sandbox.controlplane.slurm_parts import BUSY_JOB_STATES, hostnames, states_of

# sinfo(1): a node in one of these takes no new job
UNUSABLE = {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN"}
POWERED_DOWN = ["IDLE", "CLOUD", "POWERED_DOWN"]  # a cloud node with no VM (power_save.html)


def is_whole(job: dict[str, Any]) -> bool:
    """A whole slurmrestd job object, served as it is (not the short form)."""
    return "job_resources" in job or isinstance(job.get("priority"), dict)


@dataclass
class Placement:
    """Which nodes each running job holds, and every node's state."""

    nodes: dict[str, list[str]] = field(default_factory=dict)  # job key -> node names
    states: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # node -> state, reason
    partitions: dict[str, list[str]] = field(default_factory=dict)  # node -> partition names
    reservations: frozenset[str] = frozenset()  # the reservations active now
    configuring: set[str] = field(default_factory=set)  # jobs whose nodes still boot

    def active(self, reservation: str) -> bool:
        return reservation in self.reservations


def _partitions(cluster: dict[str, Any]) -> tuple[dict[str, list[str]], str]:
    slurm = wire.slurm_spec(cluster)
    partitions = slurm.get("partitions") or []
    default = slurm.get("defaultPartitionId") or (partitions[0]["id"] if partitions else "")
    return {p["id"]: list(p.get("nodePoolIds") or []) for p in partitions}, default


def place(
    cluster: dict[str, Any],
    jobs: list[dict[str, Any]],
    sizes: dict[str, tuple[int, int]],
    overrides: dict[str, dict[str, Any]],
    reservations: Sequence[dict[str, Any]] = (),
    now: float = 0.0,
    booting: frozenset[str] = frozenset(),
) -> Placement:
    """Slurm's nodes, consistent with the cluster's VMs and its jobs: each node a VM of a
    compute pool exists for is IDLE or, while a running job holds it, ALLOCATED; the rest of
    a pool that scales with the queue is a powered-down cloud node; a state set through
    ``/_sim/nodes`` is shown as set, and such a node takes no job unless it is usable. A node
    in a reservation active ``now`` carries its flags and takes only that reservation's jobs.
    A node of a pool that scales is a cloud node (CLOUD), POWERING_UP while its VM boots
    (``booting``), and a job allocated to it CONFIGURING meanwhile (power_save.html)."""
    cluster_id = str(cluster.get("name", "")).rsplit("/", 1)[-1]
    login = wire.slurm_spec(cluster).get("loginNodePoolId")
    pools_of, default = _partitions(cluster)
    active = {r["name"] for r in reservations if slurm_reservations.active(r, now)}
    placement = Placement(reservations=frozenset(active))
    free: dict[tuple[str, str], list[str]] = {}  # (reservation or "", pool) -> usable nodes
    for pool in cluster.get("nodePools", []):
        if pool["id"] == login:
            continue
        existing, high = sizes.get(pool["id"], (0, 0))
        names = [p for p, pools in pools_of.items() if pool["id"] in pools] or [pool["id"]]
        scaling = pool.get("scalingSpec") or {}
        cloud = int(scaling.get("minNodeCount", 0)) < int(scaling.get("maxNodeCount", 0))
        for index in range(max(existing, high)):
            node = f"{cluster_id}-{pool['id']}-{index}"
            placement.partitions[node] = names
            state = ["IDLE"] if index < existing else POWERED_DOWN
            if cloud and index < existing:
                state = ["IDLE", "CLOUD"] + (["POWERING_UP"] if node in booting else [])
            placement.states[node] = (state, "")
            if node in overrides:
                override = overrides[node]
                placement.states[node] = (list(override["state"]), override.get("reason", ""))
    within = {r["name"]: hostnames(r["node_list"], placement.states) for r in reservations}
    flags = slurm_reservations.node_flags(list(reservations), within, now)
    owner = {n: name for name, nodes in within.items() for n in nodes if n in flags}
    for node, (state, reason) in placement.states.items():
        placement.states[node] = (list(dict.fromkeys(state + flags.get(node, []))), reason)
        pool_id = node.removeprefix(f"{cluster_id}-").rsplit("-", 1)[0]
        if "POWERED_DOWN" not in state and not UNUSABLE & set(state):
            free.setdefault((owner.get(node, ""), pool_id), []).append(node)
    for key, job in enumerate(jobs):
        if not BUSY_JOB_STATES & set(states_of(job)) or is_whole(job):
            continue
        pools = pools_of.get(str(job.get("partition") or default)) or [p for _r, p in free]
        wanted, held = int(job.get("node_count", 1)), list[str]()
        mine = str(job.get("reservation") or "")
        for pool_id in pools:
            while wanted > len(held) and free.get((mine, pool_id)):
                held.append(free[mine, pool_id].pop(0))
        placement.nodes[str(key)] = held
        for node in held:
            power = [f for f in placement.states[node][0] if f in ("CLOUD", "POWERING_UP")]
            placement.states[node] = (["ALLOCATED", *power], "")
            if "POWERING_UP" in power:
                placement.configuring.add(str(key))
    return placement
