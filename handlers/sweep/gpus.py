"""Allocated but idle: a running job whose every GPU stayed under a threshold for a window,
read from Cloud Monitoring's GPU metrics for the nodes it holds (DESIGN.md's idle definition).

The rules, all of them:

1. *The signal* is one metric per cluster, the first of ``METRICS`` its nodes publish: DCGM's
   activity (the Ops Agent's ``dcgm`` receiver, version 2, then version 1's SM activity),
   else NVML's utilisation, which the Ops Agent collects on every GPU VM
   (https://cloud.google.com/monitoring/api/metrics_opsagent, tables "gpu" and "NVIDIA Data
   Center GPU Manager"). It is read as the highest value in each of ``BUCKETS`` slices of
   the window (ALIGN_MAX), per GPU.
2. *A node is idle* when every one of its GPUs reported in at least ``BUCKETS - 1`` slices
   (the newest may not be visible yet: the Ops Agent samples every 60 s and a point takes up
   to a few minutes to appear), its newest point is recent, and no slice reached the
   threshold. A node with no GPU data, or data that stops, is *unmeasured*: it counts as busy
   and the report says the signal is missing and why it may be. Silence is never idleness.
3. *A job is an idle allocation* when it runs, has run for at least the window, every node it
   holds is idle, and it holds them alone (a node shared with another job cannot tell whose
   GPUs are idle, so it counts as busy). Exempt: the policy's users, accounts and partitions,
   jobs whose time limit is at most ``short_limit_minutes`` (interactive debugging), and
   clusters with a label the policy names (their GPUs are not read at all).
4. *How long*: the window, then every later sweep that finds it idle again, kept by the
   caller; the figure is never longer than the job has run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from handlers.domain.operations import SlurmJob
from handlers.policy import Section
from handlers.slurm.hostlist import expand as expand_hostlist
from handlers.words import duration, plural

# The metric types, best first, and the factor that makes each a percentage: DCGM's are
# ratios (unit "1"), NVML's is a percentage ("%"), per the Ops Agent metrics page.
METRICS: tuple[tuple[str, float], ...] = (
    ("workload.googleapis.com/gpu.dcgm.utilization", 100.0),
    ("workload.googleapis.com/dcgm.gpu.profiling.sm_utilization", 100.0),
    ("agent.googleapis.com/gpu/utilization", 1.0),
)
BUCKETS = 4  # slices of the window, each read as its highest value
MISSING_WHY = (
    "no GPU metrics from its nodes in Cloud Monitoring: the Ops Agent may not run on them, "
    "or not collect GPU metrics (docs/DEPLOY.md, GPU metrics)"
)


class GpuIdleRules(BaseModel):
    """The ``[gpu_idle]`` section of the policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold_percent: float = Field(5.0, ge=0, le=100)
    after_minutes: float = Field(60.0, ge=5, le=7 * 24 * 60)
    short_limit_minutes: float = Field(0.0, ge=0)  # jobs limited to this or less are exempt
    exempt_users: tuple[str, ...] = ()
    exempt_accounts: tuple[str, ...] = ()
    exempt_partitions: tuple[str, ...] = ()
    exempt_labels: tuple[str, ...] = ()  # "key=value" (or "key", any value) of clusters

    def exempt_cluster(self, labels: Iterable[tuple[str, str]]) -> bool:
        """A cluster whose labels the policy exempts: its GPUs are not read."""
        return any(f"{k}={v}" in self.exempt_labels or k in self.exempt_labels for k, v in labels)

    @property
    def window(self) -> float:
        return self.after_minutes * 60

    def exempt(self, job: SlurmJob) -> bool:
        limit = job.time_limit
        short = self.short_limit_minutes > 0 and limit is not None
        return (
            job.user in self.exempt_users
            or job.account in self.exempt_accounts
            or job.partition in self.exempt_partitions
            or (short and limit is not None and limit <= self.short_limit_minutes)
        )


GPU_IDLE: Section[GpuIdleRules] = Section("gpu_idle", TypeAdapter(GpuIdleRules), GpuIdleRules)


@dataclass(frozen=True)
class NodeGpus:
    """One node's GPUs over the window: each GPU's highest value per slice, newest first."""

    slices: Mapping[str, tuple[float, ...]]  # GPU number -> percentages
    newest: float  # epoch seconds of its newest point

    @property
    def peak(self) -> float:
        return max((max(values) for values in self.slices.values() if values), default=0.0)

    def idle(self, rules: GpuIdleRules, now: float) -> bool:
        recent = now - self.newest <= 2 * rules.window / BUCKETS + 300
        whole = bool(self.slices) and all(len(v) >= BUCKETS - 1 for v in self.slices.values())
        return recent and whole and self.peak < rules.threshold_percent


@dataclass(frozen=True)
class GpuUse:
    """What Cloud Monitoring said of a cluster's GPU nodes: the metric read, each node it has
    data for, and why there is none (a node absent from ``nodes`` is unmeasured)."""

    metric: str | None
    nodes: Mapping[str, NodeGpus] = field(default_factory=dict)
    problem: str | None = None  # the signal could not be read at all: the call's failure

    def missing(self, wanted: Iterable[str]) -> list[str]:
        return sorted(n for n in wanted if n not in self.nodes)


@dataclass(frozen=True)
class IdleAllocation:
    """A running job holding GPUs that do nothing (``sweep --once --json``'s
    ``idle_allocations``)."""

    job_id: int
    user: str
    account: str
    partition: str
    nodes: tuple[str, ...]
    gpus: int
    utilization: float  # the highest percentage any of its GPUs reached in the window
    idle_for_s: float
    ran_s: float = 0.0  # how long it has run: the most it can have been idle

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "nodes": list(self.nodes),
            "gpus": self.gpus,
            "utilization": round(self.utilization, 2),
            "idle_for_s": round(self.idle_for_s),
        }

    def words(self) -> tuple[str, ...]:
        """The report's note: whose job, what it holds, how long under the threshold."""
        return (
            f"Job {self.job_id} of {self.user or 'an unknown user'} holds "
            f"{plural(self.gpus, 'GPU')} on {plural(len(self.nodes), 'node')} used at most "
            f"{self.utilization:.0f}% for {duration(self.idle_for_s)}: an allocation left open",
        )


def idle_nodes(use: GpuUse, rules: GpuIdleRules, now: float) -> set[str]:
    return {name for name, gpus in use.nodes.items() if gpus.idle(rules, now)}


def idle_allocations(
    jobs: Sequence[SlurmJob], use: GpuUse, rules: GpuIdleRules, now: float
) -> list[IdleAllocation]:
    """The running jobs whose every node's GPUs stayed idle for the window (rule 3), each
    idle for the window so far (``lengthened`` adds what earlier sweeps found)."""
    idle = idle_nodes(use, rules, now)
    running = [(j, tuple(expand_hostlist(j.nodes))) for j in jobs if "RUNNING" in j.states]
    holders = Counter(node for _job, held in running for node in held)
    found = []
    for job, held in running:
        if not held or any(n not in idle or holders[n] > 1 for n in held) or rules.exempt(job):
            continue
        ran = None if job.started is None else now - job.started
        if ran is None or ran < rules.window:
            continue
        gpus = sum(len(use.nodes[n].slices) for n in held)
        found.append(
            IdleAllocation(
                job_id=job.job_id,
                user=job.user,
                account=job.account,
                partition=job.partition,
                nodes=held,
                gpus=gpus,
                utilization=max(use.nodes[n].peak for n in held),
                idle_for_s=rules.window,
                ran_s=ran,
            )
        )
    return found


def lengthened(
    found: Sequence[IdleAllocation], first: Mapping[int, float], now: float, window: float
) -> tuple[tuple[IdleAllocation, ...], dict[int, float]]:
    """Rule 4: each allocation idle since it was first found, less the window it had been
    idle by then, never longer than it has run; and when each was first found, to keep."""
    since = {a.job_id: first.get(a.job_id, now) for a in found}
    grown = tuple(
        replace(a, idle_for_s=min(a.ran_s, now - since[a.job_id] + window)) for a in found
    )
    return grown, since
