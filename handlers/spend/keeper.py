"""The spend ledger's part in a sweep: each pool's run of spend carried on in the spend
ledger's own record of the cluster, and the runs an observation closed written to the ledger
before the records (a crash between the two writes the same runs again at the next sweep,
each the same row with its latest end)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from handlers.costs import PoolSeen
from handlers.domain.names import target_of
from handlers.keeping import Kept, save_all
from handlers.ports import Clock, CrashPoint, no_crash
from handlers.spend.ports import SpendStore
from handlers.spend.runs import SpendRecord, SpendRun, advance, closing, still_open

if TYPE_CHECKING:
    from handlers.sweep.observe import Note, Seen


def held_idle(item: Seen) -> tuple[PoolSeen, ...]:
    """The cluster's pools, each with its nodes that idle allocations hold: their spend is
    idle spend while the cluster is busy otherwise."""
    held = {n for a in item.observation.idle_allocations for n in a.nodes}
    if not held:
        return item.cluster.pools
    pool_of = {node: pool for _id, node, pool in item.cluster.gpu_nodes}
    counts = Counter(pool_of[n] for n in held if n in pool_of)
    return tuple(replace(p, held_idle=counts[p.pool]) for p in item.cluster.pools)


class SpendKeeper:
    """Keeps each cluster's open runs, and the ledger the closed ones go to."""

    def __init__(
        self,
        *,
        records: Kept[SpendRecord],
        store: SpendStore,
        clock: Clock,
        interval: float,
        crash: CrashPoint = no_crash,
    ) -> None:
        self.records = records
        self.store = store
        self.clock = clock
        self.interval = interval  # the sweep's: how long an observation holds
        self.crash = crash

    async def notes(self) -> Mapping[str, Note]:
        return {}  # nothing to say before a sweep judges its clusters

    async def observed(self, seen: Sequence[Seen]) -> None:
        """Each cluster's runs advanced by what the sweep saw: a run whose pool's nodes,
        price or idleness changed is closed into the ledger, the others held open."""
        items = {item.cluster.name: item for item in seen}
        closed: dict[str, list[SpendRun]] = {}

        def advanced(name: str, record: SpendRecord) -> SpendRecord:
            cluster = items[name].cluster
            runs, ended = advance(
                record.runs,
                items[name].observation.at,
                held_idle(items[name]),
                idle=items[name].idle,
                interval=self.interval,
            )
            closed[name] = closing(name, cluster.target, dict(cluster.labels), ended)
            return SpendRecord(name, runs, cluster.labels)

        async def first(names: Sequence[str]) -> None:
            runs = [run for name in names for run in closed.get(name, ())]
            if runs:
                await self.store.record_spend(runs)
            self.crash("after-spend")

        await save_all(self.records, list(items), advanced, self.clock, first)

    async def swept(self, seen: Sequence[Seen]) -> int:
        return 0

    async def gone(self, cluster: str) -> None:
        """A deleted cluster's runs end where it went."""
        record, _ = await self.records.get(cluster)
        if record.runs:
            labels = dict(record.labels)
            ended = still_open(
                cluster, target_of(cluster), labels, record.runs, self.clock(), self.interval
            )
            await self.store.record_spend(ended)
        await self.records.delete(cluster)

    async def open_runs(self, until: float) -> list[SpendRun]:
        """The runs still open, as rows held until ``until`` at the latest."""
        opened: list[SpendRun] = []
        for cluster, record in await self.records.all():
            labels = dict(record.labels)
            opened += still_open(
                cluster, target_of(cluster), labels, record.runs, until, self.interval
            )
        return opened
