"""The series clusterbot exposes on ``/metrics``, kept in a ``prometheus_client`` registry of
the service's own (so several services in one process, as in the tests, never mix), and served
by prometheus_client's aiohttp handler."""

from __future__ import annotations

import prometheus_client
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler

from handlers.health.alerts import COUNTED

# A counter's ``_created`` sample would double every series for a value nobody graphs.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0)
SWEEP_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class BotMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.commands = Counter(
            "clusterbot_commands",
            "Slash commands by subcommand and outcome.",
            ["outcome", "subcommand"],
            registry=self.registry,
        )
        self.ack_seconds = Histogram(
            "clusterbot_ack_seconds",
            "Time from receiving a Slack request to answering it.",
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.control_plane = Counter(
            "clusterbot_control_plane_calls",
            "Control-plane calls by method and status.",
            ["method", "status"],
            registry=self.registry,
        )
        self.operations_in_flight = Gauge(
            "clusterbot_operations_in_flight",
            "Operations the bot is tracking.",
            registry=self.registry,
        )
        self.idle_clusters = Gauge(
            "clusterbot_idle_clusters",
            "Clusters idle while paying, at the last sweep.",
            registry=self.registry,
        )
        self.idle_cost = Gauge(
            "clusterbot_idle_cost_per_hour",
            "Estimated USD per hour spent on idle clusters.",
            registry=self.registry,
        )
        self.unhealthy_nodes = Gauge(
            "clusterbot_unhealthy_nodes",
            "Slurm nodes out of service at the last sweep, by cluster and by what is wrong "
            "(down, drained, draining, failing, not responding: Slurm's state, not its "
            "free-text reason, which would make a series per sentence).",
            ["cluster", "reason"],
            registry=self.registry,
        )
        self.health_episodes = Counter(
            "clusterbot_health_episodes",
            "Health episodes (a cluster's broken nodes, state out of RUNNING or queue held "
            "up) opened and healed by this replica's sweeps; change is opened or healed.",
            ["change"],
            registry=self.registry,
        )
        for change in sorted(set(COUNTED.values())):  # each series exists from start, at 0
            self.health_episodes.labels(change=change)
        self.sweeping = Gauge(
            "clusterbot_sweeping",
            "1 while this replica sweeps (on its event loop or in its child process).",
            registry=self.registry,
        )
        self.sweep_seconds = Histogram(
            "clusterbot_sweep_seconds",
            "How long an idle sweep took.",
            buckets=SWEEP_BUCKETS,
            registry=self.registry,
        )
        self.unreadable_targets = Gauge(
            "clusterbot_sweep_unreadable_targets",
            "Targets the last idle sweep could not list (0 when it read them all).",
            registry=self.registry,
        )
        self.target_failures = Counter(
            "clusterbot_sweep_target_failures",
            "Idle sweeps that could not list a target, by target.",
            ["target"],
            registry=self.registry,
        )

        self.loop_lag = Histogram(
            "clusterbot_event_loop_lag_seconds",
            "How late the event loop ran a timer: work that held the loop meanwhile.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.loop_lag_max = Gauge(
            "clusterbot_event_loop_lag_max_seconds",
            "The longest event-loop lag seen since start.",
            registry=self.registry,
        )

        self._lag_max = 0.0
        # one child per (call, outcome), looked up once: the tracker counts a call per poll
        self._calls: dict[tuple[str, str], Counter] = {}

    def lag(self, seconds: float) -> None:
        self.loop_lag.observe(seconds)
        if seconds > self._lag_max:
            self._lag_max = seconds
            self.loop_lag_max.set(seconds)

    def command(self, name: str, outcome: str) -> None:
        self.commands.labels(outcome=outcome, subcommand=name).inc()

    def call(self, method: str, outcome: str) -> None:
        child = self._calls.get((method, outcome))
        if child is None:
            child = self._calls[method, outcome] = self.control_plane.labels(
                method=method, status=outcome
            )
        child.inc()

    def handler(self) -> Handler:
        """The ``GET /metrics`` handler, in the text format Prometheus scrapes."""
        return make_aiohttp_handler(self.registry)
