"""What the bot has seen each pool cost, as runs of time at one node count and price.

Every sweep observes each cluster's pools: the nodes that exist (``clusterStatus.nodesStatus``,
the nodes a bill counts) and the list price of one node-hour. An observation's pool holds
until the next one; while nothing changes, the pool's run stays open in the spend ledger's
record of the cluster, and only a change (a count, a price, idle or not) closes it into the
ledger: a sweep of thousands of unchanged clusters writes no row. A gap longer than
``MAX_GAP`` sweeps (the bot was down, the target could not be listed) is not counted: the run
ends one interval after the last observation, and the next observation starts a new one.

These are estimates at list prices, from what the bot observed, not a bill.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from handlers.costs import PoolSeen
from handlers.keeping import RecordKind

HOUR = 3600.0
DAY = 24 * HOUR
MAX_GAP = 3  # sweep intervals an observation may be apart and still be one run


@dataclass(frozen=True)
class OpenRun:
    """A pool's run while it lasts, kept in the cluster's spend record."""

    pool: str
    start: float
    nodes: int
    node_hour: float | None
    idle: bool
    seen: float  # the last observation that found it unchanged

    def same(self, nodes: int, node_hour: float | None) -> bool:
        return (self.nodes, self.node_hour) == (nodes, node_hour)

    def ends(self, now: float, interval: float) -> float:
        """When the run ended, if it ended by ``now``: an observation holds until the next,
        but never across a gap of more than ``MAX_GAP`` intervals (one interval is counted)."""
        return now if now - self.seen <= MAX_GAP * interval else self.seen + interval

    def to_list(self) -> list[object]:
        return [self.pool, self.start, self.nodes, self.node_hour, self.idle, self.seen]

    @classmethod
    def from_list(cls, item: Sequence[object]) -> OpenRun:
        pool, start, nodes, price, idle, seen = item
        return cls(
            str(pool),
            float(start),  # type: ignore[arg-type]
            int(nodes),  # type: ignore[call-overload]
            None if price is None else float(price),  # type: ignore[arg-type]
            bool(idle),
            float(seen),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class SpendRecord:
    """The spend ledger's record of a cluster: each pool's run since it last changed, and
    the cluster's labels when last seen (a run is counted under them when it ends)."""

    cluster: str
    runs: tuple[OpenRun, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


def _dump(record: SpendRecord) -> Mapping[str, Any]:
    return {"runs": [run.to_list() for run in record.runs], "labels": record.labels}


def _load(cluster: str, document: Mapping[str, Any]) -> SpendRecord:
    runs = tuple(OpenRun.from_list(r) for r in document.get("runs", []))
    labels = tuple((str(k), str(v)) for k, v in document.get("labels", []))
    return SpendRecord(cluster, runs, labels)


SPEND_RECORD = RecordKind("spend", SpendRecord, _dump, _load)


@dataclass(frozen=True)
class SpendRun:
    """A closed run: ``nodes`` of one pool from ``start`` to ``end``."""

    cluster: str
    pool: str
    start: float
    end: float
    nodes: int
    node_hour: float | None
    idle: bool
    target: str = ""
    labels: tuple[tuple[str, str], ...] = ()

    def within(self, since: float, until: float) -> float:
        """Seconds of the run inside [since, until)."""
        return max(0.0, min(self.end, until) - max(self.start, since))

    def node_hours(self, since: float, until: float) -> float:
        return self.nodes * self.within(since, until) / HOUR

    def cost(self, since: float, until: float) -> float | None:
        if self.nodes == 0:
            return 0.0
        if self.node_hour is None:
            return None
        return self.node_hours(since, until) * self.node_hour


def cut_at_midnight(start: float, end: float) -> list[tuple[float, float]]:
    """[start, end) cut at each UTC midnight it crosses (one piece when it crosses none)."""
    pieces: list[tuple[float, float]] = []
    while end > (midnight := start - start % DAY + DAY):
        pieces.append((start, midnight))
        start = midnight
    return [*pieces, (start, end)]


def by_day(run: SpendRun) -> list[SpendRun]:
    """The run cut at each UTC midnight it crosses, as the ledger keeps it: a row a day at
    most, so that a day's rows are a range of starts and a period's edges read only theirs."""
    return [replace(run, start=s, end=e) for s, e in cut_at_midnight(run.start, run.end)]


Ended = tuple[OpenRun, float]  # a run, and when it ended


def advance(
    runs: Sequence[OpenRun],
    now: float,
    pools: Iterable[PoolSeen],
    *,
    idle: bool,
    interval: float,
) -> tuple[tuple[OpenRun, ...], list[Ended]]:
    """The open runs after an observation at ``now``, and the runs it ended, each with the
    time it ended: a run whose pool changed, a run across too long a gap, a pool gone. A pool
    of a busy cluster whose nodes idle allocations hold runs in two parts, those nodes idle."""
    by_part = {(run.pool, run.idle): run for run in runs}
    closed: list[Ended] = []
    kept: list[OpenRun] = []
    for seen in pools:
        quiet = idle and seen.compute
        held = 0 if quiet or not seen.compute else min(seen.held_idle, seen.nodes)
        parts = [(quiet, seen.nodes - held)] + ([(True, held)] if held else [])
        for part_idle, nodes in parts:
            run = by_part.pop((seen.pool, part_idle), None)
            if run is not None:
                end = run.ends(now, interval)
                if end == now and run.same(nodes, seen.node_hour):
                    kept.append(replace(run, seen=now))
                    continue
                closed.append((run, end))
            kept.append(OpenRun(seen.pool, now, nodes, seen.node_hour, part_idle, now))
    closed += [(run, run.ends(now, interval)) for run in by_part.values()]  # parts gone
    return tuple(kept), closed


def closing(
    cluster: str,
    target: str,
    labels: dict[str, str] | None,
    ended: Iterable[Ended],
) -> list[SpendRun]:
    """The ledger's rows for runs that ended."""
    tags = tuple(sorted((labels or {}).items()))
    rows = []
    for run, end in ended:
        if end <= run.start:
            continue
        rows.append(
            SpendRun(
                cluster,
                run.pool,
                run.start,
                end,
                run.nodes,
                run.node_hour,
                run.idle,
                target,
                tags,
            )
        )
    return rows


def still_open(
    cluster: str,
    target: str,
    labels: dict[str, str] | None,
    runs: Iterable[OpenRun],
    now: float,
    interval: float,
) -> list[SpendRun]:
    """The open runs as rows, each held from its last observation until the next sweep is
    due (or now, if sooner): what a report adds to the ledger since their start."""
    ended = ((run, min(run.seen + interval, now)) for run in runs)
    return closing(cluster, target, labels, ended)
