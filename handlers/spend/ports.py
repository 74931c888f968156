"""What the spend capability needs from the world: the ledger's store and a chart drawer
(``bot/store/spend.py`` and ``bot/charts.py`` implement them)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol, runtime_checkable

from handlers.errors import Blame, UserError
from handlers.spend.chart import Chart
from handlers.spend.runs import SpendRun
from handlers.spend.savings import ChangeDone, SavedSum
from handlers.spend.totals import PLACEMENT, Priced, Sums


class ChartError(Exception):
    """A chart could not be drawn; said where the chart would be, as a refused share is."""

    code = "chart_not_drawn"

    def advice(self) -> str:
        return str(self)


class ReportError(UserError):
    """A cost report could not be made where the service makes them (its process stopped,
    or took too long): said in one line; the next report is made afresh."""

    blame = Blame.UPSTREAM


class Charts(Protocol):
    """Draws a chart as a PNG (the service's: matplotlib's Agg backend, ``bot/charts.py``)."""

    async def png(self, chart: Chart) -> bytes: ...


@runtime_checkable
class SpendStore(Protocol):
    async def record_spend(self, runs: Sequence[SpendRun]) -> None:
        """Add closed runs to the ledger; one already there (the same cluster, pool and
        start) takes the new end."""
        ...

    async def forget_spend(self, before: float) -> int:
        """Drop the runs that ended before ``before``; returns how many."""
        ...

    async def spend_between(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SpendRun]:
        """The runs that overlap [since, until), of one cluster or of all."""
        ...

    async def first_spend(self) -> float | None:
        """When the ledger begins (its oldest run's start), or None when it is empty."""
        ...

    async def spend_by_cluster(
        self, since: float, until: float, clusters: Collection[str] | None = None
    ) -> list[Priced]:
        """The whole fleet's spend over [since, until) by cluster, priced by the store: a
        row a cluster (its cost, the part idle, node-hours, those without a price, and its
        first run's start); of ``clusters`` only (full names), when named."""
        ...

    async def spend_sums(
        self,
        since: float,
        until: float,
        *,
        cluster: str | None = None,
        columns: Sequence[str] = PLACEMENT,
        daily: bool = False,
        only: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[list[Sums], list[SpendRun]]:
        """The node-hours of the runs that overlap [since, until), clipped to it, summed by
        the database by ``columns`` (of ``PLACEMENT``), idleness and price; of one cluster
        (its full name or its id) or of all. A column ``only`` names may be summed as its
        values there and one empty value for all others (a store may also ignore it). With
        ``daily``, by UTC day too; a store may return the runs that span days as they are
        (for the caller to split), or sum their days itself (the database does: a row a
        group and a day, whatever the runs)."""
        ...

    async def spend_watched(self, since: float, until: float) -> set[float]:
        """The UTC days (their midnights) within [since, until) that any run covers."""
        ...

    async def keep_changes_done(self, done: Sequence[ChangeDone]) -> None:
        """Keep succeeded changes; one already kept is left as it is."""
        ...

    async def changes_unkept(self, margin: float) -> list[str]:
        """The succeeded requests not kept as changes yet, in the order they ended: of
        those that ended from ``margin`` seconds before the newest kept change on (all,
        when none is kept)."""
        ...

    async def savings_sums(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SavedSum]:
        """What the savings saved within [since, until), summed (``saved_sums``): by cluster
        and cause, and by UTC day; of one cluster (its full name or its id) or of all."""
        ...
