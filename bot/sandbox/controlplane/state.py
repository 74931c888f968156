"""The simulated control plane's state: clusters, long-running operations and Slurm jobs.

Operations advance lazily: every request first calls ``advance()``, which finishes the
operations whose duration has passed on the injected clock. Nothing runs in the background,
so a test controls time exactly by choosing durations or the clock.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.sandbox.controlplane import page_tokens, rpc, rules, wire
from bot.sandbox.controlplane.faults import Fault, FaultLog
from bot.sandbox.controlplane.gpu_traces import GpuTraces
from bot.sandbox.controlplane.rpc import SimError
from bot.sandbox.controlplane.secret_store import SecretStore
from bot.sandbox.controlplane.slurm_state import SlurmQueue, SlurmSwitches, rfc3339

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
    shown = wire.proto3(cluster)  # a new document: its containers are all built afresh
    if isinstance(shown.get("nodePools"), list):
        shown["nodePools"] = list(reversed(shown["nodePools"]))
    return dict(shown)


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
class SimulatorState(SlurmQueue, FaultLog):
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
    secret_store: SecretStore = field(default_factory=SecretStore)
    gpu: GpuTraces = field(default_factory=GpuTraces)
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    _secret: bytes = field(default_factory=lambda: os.urandom(16))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    # -- fixtures -----------------------------------------------------------------------------

    def load_fixtures(self, document: dict[str, Any]) -> None:
        """Load ``{"projects": {id: number}, "clusters": [...], "jobs": {cluster: {...}},
        "slurm": {cluster: {release, ...}}, "nodes": {cluster: {node: {state, reason}}},
        "reservations": {cluster: [{name, start_time, end_time, node_list, flags}]},
        "secrets": [{project, secret, value}], "metrics": {cluster: {node: trace}}}``."""
        self.project_numbers.update({k: str(v) for k, v in document.get("projects", {}).items()})
        at = self.wall().timestamp()
        for raw in document.get("clusters", []):
            cluster = wire.camelize(raw)
            name = str(cluster.get("name", ""))
            rules.cluster_parts(name)  # a fixture without a full resource name is a mistake
            rules.check_cluster(cluster, creating=True)
            stamp = rfc3339(self.wall())
            cluster.setdefault("createTime", stamp)
            cluster.setdefault("updateTime", stamp)
            cluster.setdefault("startTime", stamp)
            cluster.setdefault("clusterStatus", {"state": "RUNNING"})
            cluster["clusterStatus"]["nodesStatus"] = self.nodes_status(cluster, "RUNNING")
            cluster.setdefault("clusterEvents", [])
            self.clusters[name] = cluster
        for fixture, setter in (
            ("jobs", lambda key, spec: self.set_jobs(key, spec)),
            ("slurm", lambda key, spec: self.set_slurm(key, spec)),
            ("nodes", lambda key, spec: self.set_nodes(key, {"nodes": spec})),
            ("reservations", lambda key, spec: self.set_reservations(key, {"reservations": spec})),
            ("metrics", lambda key, spec: self.gpu.publish(self.resolve(key), {"nodes": spec}, at)),
        ):
            for key, spec in document.get(fixture, {}).items():
                setter(key, spec)
        for secret in document.get("secrets", []):
            self.secret_store.change(secret)

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
        """The cluster as of now: a pool that scales has the VMs of this moment."""
        if name not in self.clusters:
            raise SimError("NOT_FOUND", f"ModelDevelopmentCluster {name} not found.")
        self.power_now(name)
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
                    "nodesStatus": self.nodes_status(restored, "RUNNING"),
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
            "nodesStatus": self.nodes_status(cluster, "RUNNING"),
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
        project, region, _cluster_id = rules.cluster_parts(cluster_name)
        op_id = next(self._ids)
        number = self.project_number(project)
        name = f"projects/{number}/locations/{region}/operations/{op_id}"
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
        cluster = wire.normalize(wire.camelize(body))
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
        request = wire.normalize(wire.camelize(body))
        paths = rules.mask_paths(mask, request)
        if self.running_operation(name):
            raise SimError(
                "ABORTED",
                f"ModelDevelopmentCluster {name} has an operation in progress; "
                "try again after it finishes.",
            )
        proposed = copy.deepcopy(current)
        for path in paths:
            wire.set_path(proposed, path, copy.deepcopy(wire.get_path(request, path)))
        rules.check_immutable_pools(current.get("nodePools", []), proposed.get("nodePools", []))
        rules.check_cluster(proposed, creating=False)
        previous = copy.deepcopy(current)
        # Nodes that stay keep running, new ones are prepared, removed ones are drained.
        before = {
            n["instanceName"]: n
            for n in (current.get("clusterStatus") or {}).get("nodesStatus", [])
        }
        after = self.nodes_status(proposed, "PREPARING")
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

    # -- paging and configuration ---------------------------------------------------------------

    def encode_page_token(self, parent: str, offset: int) -> str:
        return page_tokens.encode(self._secret, parent, offset)

    def decode_page_token(self, parent: str, token: str) -> int:
        return page_tokens.decode(self._secret, parent, token)

    def configure(self, document: dict[str, Any]) -> None:
        durations = document.get("durations", {})
        for key, value in durations.items():
            if key not in ("create", "update", "delete"):
                raise rpc.invalid(f"unknown duration {key!r}: use create, update or delete")
            setattr(self.durations, key, float(value))
        if "page_max" in document:
            self.page_max = max(1, int(document["page_max"]))
        if "list_key" in document:
            if document["list_key"] not in ("modelDevelopmentClusters", "clusters"):
                raise rpc.invalid("list_key must be modelDevelopmentClusters or clusters")
            self.list_key = document["list_key"]

    def config(self) -> dict[str, Any]:
        return {
            "durations": dict(self.durations.__dict__),
            "page_max": self.page_max,
            "list_key": self.list_key,
        }
