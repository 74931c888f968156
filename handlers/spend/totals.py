"""Sums over the spend ledger: node-hours and dollars per cluster, pool, target or label,
over any period, with the part spent while the cluster was idle."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from handlers.spend.runs import SpendRun

Grouping = Callable[[SpendRun], Iterable[str]]


@dataclass
class Spend:
    cost: float = 0.0  # at list prices
    idle: float = 0.0  # the part spent while the cluster was idle
    node_hours: float = 0.0
    unpriced: float = 0.0  # node-hours of machines the price book does not know

    def add(self, run: SpendRun, since: float, until: float) -> None:
        hours = run.node_hours(since, until)
        cost = run.cost(since, until)
        self.node_hours += hours
        if cost is None:
            self.unpriced += hours
            return
        self.cost += cost
        if run.idle:
            self.idle += cost


def by_cluster(run: SpendRun) -> Iterable[str]:
    return (run.cluster.rsplit("/", 1)[-1],)


def by_pool(run: SpendRun) -> Iterable[str]:
    return (f"{run.cluster.rsplit('/', 1)[-1]} / {run.pool}",)


def by_target(run: SpendRun) -> Iterable[str]:
    return (run.target or "?",)


def by_label(key: str) -> Grouping:
    """Each run under its cluster's value of the label ``key`` (``(none)`` without it), so
    the groups add up to the whole, as Kubecost allocates by a label."""

    def grouping(run: SpendRun) -> Iterable[str]:
        values = dict(run.labels)
        return (f"{key}={values[key]}" if key in values else f"{key} (none)",)

    return grouping


def totals(
    runs: Iterable[SpendRun], since: float, until: float, group: Grouping = by_cluster
) -> dict[str, Spend]:
    """Each group's spend over [since, until), largest first."""
    found: dict[str, Spend] = {}
    for run in runs:
        if run.within(since, until) <= 0:
            continue
        for name in group(run):
            found.setdefault(name, Spend()).add(run, since, until)
    return dict(sorted(found.items(), key=lambda item: (-item[1].cost, item[0])))


def overall(groups: dict[str, Spend]) -> Spend:
    total = Spend()
    for spend in groups.values():
        total.cost += spend.cost
        total.idle += spend.idle
        total.node_hours += spend.node_hours
        total.unpriced += spend.unpriced
    return total
