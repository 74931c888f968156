"""The simulated control plane's state: clusters, long-running operations and Slurm jobs.

Operations advance lazily: every request first calls ``advance()``, which finishes the
operations whose duration has passed on the injected clock. Nothing runs in the background,
so a test controls time exactly by choosing durations or the clock.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.sandbox.controlplane import rules
from bot.sandbox.controlplane.rules import SimError
from bot.vertex.models import ClusterName

SLURM_VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")  # Slurm 24.05's data parsers


@dataclass
class SlurmSwitches:
    """How one cluster's Slurm behaves behind the proxy (set through ``/_sim/slurm``)."""

    down: bool = False  # the controller cannot be reached: the proxy answers UNAVAILABLE
    private_jobs: bool = False  # PrivateData=jobs: other users' jobs are hidden
    versions: tuple[str, ...] = SLURM_VERSIONS


METADATA_TYPE = (
    "type.googleapis.com/google.cloud.aiplatform.v1beta1.{}ModelDevelopmentClusterOperationMetadata"
)
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"
CLUSTER_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1beta1.ModelDevelopmentCluster"
DEMO_FIXTURES = Path(__file__).with_name("demo_clusters.json")
PHASES = {
    "Create": ("creating network resources", "provisioning nodes", "starting Slurm"),
    "Update": ("validating the change", "reconfiguring node pools", "syncing Slurm"),
    "Delete": ("draining nodes", "deleting nodes", "removing cluster resources"),
}


def present(cluster: dict[str, Any]) -> dict[str, Any]:
    """A cluster as the API answers it: proto3 JSON, which leaves zero and empty values out
    (view-clusters; proto3 JSON mapping), with its node pools in another order than they were
    sent (the provider re-sorts them, as clients must: match pools by id)."""
    shown = rules.proto3(copy.deepcopy(cluster))
    if isinstance(shown.get("nodePools"), list):
        shown["nodePools"] = list(reversed(shown["nodePools"]))
    return dict(shown)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Durations:
    """How long each kind of operation takes, in seconds of the simulator's clock."""

    create: float = 60.0
    update: float = 20.0
    delete: float = 30.0


@dataclass
class SimOperation:
    name: str
    verb: str  # Create, Update or Delete
    cluster: str
    started: float
    duration: float
    create_time: str
    previous: dict[str, Any] | None
    fail_with: dict[str, Any] | None = None
    done: bool = False
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    update_time: str | None = None

    def to_api(self, now: float) -> dict[str, Any]:
        fraction = 1.0 if self.done else min(0.99, (now - self.started) / max(self.duration, 1e-9))
        phases = PHASES[self.verb]
        phase = phases[min(len(phases) - 1, int(fraction * len(phases)))]
        message = "done" if self.done else f"{phase} ({int(fraction * 100)}%)"
        if self.error:
            message = "failed"
        document: dict[str, Any] = {
            "name": self.name,
            "metadata": {
                "@type": METADATA_TYPE.format(self.verb),
                "genericMetadata": {
                    "createTime": self.create_time,
                    "updateTime": self.update_time or self.create_time,
                },
                "progressMessage": message,
            },
        }
        if self.done:  # absent, not false, while running
            document["done"] = True
            if self.error:
                document["error"] = self.error
            elif self.response is not None and self.response.get("@type") == CLUSTER_TYPE:
                document["response"] = present(self.response)
            else:
                document["response"] = self.response
        return document


@dataclass
class Fault:
    """An injected failure or delay for requests matching a method and a path pattern."""

    id: int
    method: str | None = None
    path: str | None = None
    status: int | None = None
    message: str | None = None
    rate: float | None = None
    count: int | None = None
    latency_ms: float = 0.0
    retry_after: int | None = None
    when: str = "before"
    operation_error: dict[str, Any] | None = None
    skip: int = 0  # let this many matching requests through first
    drop: bool = False  # close the connection with no reply (after: once the change is made)
    fired: int = 0
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        return not (self.path and not re.search(self.path, path))

    def to_api(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class SimulatorState:
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    durations: Durations = field(default_factory=Durations)
    page_max: int = 100
    list_key: str = "modelDevelopmentClusters"
    required_token: str | None = None
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    operations: dict[str, SimOperation] = field(default_factory=dict)
    jobs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    slurm: dict[str, SlurmSwitches] = field(default_factory=dict)
    project_numbers: dict[str, str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    _secret: bytes = field(default_factory=lambda: os.urandom(16))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    # -- fixtures -----------------------------------------------------------------------------

    def load_fixtures(self, document: dict[str, Any]) -> None:
        """Load ``{"projects": {id: number}, "clusters": [...], "jobs": {cluster: {...}}}``."""
        self.project_numbers.update({k: str(v) for k, v in document.get("projects", {}).items()})
        for raw in document.get("clusters", []):
            cluster = rules.camelize(raw)
            name = str(cluster.get("name", ""))
            ClusterName.parse(name)  # a fixture without a full resource name is a mistake
            rules.check_cluster(cluster, creating=True)
            now = rfc3339(self.wall())
            cluster.setdefault("createTime", now)
            cluster.setdefault("updateTime", now)
            cluster.setdefault("startTime", now)
            cluster.setdefault("clusterStatus", {"state": "RUNNING"})
            cluster["clusterStatus"]["nodesStatus"] = self._nodes(cluster, "RUNNING")
            cluster.setdefault("clusterEvents", [])
            self.clusters[name] = cluster
        for key, spec in document.get("jobs", {}).items():
            self.set_jobs(key, spec)
        for key, spec in document.get("slurm", {}).items():
            self.set_slurm(key, spec)

    def load_fixture_file(self, path: Path = DEMO_FIXTURES) -> None:
        self.load_fixtures(json.loads(path.read_text()))

    # -- lookups ------------------------------------------------------------------------------

    def project_number(self, project: str) -> str:
        if project.isdigit():
            return project
        if project not in self.project_numbers:
            digest = hashlib.sha256(project.encode()).hexdigest()
            self.project_numbers[project] = str(int(digest[:12], 16) % 10**12).rjust(12, "1")
        return self.project_numbers[project]

    def cluster(self, name: str) -> dict[str, Any]:
        if name not in self.clusters:
            raise SimError("NOT_FOUND", f"ModelDevelopmentCluster {name} not found.")
        return self.clusters[name]

    def resolve(self, key: str) -> str:
        """A cluster's full name from its full name or a unique short id (for /_sim calls)."""
        if key in self.clusters:
            return key
        found = [n for n in self.clusters if n.rsplit("/", 1)[-1] == key]
        if len(found) != 1:
            raise SimError("NOT_FOUND", f"no single cluster is called {key!r}")
        return found[0]

    def running_operation(self, cluster: str) -> SimOperation | None:
        return next(
            (o for o in self.operations.values() if o.cluster == cluster and not o.done), None
        )

    # -- time -----------------------------------------------------------------------------------

    def advance(self) -> None:
        now = self.clock()
        for operation in list(self.operations.values()):
            if not operation.done and now >= operation.started + operation.duration:
                self._finish(operation)

    def _finish(self, operation: SimOperation) -> None:
        operation.done = True
        # It ended when its time was up, not when someone next asked: its updateTime says so.
        late = max(0.0, self.clock() - (operation.started + operation.duration))
        operation.update_time = rfc3339(self.wall() - timedelta(seconds=late))
        cluster = self.clusters.get(operation.cluster)
        if operation.fail_with is not None:
            operation.error = operation.fail_with
            if operation.verb == "Create":
                if cluster is not None:
                    cluster["clusterStatus"] = {
                        "state": "ERROR",
                        "detail": operation.error["message"],
                    }
                return
            restored = operation.previous or cluster
            if restored is not None:
                restored = copy.deepcopy(restored)
                restored["clusterStatus"] = {
                    "state": "RUNNING",
                    "nodesStatus": self._nodes(restored, "RUNNING"),
                }
                self._event(restored, "OPERATION_FAILED", operation.error["message"])
                self.clusters[operation.cluster] = restored
            return
        if operation.verb == "Delete":
            self.clusters.pop(operation.cluster, None)
            self.jobs.pop(operation.cluster, None)
            operation.response = {"@type": EMPTY_TYPE}
            return
        if cluster is None:
            return
        cluster["clusterStatus"] = {
            "state": "RUNNING",
            "nodesStatus": self._nodes(cluster, "RUNNING"),
        }
        cluster["updateTime"] = operation.update_time
        operation.response = {"@type": CLUSTER_TYPE, **copy.deepcopy(cluster)}

    # -- operations -----------------------------------------------------------------------------

    def start_operation(
        self,
        verb: str,
        cluster_name: str,
        previous: dict[str, Any] | None,
        fail_with: dict[str, Any] | None,
    ) -> SimOperation:
        parsed = ClusterName.parse(cluster_name)
        op_id = next(self._ids)
        number = self.project_number(parsed.project)
        name = f"projects/{number}/locations/{parsed.region}/operations/{op_id}"
        duration = getattr(self.durations, verb.lower())
        operation = SimOperation(
            name=name,
            verb=verb,
            cluster=cluster_name,
            started=self.clock(),
            duration=duration,
            create_time=rfc3339(self.wall()),
            previous=previous,
            fail_with=fail_with,
        )
        self.operations[name] = operation
        if duration <= 0:
            self._finish(operation)
        return operation

    def operation(self, project: str, region: str, op_id: str) -> SimOperation:
        name = f"projects/{self.project_number(project)}/locations/{region}/operations/{op_id}"
        if name not in self.operations:
            raise SimError("NOT_FOUND", f"Operation {name} not found.")
        return self.operations[name]

    def demand(self, cluster: dict[str, Any], pool_id: str) -> int:
        """Nodes the Slurm queue asks of a pool: the jobs, running or pending, of the
        partitions that include it (a job without a partition goes to the default one)."""
        name = str(cluster.get("name", ""))
        slurm = rules.slurm_spec(cluster)
        partitions = slurm.get("partitions") or []
        default = slurm.get("defaultPartitionId") or (partitions[0]["id"] if partitions else "")
        pools_of = {p["id"]: p.get("nodePoolIds") or [] for p in partitions}
        wanted = 0
        for job in self.jobs.get(name, []):
            if pool_id in pools_of.get(job.get("partition") or default, []):
                wanted += int(job.get("node_count", 1))
        return wanted

    def pool_size(self, cluster: dict[str, Any], pool: dict[str, Any]) -> int:
        """Nodes a pool has: its minimum, and for a pool that scales with the queue (Flex
        Start docs: "Dynamic nodes ... scale up only when needed") up to its maximum as jobs
        ask for them."""
        scaling = pool.get("scalingSpec") or {}
        low, high = int(scaling.get("minNodeCount", 0)), int(scaling.get("maxNodeCount", 0))
        if low >= high:
            return low
        return max(low, min(high, self.demand(cluster, str(pool["id"]))))

    def _nodes(self, cluster: dict[str, Any], state: str) -> list[dict[str, Any]]:
        cluster_id = str(cluster.get("name", "")).rsplit("/", 1)[-1]
        login = rules.slurm_spec(cluster).get("loginNodePoolId")
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
                        "instanceId": str(
                            int(hashlib.sha256(instance.encode()).hexdigest()[:15], 16)
                        ),
                        "instanceName": instance,
                        "createTime": now,
                        "lastUpdateTime": now,
                    }
                )
        return nodes

    def _event(self, cluster: dict[str, Any], event_type: str, message: str) -> None:
        events = cluster.setdefault("clusterEvents", [])
        events.insert(
            0, {"eventType": event_type, "eventMessage": message, "eventTime": rfc3339(self.wall())}
        )
        del events[100:]

    # -- the API's verbs ------------------------------------------------------------------------

    def create(
        self,
        parent: str,
        cluster_id: str | None,
        body: dict[str, Any],
        fail_with: dict[str, Any] | None,
    ) -> SimOperation:
        cluster_id = rules.check_cluster_id(cluster_id)
        name = f"{parent}/modelDevelopmentClusters/{cluster_id}"
        if name in self.clusters:
            raise SimError("ALREADY_EXISTS", f"ModelDevelopmentCluster {name} already exists.")
        cluster = rules.normalize(rules.camelize(body))
        for output in ("createTime", "updateTime", "startTime", "clusterStatus", "clusterEvents"):
            cluster.pop(output, None)
        rules.check_cluster(cluster, creating=True)
        now = rfc3339(self.wall())
        cluster.update(
            name=name,
            createTime=now,
            updateTime=now,
            clusterStatus={"state": "PROVISIONING", "detail": "Creating the cluster"},
            clusterEvents=[],
        )
        self.clusters[name] = cluster
        return self.start_operation("Create", name, None, fail_with)

    def update(
        self, name: str, mask: str, body: dict[str, Any], fail_with: dict[str, Any] | None
    ) -> SimOperation:
        current = self.cluster(name)
        request = rules.normalize(rules.camelize(body))
        paths = rules.mask_paths(mask, request)
        if self.running_operation(name):
            raise SimError(
                "ABORTED",
                f"ModelDevelopmentCluster {name} has an operation in progress; "
                "try again after it finishes.",
            )
        proposed = copy.deepcopy(current)
        for path in paths:
            rules.set_path(proposed, path, copy.deepcopy(rules.get_path(request, path)))
        rules.check_immutable_pools(current.get("nodePools", []), proposed.get("nodePools", []))
        rules.check_cluster(proposed, creating=False)
        previous = copy.deepcopy(current)
        # Nodes that stay keep running, new ones are prepared, removed ones are drained.
        before = {
            n["instanceName"]: n
            for n in (current.get("clusterStatus") or {}).get("nodesStatus", [])
        }
        after = self._nodes(proposed, "PREPARING")
        for node in after:
            if node["instanceName"] in before:
                node.update(before[node["instanceName"]])
        kept = {n["instanceName"] for n in after}
        after += [{**n, "nodeState": "UPDATING"} for k, n in before.items() if k not in kept]
        status = dict(proposed.get("clusterStatus") or {})
        status.update(state="UPDATING", nodesStatus=after)
        proposed["clusterStatus"] = status
        self.clusters[name] = proposed
        return self.start_operation("Update", name, previous, fail_with)

    def delete(self, name: str, fail_with: dict[str, Any] | None) -> SimOperation:
        cluster = self.cluster(name)
        if self.running_operation(name):
            raise SimError(
                "ABORTED",
                f"ModelDevelopmentCluster {name} has an operation in progress; "
                "try again after it finishes.",
            )
        previous = copy.deepcopy(cluster)
        cluster["clusterStatus"] = {**(cluster.get("clusterStatus") or {}), "state": "STOPPING"}
        return self.start_operation("Delete", name, previous, fail_with)

    # -- Slurm ----------------------------------------------------------------------------------

    def set_jobs(self, key: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
        name = self.resolve(key)
        if "jobs" in spec:
            jobs = [dict(job) for job in spec["jobs"]]
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
            status["nodesStatus"] = self._nodes(cluster, "RUNNING")

    def switches(self, name: str) -> SlurmSwitches:
        return self.slurm.setdefault(name, SlurmSwitches())

    def set_slurm(self, key: str, spec: dict[str, Any]) -> SlurmSwitches:
        name = self.resolve(key)
        switches = self.switches(name)
        unknown = set(spec) - {"cluster", "down", "private_jobs", "versions"}
        if unknown:
            raise rules.invalid(f"unknown Slurm switches: {', '.join(sorted(unknown))}")
        if "down" in spec:
            switches.down = bool(spec["down"])
        if "private_jobs" in spec:
            switches.private_jobs = bool(spec["private_jobs"])
        if "versions" in spec:
            switches.versions = tuple(str(v) for v in spec["versions"])
        return switches

    # -- faults and the request log -------------------------------------------------------------

    def add_fault(self, spec: dict[str, Any]) -> Fault:
        allowed = set(Fault.__dataclass_fields__) - {"id", "fired", "seen"}
        unknown = set(spec) - allowed
        if unknown:
            raise rules.invalid(f"unknown fault fields: {', '.join(sorted(unknown))}")
        when = spec.get("when", "before")
        if when not in ("before", "after"):
            raise rules.invalid("when must be 'before' or 'after'")
        status = spec.get("status")
        if when == "after" and status is not None and status not in rules.LOST_REPLY_STATUSES:
            # A refusal (400, 403, 404, 409...) means the change was not made; only a reply
            # that can be lost on the way (429, any 5xx) may follow an applied change.
            statuses = ", ".join(map(str, sorted(rules.LOST_REPLY_STATUSES)))
            raise rules.invalid(f"a status after the change must be one of {statuses}")
        fault = Fault(id=next(self._ids), **spec)
        self.faults.append(fault)
        return fault

    def pick_fault(self, method: str, path: str, chance: float) -> Fault | None:
        """The first matching fault that fires for this request, counting it as used."""
        for fault in self.faults:
            if not fault.matches(method, path):
                continue
            fault.seen += 1
            if fault.seen <= fault.skip:
                continue
            if fault.count is not None and fault.fired >= fault.count:
                continue
            if fault.rate is not None and chance >= fault.rate:
                continue
            fault.fired += 1
            return fault
        return None

    # -- paging and configuration ---------------------------------------------------------------

    def encode_page_token(self, parent: str, offset: int) -> str:
        payload = json.dumps({"p": parent, "o": offset}, separators=(",", ":")).encode()
        check = hashlib.sha256(payload + self._secret).hexdigest()[:16]
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + check

    def decode_page_token(self, parent: str, token: str) -> int:
        if not token:
            return 0
        try:
            encoded, check = token.rsplit(".", 1)
            payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            if hashlib.sha256(payload + self._secret).hexdigest()[:16] != check:
                raise ValueError("checksum")
            document = json.loads(payload)
            if document["p"] != parent:
                raise ValueError("parent")
            return int(document["o"])
        except (ValueError, KeyError, TypeError):
            raise rules.invalid(
                "Invalid page_token: it does not come from a previous list call."
            ) from None

    def configure(self, document: dict[str, Any]) -> None:
        durations = document.get("durations", {})
        for key, value in durations.items():
            if key not in ("create", "update", "delete"):
                raise rules.invalid(f"unknown duration {key!r}: use create, update or delete")
            setattr(self.durations, key, float(value))
        if "page_max" in document:
            self.page_max = max(1, int(document["page_max"]))
        if "list_key" in document:
            if document["list_key"] not in ("modelDevelopmentClusters", "clusters"):
                raise rules.invalid("list_key must be modelDevelopmentClusters or clusters")
            self.list_key = document["list_key"]

    def config(self) -> dict[str, Any]:
        return {
            "durations": dict(self.durations.__dict__),
            "page_max": self.page_max,
            "list_key": self.list_key,
        }
