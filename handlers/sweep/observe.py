"""What a sweep sees of each cluster: the few fields it keeps from a listing (``Swept``), and
one observation of it (``ActivityObserver``): its state, the operations clusterbot follows,
Slurm's jobs and nodes, and from them its demand and its health. The release hook and the
off-hours schedules read Slurm's demand the same way (``slurm_demand``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from handlers.costs import PoolSeen, PriceBook, pools_seen
from handlers.domain.errors import SlurmUnreadableError
from handlers.domain.facts import ClusterFacts
from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.pacing import Spread, paced
from handlers.ports import ActivityReader, Clock, GpuSignal
from handlers.reading.clusters import pools_summary
from handlers.sweep import windows
from handlers.sweep.alert import IdleEntry
from handlers.sweep.demand import WORKING_NODE_STATES
from handlers.sweep.gpus import (
    MISSING_WHY,
    GpuIdleRules,
    GpuUse,
    IdleAllocation,
    idle_allocations,
    idle_nodes,
)
from handlers.sweep.health import (
    STUCK_AFTER,
    ClusterHealth,
    blocked_jobs,
    broken_cost,
    broken_nodes,
    cluster_trouble,
)
from handlers.sweep.rules import (
    EXEMPT_LABEL,
    IdleRecord,
    NodeCensus,
    Observation,
    QueueDemand,
    Verdict,
    node_census,
    queue_demand,
)


@dataclass(frozen=True)
class Swept:
    """What a sweep keeps of a cluster, taken from each list page as it arrives: enough to
    observe, judge and report it (about a kilobyte, where the whole resource is fifteen)."""

    name: str
    target: str
    state: str
    exempt_label: bool
    paying_nodes: int
    nodes: str  # e.g. "cpu: 4 x n2-standard-8"
    cost_hour: float | None
    freed_hour: float | None
    reservations: tuple[str, ...]
    pools: tuple[PoolSeen, ...] = ()  # every pool's nodes and price, for the spend ledger
    labels: tuple[tuple[str, str], ...] = ()
    status_message: str = ""  # the control plane's words for its state, for health
    updated_at: float | None = None  # updateTime: since when a change has been under way
    gpu_nodes: tuple[tuple[str, str, str], ...] = ()  # (instance id, node, pool) of GPU VMs

    @classmethod
    def of(cls, cluster: ClusterFacts, prices: PriceBook) -> Swept:
        compute = list(cluster.compute_pools())
        paying = [p.id for p in compute if cluster.nodes(p)]
        labels = cluster.labels or {}
        pools = pools_seen(cluster, prices)
        return cls(
            name=cluster.name or "",
            target=str(cluster.target),
            state=str(cluster.state),
            exempt_label=labels.get(EXEMPT_LABEL[0]) == EXEMPT_LABEL[1],
            paying_nodes=sum(p.nodes for p in pools if p.compute),
            nodes=pools_summary(cluster, paying) or "no compute nodes",
            cost_hour=prices.pools_hour(cluster, compute),
            freed_hour=prices.freed_hour(cluster, compute),
            reservations=tuple(
                p.reservation_name or p.id for p in compute if p.reserved and cluster.nodes(p)
            ),
            pools=pools,
            labels=tuple(sorted(labels.items())),
            status_message=cluster.status_message,
            updated_at=cluster.updated_at,
            gpu_nodes=cluster.gpu_instances(),
        )


# a cluster asleep by a plan (why, so it is not idle), and when a plan takes it to zero anyway
Note = tuple[str | None, str | None]


@dataclass
class Seen:
    """One cluster's observation and what the policy made of it."""

    cluster: Swept
    observation: Observation
    verdict: Verdict | None = None
    record: IdleRecord | None = None
    entry: IdleEntry | None = field(default=None)
    idle: bool = False  # idle for longer than the policy's threshold (its pools' spend)
    # what a listener noted of the cluster this sweep, under its own name (health: "opened"
    # or "healed" an episode); the report counts them
    marks: dict[str, str] = field(default_factory=dict)


class SweepListener(Protocol):
    """What a sweep hands its clusters to once the idle records are saved (idle alerts,
    health, the spend ledger, label schedules): the Sweeper names none of them, and each
    keeps its own record of a cluster."""

    async def notes(self) -> Mapping[str, Note]:
        """What it says of clusters before the sweep judges them (a schedule: the cluster
        is asleep by it, or when it goes to zero anyway); most say nothing."""
        ...

    async def observed(self, seen: Sequence[Seen]) -> None:
        """Keep this sweep's observations in its own records, alerts or not."""
        ...

    async def swept(self, seen: Sequence[Seen]) -> int:
        """Act on this sweep's clusters when it alerts; the messages posted."""
        ...

    async def gone(self, cluster: str) -> None:
        """A cluster that no longer exists: its messages say so, its record goes."""
        ...


class ActivityObserver:
    """Turns a cluster and what the bot is doing into one observation for the policy."""

    def __init__(
        self,
        reader: ActivityReader,
        clock: Clock,
        concurrency: int,
        idle_after: float,
        *,
        gpus: GpuSignal | None = None,
        gpu_rules: GpuIdleRules | None = None,
    ) -> None:
        self.reader = reader
        self.clock = clock
        self.concurrency = max(1, concurrency)
        self.idle_after = idle_after
        self.spread = Spread(self.concurrency)  # the workers' Slurm queries
        self.gpus = gpus
        self.gpu_rules = gpu_rules or GpuIdleRules()

    async def observe_all(self, clusters: list[Swept], busy: set[str]) -> list[Observation]:
        """Every cluster observed, ``concurrency`` at a time by as many workers: not a task
        per cluster, whose first steps would all run in one turn of the event loop (10,000 of
        them, tens of milliseconds with every ack waiting) and whose frames would all be held
        at once. A worker whose clusters need no Slurm query gives the loop back now and then."""
        found: dict[int, Observation] = {}
        todo = iter(enumerate(clusters))

        async def worker() -> None:
            async for index, cluster in paced(todo):
                found[index] = await self.observe(cluster, busy)

        await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(clusters)))))
        if self.gpus is not None:
            await self.gpus.keep()
        return [found[index] for index in range(len(clusters))]

    async def observe(self, cluster: Swept, busy_clusters: set[str]) -> Observation:
        name = cluster.name
        seen = Observation(
            at=self.clock(),
            state=cluster.state,
            tracked_operation=name in busy_clusters,
            paying_nodes=cluster.paying_nodes,
            exempt_label=cluster.exempt_label,
        )
        if cluster.state != "RUNNING":  # no Slurm to ask: its state is its health
            since = cluster.updated_at
            trouble = cluster_trouble(
                cluster.state,
                cluster.status_message,
                changing_for=None if since is None else seen.at - since,
                followed=seen.tracked_operation,
                stuck_after=STUCK_AFTER,
            )
            # a change under way, or a delete: its Slurm is not read, so its nodes' health
            # is unknown this sweep (an episode stays as it was), not healthy
            return seen if trouble is None else replace(seen, health=ClusterHealth(trouble=trouble))
        if seen.busy_reason() is not None:
            return seen  # a change of clusterbot's runs: no need to ask Slurm
        return await self.ask_slurm(cluster, seen)

    async def ask_slurm(self, cluster: Swept, seen: Observation) -> Observation:
        """Its nodes first; its queue only where the nodes do not already show it busy, or
        where broken nodes need the jobs they hold up: one call for most busy clusters."""
        name = cluster.name
        try:
            nodes = await self.spread.call(self.reader.nodes, name)
            census = node_census(nodes)
            gpu = await self._gpu_use(cluster, nodes) if census.busy else None
            idle_held = bool(gpu and idle_nodes(gpu, self.gpu_rules, self.clock()))
            read_jobs = not census.busy or bool(broken_nodes(nodes)) or idle_held
            jobs = await self.spread.call(self.reader.jobs, name) if read_jobs else None
            wanted = windows.wanted(jobs or (), nodes)
            held = await self.spread.call(self.reader.reservations, name) if wanted else None
        except SlurmUnreadableError as error:
            return replace(seen, running_jobs=None, pending_jobs=None, unknown_reason=error.reason)
        now = self.clock()
        found = idle_allocations(jobs, gpu, self.gpu_rules, now) if gpu and jobs else []
        census = without_allocations(census, nodes, found)
        starts = None if held is None else windows.starts(held)
        live = [j for j in jobs or () if j.job_id not in {a.job_id for a in found}]
        demand = None if jobs is None else queue_demand(live, now, self.idle_after, starts)
        # the queue shows it busy: its nodes are not counted
        counted = None if demand is not None and demand.active else census
        health = health_of(cluster, jobs or [], nodes, now)
        seen = replace(seen, at=now, health=health).with_slurm(demand, counted)
        seen = replace(
            seen,
            idle_allocations=tuple(found),
            node_notes=seen.node_notes + gpu_notes(gpu, cluster, nodes),
        )
        if counted is None or not census.maintenance:
            return seen
        planned = [n for n in nodes if n.name in set(census.maintenance)]
        prices = {p.pool: p.node_hour for p in cluster.pools if p.compute}
        notes = windows.maintenance_notes(planned, held or [], prices, now)
        return replace(seen, node_notes=seen.node_notes + notes)

    async def _gpu_use(self, cluster: Swept, nodes: list[SlurmNode]) -> GpuUse | None:
        """The GPUs of its allocated GPU nodes, in one call; None when it has none, or no
        signal is configured."""
        allocated = {n.name for n in nodes if WORKING_NODE_STATES & n.states}
        instances = {i: n for i, n, _pool in cluster.gpu_nodes if n in allocated}
        if self.gpus is None or not instances or self.gpu_rules.exempt_cluster(cluster.labels):
            return None
        window = self.gpu_rules.window
        return await self.spread.call(
            self.gpus.gpu_use, cluster.name, instances, window, self.clock()
        )


def without_allocations(
    census: NodeCensus, nodes: list[SlurmNode], found: list[IdleAllocation]
) -> NodeCensus:
    """The census with the nodes held by idle allocations no longer counted as working."""
    held = {n for a in found for n in a.nodes}
    freed = sum(1 for n in nodes if n.name in held and WORKING_NODE_STATES & n.states)
    return replace(census, working=census.working - freed) if freed else census


def gpu_notes(
    gpu: GpuUse | None, cluster: Swept, nodes: list[SlurmNode]
) -> tuple[tuple[str, ...], ...]:
    """What the report says when the GPU signal is missing: never read as idle."""
    if gpu is None:
        return ()
    if gpu.problem is not None:
        return ((f"GPU metrics could not be read ({gpu.problem}); its GPUs count as busy",),)
    allocated = {n.name for n in nodes if WORKING_NODE_STATES & n.states}
    missing = gpu.missing(n for _i, n, _pool in cluster.gpu_nodes if n in allocated)
    if not missing:
        return ()
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return ((f"GPU use unknown on {shown}, counted as busy: {MISSING_WHY}",),)


def health_of(
    cluster: Swept, jobs: list[SlurmJob], nodes: list[SlurmNode], now: float
) -> ClusterHealth:
    """Its broken nodes (priced by the pool a partition of the same name runs on, or at the
    dearest), and its jobs held up by them."""
    broken = broken_nodes(nodes)
    prices = {p.pool: p.node_hour for p in cluster.pools if p.compute}
    return ClusterHealth(
        nodes=tuple(broken),
        blocked=tuple(blocked_jobs(jobs, broken, now)),
        broken_hour=broken_cost(broken, prices),
    )


async def slurm_demand(
    reader: ActivityReader, cluster: str, now: float, idle_after: float
) -> tuple[QueueDemand, NodeCensus | None]:
    """Slurm's queue, and its nodes when the queue shows no demand (jobs may be hidden, or
    an epilog may still run, and nodes out of service are named)."""
    jobs = await reader.jobs(cluster)
    held = await reader.reservations(cluster) if windows.wanted(jobs, ()) else None
    demand = queue_demand(jobs, now, idle_after, None if held is None else windows.starts(held))
    if demand.active:
        return demand, None
    return demand, node_census(await reader.nodes(cluster))
