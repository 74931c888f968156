"""What the simulator's nodes publish to Cloud Monitoring: a GPU utilisation trace per node,
sampled every 60 s as the Ops Agent samples (https://cloud.google.com/monitoring/api/
metrics_opsagent: "Sampled every 60 seconds"), under one metric type per cluster.

A trace is set as a percentage (held since it was set, and before: the agent ran all along)
or as ``[[SECONDS_AGO, PERCENT], ...]`` (each value from that many seconds before it was set
on; before the oldest, the node published nothing). A node without a trace publishes nothing,
as a VM without the Ops Agent."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.controlplane.rpc import invalid

SAMPLE = 60.0  # seconds between the agent's samples
# the metric types the simulator can publish, with each one's unit (the metrics page)
UNITS = {
    "agent.googleapis.com/gpu/utilization": ("%", 1.0),
    "workload.googleapis.com/gpu.dcgm.utilization": ("1", 0.01),
    "workload.googleapis.com/dcgm.gpu.profiling.sm_utilization": ("1", 0.01),
}
NVML = "agent.googleapis.com/gpu/utilization"


def instance_id(instance: str) -> str:
    """A VM's numeric id (a decimal string, as ``nodesStatus`` and Monitoring give it)."""
    return str(int(hashlib.sha256(instance.encode()).hexdigest()[:15], 16))


@dataclass(frozen=True)
class Trace:
    """A node's utilisation: (from when, percent) steps, oldest first."""

    steps: tuple[tuple[float, float], ...]
    always: bool = False  # a constant: published for as long as anyone asks

    def value_at(self, at: float) -> float | None:
        if self.always:
            return self.steps[0][1]
        found = None
        for since, value in self.steps:
            if since > at:
                break
            found = value
        return found

    def samples(self, start: float, end: float) -> list[tuple[float, float]]:
        """The agent's samples in ``(start, end]``: one every ``SAMPLE`` seconds."""
        found = []
        at = (start // SAMPLE + 1) * SAMPLE
        while at <= end:
            value = self.value_at(at)
            if value is not None:
                found.append((at, value))
            at += SAMPLE
        return found


def read_trace(spec: Any, now: float) -> Trace:
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        return Trace(((now, _percent(spec)),), always=True)
    if not isinstance(spec, list) or not spec:
        raise invalid("a node's metrics are a percentage or [[SECONDS_AGO, PERCENT], ...]")
    steps = []
    for step in spec:
        if not (isinstance(step, list) and len(step) == 2):
            raise invalid("each step of a node's metrics is [SECONDS_AGO, PERCENT]")
        ago, value = step
        if not isinstance(ago, int | float) or ago < 0:
            raise invalid("SECONDS_AGO must be a number of seconds, not negative")
        steps.append((now - float(ago), _percent(value)))
    return Trace(tuple(sorted(steps)))


def _percent(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 100:
        raise invalid("a GPU utilisation is a percentage from 0 to 100")
    return float(value)


@dataclass
class GpuTraces:
    """Every cluster's nodes' traces, and the metric type each cluster publishes under."""

    nodes: dict[str, dict[str, Trace]] = field(default_factory=dict)  # cluster -> node -> trace
    metric: dict[str, str] = field(default_factory=dict)  # cluster -> metric type
    # instance id -> its cluster: a call naming instances reads theirs, not every cluster's
    clusters_of: dict[str, str] = field(default_factory=dict)

    def publish(self, cluster: str, spec: dict[str, Any], now: float) -> dict[str, Any]:
        given = spec.get("nodes")
        if not isinstance(given, dict):
            raise invalid("nodes must map node names to a percentage or [[SECONDS_AGO, PERCENT]]")
        metric = str(spec.get("metric") or self.metric.get(cluster, NVML))
        if metric not in UNITS:
            raise invalid(f"metric must be one of {', '.join(sorted(UNITS))}")
        traces = self.nodes.setdefault(cluster, {})
        for node, trace in given.items():
            if trace is None:
                traces.pop(str(node), None)
            else:
                traces[str(node)] = read_trace(trace, now)
                self.clusters_of[instance_id(str(node))] = cluster
        self.metric[cluster] = metric
        return {"metric": metric, "nodes": sorted(traces)}

    def candidates(self, ids: set[str] | None) -> list[str]:
        """The clusters that may publish for these instances (every one, when none named)."""
        if ids is None:
            return sorted(self.nodes)
        return sorted({self.clusters_of[i] for i in ids if i in self.clusters_of})

    def shown(self) -> dict[str, Any]:
        return {
            c: {"metric": self.metric.get(c, NVML), "nodes": sorted(n)}
            for c, n in self.nodes.items()
        }
