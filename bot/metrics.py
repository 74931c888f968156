"""A small Prometheus registry: counters, gauges and histograms in the text exposition format."""

from __future__ import annotations

import bisect
from collections.abc import Callable

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.values[key] = self.values.get(key, 0.0) + amount

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        lines += [f"{self.name}{_labels(k)} {v:g}" for k, v in sorted(self.values.items())]
        return lines


class Gauge:
    """A gauge read at scrape time from a callback returning {labels: value}."""

    def __init__(self, name: str, help_text: str, read: Callable[[], dict[Labels, float]]) -> None:
        self.name, self.help, self.read = name, help_text, read

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge"]
        lines += [f"{self.name}{_labels(k)} {v:g}" for k, v in sorted(self.read().items())]
        return lines


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...]) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.buckets):
            self.counts[index] += 1
        self.total += value
        self.count += 1

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, count in zip(self.buckets, self.counts, strict=True):
            running += count
            lines.append(f'{self.name}_bucket{{le="{bound:g}"}} {running}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {self.count}')
        lines.append(f"{self.name}_sum {self.total:g}")
        lines.append(f"{self.name}_count {self.count}")
        return lines


class Registry:
    def __init__(self) -> None:
        self.metrics: list[Counter | Gauge | Histogram] = []

    def counter(self, name: str, help_text: str) -> Counter:
        metric = Counter(name, help_text)
        self.metrics.append(metric)
        return metric

    def gauge(self, name: str, help_text: str, read: Callable[[], dict[Labels, float]]) -> Gauge:
        metric = Gauge(name, help_text, read)
        self.metrics.append(metric)
        return metric

    def histogram(self, name: str, help_text: str, buckets: tuple[float, ...]) -> Histogram:
        metric = Histogram(name, help_text, buckets)
        self.metrics.append(metric)
        return metric

    def render(self) -> str:
        return "\n".join(line for metric in self.metrics for line in metric.render()) + "\n"


class BotMetrics:
    """The series clusterbot exposes."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.commands = self.registry.counter(
            "clusterbot_commands_total", "Slash commands by subcommand and outcome."
        )
        self.ack_seconds = self.registry.histogram(
            "clusterbot_ack_seconds",
            "Time from receiving a Slack request to answering it.",
            (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0),
        )
        self.control_plane = self.registry.counter(
            "clusterbot_control_plane_calls_total", "Control-plane calls by method and status."
        )
        self.operations_in_flight = 0.0
        self.registry.gauge(
            "clusterbot_operations_in_flight",
            "Operations the bot is tracking.",
            lambda: {(): self.operations_in_flight},
        )

        self.idle_clusters = 0.0
        self.idle_cost = 0.0
        self.registry.gauge(
            "clusterbot_idle_clusters",
            "Clusters idle while paying, at the last sweep.",
            lambda: {(): self.idle_clusters},
        )
        self.registry.gauge(
            "clusterbot_idle_cost_per_hour",
            "Estimated USD per hour spent on idle clusters.",
            lambda: {(): self.idle_cost},
        )
        self.sweep_seconds = self.registry.histogram(
            "clusterbot_sweep_seconds",
            "How long an idle sweep took.",
            (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
        )

    def command(self, name: str, outcome: str) -> None:
        self.commands.inc(subcommand=name, outcome=outcome)

    def call(self, method: str, outcome: str) -> None:
        self.control_plane.inc(method=method, status=outcome)
