"""Sums over the spend ledger: node-hours and dollars per cluster, pool, target or label,
over any period, with the part spent while the cluster was idle and what was saved."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from handlers.domain.names import target_of
from handlers.spend.runs import DAY, SpendRun
from handlers.spend.savings import SavedSum, Saving


class Placed(Protocol):
    """Where a run of spend or a saving belongs: a pool of a cluster in a target."""

    @property
    def cluster(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...


@dataclass(frozen=True)
class Grouping:
    """How a report groups the ledger: each run's group names, and the ledger's columns
    they are made of (the database sums by those)."""

    name: str
    columns: tuple[str, ...]
    names: Callable[[Placed], Iterable[str]]

    def __call__(self, placed: Placed) -> Iterable[str]:
        return self.names(placed)


Members = Mapping[str, set[tuple[str, str, str]]]  # a group's clusters, pools and targets
PLACEMENT = ("cluster", "pool", "target", "labels")  # a run's every column a group may use


class Sums(NamedTuple):
    """What the database summed of the ledger's runs of one pool at one price and idleness
    within a period (``SpendStore.spend_sums``): their node-hours, on one UTC day when
    ``day`` is set. The columns it was not summed by are empty. (A tuple: a report makes
    thousands of them.)"""

    cluster: str
    pool: str
    target: str
    labels: tuple[tuple[str, str], ...]
    idle: bool
    node_hour: float | None
    node_hours: float
    day: float | None = None
    last: float = 0.0  # when the last of these runs began: a cluster's labels are its last
    first: float = 0.0  # when the first of them began


class Priced(NamedTuple):
    """What one cluster's runs cost within a period, priced and summed by the database
    (``SpendStore.spend_by_cluster``): a report grouped by cluster reads a row a cluster."""

    cluster: str
    cost: float
    idle: float
    node_hours: float
    unpriced: float
    first: float  # when the first of its runs began

    @property
    def pool(self) -> str:  # placed by its cluster alone
        return ""

    @property
    def target(self) -> str:
        return ""

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        return ()


@dataclass
class Spend:
    cost: float = 0.0  # at list prices
    idle: float = 0.0  # the part spent while the cluster was idle
    node_hours: float = 0.0
    unpriced: float = 0.0  # node-hours of machines the price book does not know
    saved: float = 0.0  # what idle remedies and schedules took away, at list prices

    def add(self, run: SpendRun, since: float, until: float) -> None:
        hours = run.node_hours(since, until)
        self.count(hours, run.cost(since, until), run.idle)

    def add_sums(self, sums: Sums) -> None:
        hours, price = sums.node_hours, sums.node_hour
        self.count(hours, None if price is None and hours else hours * (price or 0.0), sums.idle)

    def count(self, hours: float, cost: float | None, idle: bool) -> None:
        self.node_hours += hours
        if cost is None:
            self.unpriced += hours
            return
        self.cost += cost
        if idle:
            self.idle += cost


by_cluster = Grouping("cluster", ("cluster",), lambda run: (run.cluster.rsplit("/", 1)[-1],))
by_pool = Grouping(
    "pool", ("cluster", "pool"), lambda run: (f"{run.cluster.rsplit('/', 1)[-1]} / {run.pool}",)
)
by_target = Grouping("target", ("target",), lambda run: (run.target or "?",))


def by_label(key: str) -> Grouping:
    """Each run under its cluster's value of the label ``key`` (``(none)`` without it), so
    the groups add up to the whole, as Kubecost allocates by a label."""

    def names(run: Placed) -> Iterable[str]:
        values = dict(run.labels)
        return (f"{key}={values[key]}" if key in values else f"{key} (none)",)

    return Grouping(f"label {key}", ("labels",), names)


def totals(
    runs: Iterable[SpendRun],
    since: float,
    until: float,
    group: Grouping = by_cluster,
    saved: Iterable[Saving] = (),
) -> dict[str, Spend]:
    """Each group's spend and savings over [since, until), largest spend first."""
    found: dict[str, Spend] = {}
    for run in runs:
        if run.within(since, until) <= 0:
            continue
        for name in group(run):
            found.setdefault(name, Spend()).add(run, since, until)
    for saving in saved:
        if saving.within(since, until) <= 0:
            continue
        for name in group(saving):
            found.setdefault(name, Spend()).saved += saving.saved(since, until)
    return dict(sorted(found.items(), key=_largest_first))


def overall(groups: Mapping[Any, Spend]) -> Spend:
    total = Spend()
    for spend in groups.values():
        total.cost += spend.cost
        total.idle += spend.idle
        total.node_hours += spend.node_hours
        total.unpriced += spend.unpriced
        total.saved += spend.saved
    return total


def days_of(start: float, end: float) -> Iterator[float]:
    """The UTC midnights of the days [start, end) touches."""
    day = start - start % DAY
    while day < end:
        yield day
        day += DAY


class Tally:
    """The sums of a report: each group's spend, each UTC day's (for the chart), the days
    watched and each cluster's labels (for the savings). Filled from the database's sums
    (``add_sums``, ``add_days``), whatever the period a row a group and a day, and from runs
    (``add``: the runs still open, or a list the caller holds)."""

    def __init__(
        self,
        since: float,
        until: float,
        group: Grouping = by_cluster,
        keep: Callable[[Placed], bool] | None = None,
        *,
        daily: bool = True,
    ) -> None:
        self.since, self.until, self.group, self.keep = since, until, group, keep
        # whether the database is asked each day's spend with the groups' (a chart's series
        # sums it anyway; a period only compared with another needs none)
        self.daily = daily
        self.groups: dict[str, Spend] = {}
        self.days: dict[float, Spend] = {}  # a UTC midnight -> that day's spend
        self.labels: dict[str, tuple[tuple[str, str], ...]] = {}
        self.watched: set[float] = set()  # the days a sweep saw the fleet (any cluster)
        self.first: float | None = None  # when the first run of the scope began
        self.saved: list[SavedSum] = []  # the savings summed by the database, placed
        # each group's clusters, pools and targets, as the database's sums gave them
        self.members: dict[str, set[tuple[str, str, str]]] = {}

    def add(self, runs: Iterable[SpendRun]) -> None:
        since, until = self.since, self.until
        for run in runs:
            if run.within(since, until) <= 0:
                continue
            self._watched(max(run.start, since), min(run.end, until))
            if self.keep and not self.keep(run):
                continue
            self.began(run.start)
            self.labels[run.cluster] = run.labels
            for name in self.group(run):
                self.groups.setdefault(name, Spend()).add(run, since, until)
            self._by_day(run)

    def add_sums(self, sums: Iterable[Sums]) -> None:
        """The database's sums of the period, by every column a group may use: the groups'
        spend and each cluster's labels (not the days)."""
        last: dict[str, tuple[float, str]] = {}
        named: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], Iterable[str]] = {}
        groups, members, labels = self.groups, self.members, self.labels
        for row in sums:  # thousands of rows: each place's names found once
            if self.keep and not self.keep(row):
                continue
            self.began(row.first)
            cluster = row.cluster
            latest = (row.last, row.pool)  # pools that began at once: the last by name wins
            if latest >= last.get(cluster, latest):
                labels[cluster], last[cluster] = row.labels, latest
            place = (cluster, row.pool, row.target, row.labels)
            names = named.get(place)
            if names is None:
                names = named[place] = tuple(self.group(row))
            for name in names:
                spend, seen = groups.get(name), members.get(name)
                if spend is None:
                    spend = groups[name] = Spend()
                if seen is None:
                    seen = members[name] = set()
                spend.add_sums(row)
                seen.add(place[:3])

    def add_priced(self, rows: Iterable[Priced]) -> None:
        """The database's spend of the period by cluster, priced there: the groups' spend
        (of a grouping by cluster; not each cluster's labels)."""
        groups, members, keep, group = self.groups, self.members, self.keep, self.group
        first = self.first
        for row in rows:  # a thousand rows: no call a row but the group's names
            if keep is not None and not keep(row):
                continue
            cluster, cost, idle, hours, unpriced, began = row
            if first is None or began < first:
                first = began
            # by cluster (the digest's, a fleet's report): its id, without a call
            names = (cluster.rsplit("/", 1)[-1],) if group is by_cluster else group(row)
            for name in names:
                spend = groups.get(name)
                if spend is None:
                    spend = groups[name] = Spend()
                    members[name] = set()
                spend.cost += cost
                spend.idle += idle
                spend.node_hours += hours
                spend.unpriced += unpriced
                members[name].add((cluster, "", ""))
        self.first = first

    def add_days(self, sums: Iterable[Sums], spanning: Iterable[SpendRun]) -> None:
        """The database's sums of each day of the runs within one day, and the runs that
        span more, split here: the days' spend, and those days as watched (the groups come
        from ``add_sums``)."""
        for row in sums:
            assert row.day is not None, "summed by day"
            self.days.setdefault(row.day, Spend()).add_sums(row)
            self.watched.add(row.day)
        since, until = self.since, self.until
        for run in spanning:
            if run.within(since, until) <= 0 or (self.keep and not self.keep(run)):
                continue
            self._watched(max(run.start, since), min(run.end, until))
            self._by_day(run)

    def _by_day(self, run: SpendRun) -> None:
        """A run's spend on each UTC day of the period it covers."""
        since, until = self.since, self.until
        for day in days_of(max(run.start, since), min(run.end, until)):
            self.days.setdefault(day, Spend()).add(run, max(day, since), min(day + DAY, until))

    def began(self, start: float) -> None:
        self.first = start if self.first is None else min(self.first, start)

    def watch(self, days: Iterable[float]) -> None:
        """Days a sweep saw the fleet, as the database found them."""
        self.watched.update(days)

    def _watched(self, start: float, end: float) -> None:
        self.watched.update(days_of(start, end))

    def add_saved(self, sums: Iterable[SavedSum]) -> None:
        """The database's sums of the period's savings (``SpendStore.savings_sums``), each
        cluster's placed by its target and the labels its runs carry."""
        if not {"target", "labels"} & set(self.group.columns):  # placed by cluster alone
            self.saved.extend(sums)
            return
        for row in sums:
            labels = self.labels.get(row.cluster, row.labels)
            self.saved.append(replace(row, target=target_of(row.cluster), labels=labels))

    def totals(self, saved: Iterable[Saving] = ()) -> dict[str, Spend]:
        """Each group's spend and savings, largest spend first (as ``totals``): the sums
        added (``add_saved``), and ``saved``, savings one by one."""
        for saving in saved:
            if saving.within(self.since, self.until) <= 0 or (self.keep and not self.keep(saving)):
                continue
            for name in self.group(saving):
                spend = self.groups.setdefault(name, Spend())
                spend.saved += saving.saved(self.since, self.until)
        for row in self.saved:
            if row.day is not None or (self.keep and not self.keep(row)):
                continue
            for name in self.group(row):
                self.groups.setdefault(name, Spend()).saved += row.saved
        return dict(sorted(self.groups.items(), key=_largest_first))

    def leaders(self) -> list[str]:
        """The groups' names by their spend, largest first (as ``totals`` orders them)."""
        return [name for name, _ in sorted(self.groups.items(), key=_largest_first)]

    def saved_by(self) -> dict[str, float]:
        """What the period's savings saved, by cause (the sums added)."""
        causes: dict[str, float] = {}
        for row in self.saved:
            if row.day is None and (self.keep is None or self.keep(row)):
                causes[row.cause] = causes.get(row.cause, 0.0) + row.saved
        return causes

    def by_day(self, saved: Iterable[Saving] = ()) -> list[tuple[float, Spend]]:
        """Each UTC day from ``since``'s to ``until``'s: its spend and what was saved."""
        first = self.since - self.since % DAY
        days = {first + n * DAY: Spend() for n in range(int((self.until - first) // DAY) + 1)}
        days = {day: spend for day, spend in days.items() if day < self.until}
        for day, spend in self.days.items():
            days[day] = spend
        for row in self.saved:  # summed of the scope already, by the database
            if row.day is not None and row.day in days:
                days[row.day].saved += row.saved
        for saving in saved:
            if self.keep and not self.keep(saving):
                continue
            start = max(saving.start, self.since)
            end = self.until if saving.end is None else min(saving.end, self.until)
            for day in days_of(start, end):
                if day in days:
                    days[day].saved += saving.saved(max(day, self.since), min(day + DAY, end))
        return sorted(days.items())


def _largest_first(item: tuple[str, Spend]) -> tuple[float, str]:
    return (-item[1].cost, item[0])
