"""Each UTC day's spend of a report's first few groups and of the rest as one: a chart's
series, from the database's sums by day and by the grouping's columns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from handlers.spend.runs import DAY, SpendRun
from handlers.spend.totals import Sums, Tally, days_of

NARROWED = 200  # values of a column the chart's query names at most


class GroupDays:
    """Each UTC day's spend of a few groups (the table's first ones) and of the rest as one,
    from the database's sums by day and by the grouping's columns: a fixed row of floats a
    day, however many groups the fleet has."""

    def __init__(
        self,
        tally: Tally,
        names: Sequence[str],
        others: bool,
    ) -> None:
        self.tally = tally
        self.index = {name: at for at, name in enumerate(names)}
        self.series = tuple(names) + (("others",) if others else ())
        self.first = tally.since - tally.since % DAY
        count = int((tally.until - self.first) // DAY) + 1
        self.spend = [[0.0] * len(self.series) for _ in range(count)]

    def names(self) -> tuple[str, ...]:
        return self.series

    def wanted(self) -> dict[str, list[str]]:
        """The values of the grouping's columns that its named groups hold (the clusters,
        pools or targets their sums came from), for the database to sum every other value
        as one: a row a named group, and one for the rest, a day. Labels are not narrowed
        (a fleet has few sets of them); nor is a column past ``NARROWED`` values."""
        at = {"cluster": 0, "pool": 1, "target": 2}
        wanted: dict[str, list[str]] = {}
        for column in self.tally.group.columns:
            if column not in at:
                continue
            values = {m[at[column]] for n in self.index for m in self.tally.members.get(n, ())}
            if 0 < len(values) <= NARROWED:
                wanted[column] = sorted(values)
        return wanted

    def add(self, runs: Iterable[SpendRun]) -> None:
        since, until, keep = self.tally.since, self.tally.until, self.tally.keep
        rest = len(self.index) if len(self.series) > len(self.index) else None
        for run in runs:
            if run.within(since, until) <= 0 or (keep and not keep(run)):
                continue
            for name in self.tally.group(run):
                column = self.index.get(name, rest)
                if column is None:
                    continue
                for day in days_of(max(run.start, since), min(run.end, until)):
                    cost = run.cost(max(day, since), min(day + DAY, until))
                    self.spend[int((day - self.first) // DAY)][column] += cost or 0.0

    def add_sums(self, sums: Iterable[Sums]) -> None:
        """The database's sums by day and by the grouping's columns, of the runs within one
        day (those that span more go through ``add``), already of the report's scope."""
        rest = len(self.index) if len(self.series) > len(self.index) else None
        for row in sums:
            assert row.day is not None, "summed by day"
            for name in self.tally.group(row):
                column = self.index.get(name, rest)
                if column is not None and row.node_hour is not None:
                    at = int((row.day - self.first) // DAY)
                    self.spend[at][column] += row.node_hours * row.node_hour

    def of(self, day: float) -> tuple[float, ...]:
        return tuple(self.spend[int((day - self.first) // DAY)])
