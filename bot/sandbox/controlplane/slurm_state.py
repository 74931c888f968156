"""The simulated Slurm behind ``:callSlurmRestApi``: jobs, how the controller behaves, and
the nodes pools have as the queue asks for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.sandbox.controlplane import rpc, slurm_reservations, wire
from bot.sandbox.controlplane.gpu_traces import instance_id
from bot.sandbox.controlplane.slurm_blocked import runnable
from bot.sandbox.controlplane.slurm_parts import DEFAULT_RELEASE, RELEASES, count_of
from bot.sandbox.controlplane.slurm_power import BOOT_SECONDS, SUSPEND_TIME, PoolPower

# Every base state and flag a node may be set to through /_sim/nodes: the newest data
# parser's NODE_STATES (SchedMD/slurm 284c3b95, src/plugins/data_parser/v0.0.44/parsers.c
# 8445-8480), the names slurmrestd writes
NODE_STATES = frozenset(
    [
        "INVALID",
        "UNKNOWN",
        "DOWN",
        "IDLE",
        "ALLOCATED",
        "ERROR",
        "MIXED",
        "FUTURE",
        "EXTERNAL",
        "RESERVED",
        "UNDRAIN",
        "CLOUD",
        "RESUME",
        "DRAIN",
        "COMPLETING",
        "NOT_RESPONDING",
        "POWERED_DOWN",
        "FAIL",
        "POWERING_UP",
        "MAINTENANCE",
        "REBOOT_REQUESTED",
        "REBOOT_CANCELED",
        "POWERING_DOWN",
        "DYNAMIC_FUTURE",
        "REBOOT_ISSUED",
        "PLANNED",
        "INVALID_REG",
        "POWER_DOWN",
        "POWER_UP",
        "POWER_DRAIN",
        "DYNAMIC_NORM",
        "BLOCKED",
    ]
)


@dataclass
class SlurmSwitches:
    """How one cluster's Slurm behaves behind the proxy (set through ``/_sim/slurm``)."""

    down: bool = False  # the controller cannot be reached: the proxy answers UNAVAILABLE
    private_jobs: bool = False  # PrivateData=jobs: other users' jobs are hidden
    release: str = DEFAULT_RELEASE  # the Slurm release, which decides the data parsers
    versions: tuple[str, ...] | None = None  # data parsers served, set apart from a release
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> state, reason
    reservations: list[dict[str, Any]] = field(default_factory=list)  # /_sim/reservations
    power: dict[str, PoolPower] = field(default_factory=dict)  # pools that scale: their VMs
    boot_seconds: float = BOOT_SECONDS
    suspend_time: float = SUSPEND_TIME

    def to_dict(self) -> dict[str, Any]:
        served = self.versions or RELEASES[self.release][1]
        return {
            "down": self.down,
            "private_jobs": self.private_jobs,
            "release": self.release,
            "versions": list(served),
            "nodes": self.nodes,
            "reservations": self.reservations,
            "boot_seconds": self.boot_seconds,
            "suspend_time": self.suspend_time,
        }

    def booting(self, cluster_id: str, now: float) -> set[str]:
        """The nodes whose VM is still booting (POWERING_UP)."""
        return {
            f"{cluster_id}-{pool}-{index}"
            for pool, power in self.power.items()
            for index in power.booting(now, self.boot_seconds)
        }


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SlurmQueue:
    """The simulator state's Slurm side (a mixin of ``SimulatorState``)."""

    clusters: dict[str, dict[str, Any]]
    jobs: dict[str, list[dict[str, Any]]]
    slurm: dict[str, SlurmSwitches]
    wall: Callable[[], datetime]
    resolve: Callable[[str], str]  # a cluster's full name from a short id or a name

    def demand(self, cluster: dict[str, Any], pool_id: str) -> int:
        """Nodes the Slurm queue asks of a pool: the jobs of the partitions that include it
        (a job without a partition goes to the default one) that run or can start; a held
        job, one that can never start or one whose begin time is ahead asks for none."""
        name = str(cluster.get("name", ""))
        slurm = wire.slurm_spec(cluster)
        partitions = slurm.get("partitions") or []
        default = slurm.get("defaultPartitionId") or (partitions[0]["id"] if partitions else "")
        pools_of = {p["id"]: p.get("nodePoolIds") or [] for p in partitions}
        wanted = 0
        now = self.wall().timestamp()
        held = self.switches(name).reservations
        for job in self.jobs.get(name, []):
            if not runnable(job, now, held):
                continue
            if pool_id in pools_of.get(job.get("partition") or default, []):
                wanted += count_of(job.get("node_count"))
        return wanted

    def pool_size(self, cluster: dict[str, Any], pool: dict[str, Any]) -> int:
        """Nodes a pool has: its minimum, and for a pool that scales with the queue (Flex
        Start docs: "Dynamic nodes ... scale up only when needed") up to its maximum as jobs
        ask for them."""
        scaling = pool.get("scalingSpec") or {}
        low, high = int(scaling.get("minNodeCount", 0)), int(scaling.get("maxNodeCount", 0))
        if low >= high:
            return low
        wanted = max(low, min(high, self.demand(cluster, str(pool["id"]))))
        switches = self.switches(str(cluster.get("name", "")))
        power = switches.power.get(str(pool["id"]))
        if power is None:  # as the cluster stands now: its VMs booted long ago
            status = (cluster.get("clusterStatus") or {}).get("nodesStatus") or []
            had = sum(1 for n in status if n.get("nodePoolId") == pool["id"]) or wanted
            power = PoolPower(had, {i: float("-inf") for i in range(had)})
            switches.power[str(pool["id"])] = power
        now = self.wall().timestamp()
        return power.advance(min(wanted, high), low, now, switches.suspend_time)

    def nodes_status(self, cluster: dict[str, Any], state: str) -> list[dict[str, Any]]:
        cluster_id = str(cluster.get("name", "")).rsplit("/", 1)[-1]
        login = wire.slurm_spec(cluster).get("loginNodePoolId")
        now = rfc3339(self.wall())
        nodes = []
        for pool in cluster.get("nodePools", []):
            count = self.pool_size(cluster, pool)
            for index in range(count):
                instance = f"{cluster_id}-{pool['id']}-{index}"
                nodes.append(
                    {
                        "nodePoolId": pool["id"],
                        "nodePoolType": "NODE_POOL_TYPE_LOGIN"
                        if pool["id"] == login
                        else "NODE_POOL_TYPE_COMPUTE",
                        "nodeState": state,
                        "instanceId": instance_id(instance),
                        "instanceName": instance,
                        "createTime": now,
                        "lastUpdateTime": now,
                    }
                )
        return nodes

    def set_jobs(self, key: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
        name = self.resolve(key)
        if "jobs" in spec:
            jobs = [dict(job) for job in spec["jobs"]]
            at = self.wall().timestamp()  # a start given as an age is fixed from now on
            for job in (j for j in jobs if "started_ago" in j):
                job["started_at"] = int(at - float(job.pop("started_ago")))
        else:
            jobs = [{"job_state": "RUNNING"} for _ in range(int(spec.get("running", 0)))]
            jobs += [{"job_state": "PENDING"} for _ in range(int(spec.get("pending", 0)))]
        self.jobs[name] = jobs
        self.resettle(name)
        return jobs

    def resettle(self, name: str) -> None:
        """Pools that scale with the queue follow the jobs at once (a RUNNING cluster)."""
        cluster = self.clusters.get(name)
        status = (cluster or {}).get("clusterStatus") or {}
        if cluster is not None and status.get("state") == "RUNNING":
            status["nodesStatus"] = self.nodes_status(cluster, "RUNNING")

    def power_now(self, name: str) -> None:
        """A cluster with a pool that scales, as of now: its VMs booted or suspended since."""
        switches = self.slurm.get(name)
        if switches is not None and switches.power:
            self.resettle(name)

    def switches(self, name: str) -> SlurmSwitches:
        return self.slurm.setdefault(name, SlurmSwitches())

    def set_slurm(self, key: str, spec: dict[str, Any]) -> SlurmSwitches:
        name = self.resolve(key)
        switches = self.switches(name)
        known = {"cluster", "down", "private_jobs", "versions", "release"}
        unknown = set(spec) - known - {"boot_seconds", "suspend_time"}
        if unknown:
            raise rpc.invalid(f"unknown Slurm switches: {', '.join(sorted(unknown))}")
        if "release" in spec:
            if spec["release"] not in RELEASES:
                raise rpc.invalid(f"release must be one of {', '.join(RELEASES)}")
            switches.release, switches.versions = str(spec["release"]), None
        for key in ("boot_seconds", "suspend_time"):
            if key in spec:
                value = spec[key]
                if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                    raise rpc.invalid(f"{key} must be a number of seconds, 0 or more")
                setattr(switches, key, float(value))
        if "down" in spec:
            switches.down = bool(spec["down"])
        if "private_jobs" in spec:
            switches.private_jobs = bool(spec["private_jobs"])
        if "versions" in spec:
            switches.versions = tuple(str(v) for v in spec["versions"])
        return switches

    def set_reservations(self, key: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Set a cluster's reservations: ``{"reservations": [{name, start_time, end_time,
        node_list, flags}]}`` replaces them all (an empty list clears them)."""
        name = self.resolve(key)
        given = spec.get("reservations")
        if not isinstance(given, list):
            raise rpc.invalid("reservations must be a list of {name, start_time, end_time, ...}")
        now = self.wall().timestamp()
        found = [slurm_reservations.read_spec(item, now) for item in given]
        if len({r["name"] for r in found}) != len(found):
            raise rpc.invalid("reservation names must differ")
        self.switches(name).reservations = found
        self.resettle(name)
        return found

    def set_nodes(self, key: str, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Set nodes' Slurm states: ``{"nodes": {NAME: {"state": [...], "reason": "..."}}}``;
        a state may be one word or a list of a base state and flags, and null clears it."""
        name = self.resolve(key)
        nodes = spec.get("nodes")
        if not isinstance(nodes, dict):
            raise rpc.invalid("nodes must map node names to {state, reason}")
        switches = self.switches(name)
        for node, setting in nodes.items():
            if setting is None:
                switches.nodes.pop(str(node), None)
                continue
            state = setting.get("state") if isinstance(setting, dict) else None
            state = [state] if isinstance(state, str) else state
            if not state or not all(isinstance(s, str) for s in state):
                raise rpc.invalid(f"node {node}: state must be a word or a list of words")
            unknown = {s.upper() for s in state} - NODE_STATES
            if unknown:
                raise rpc.invalid(f"node {node}: unknown states {', '.join(sorted(unknown))}")
            reason = str(setting.get("reason") or "")
            switches.nodes[str(node)] = {"state": [s.upper() for s in state], "reason": reason}
        self.resettle(name)
        return switches.nodes
