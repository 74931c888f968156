"""``/cluster cost [CLUSTER] [since 30d] [by pool|target|label KEY]``: what the clusters
cost while clusterbot watched them, and the part spent idle, from the spend ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from handlers.costs import money
from handlers.grammar import TIME_UNITS
from handlers.messenger import Messenger, MessengerError
from handlers.ports import Clock, RequestStore
from handlers.replies import Code, Heading, Note, Reply, Table, Text
from handlers.spend.asked import Cost
from handlers.spend.book import SavingsBook
from handlers.spend.chart import Chart, chart_of
from handlers.spend.keeper import SpendKeeper
from handlers.spend.ports import ChartError, Charts, SpendStore
from handlers.spend.runs import HOUR, SpendRun
from handlers.spend.savings import SavedSum
from handlers.spend.series import GroupDays
from handlers.spend.totals import (
    Grouping,
    Placed,
    Spend,
    Sums,
    Tally,
    by_cluster,
    by_label,
    by_pool,
    by_target,
    overall,
)
from handlers.words import plural

ROWS = 40  # groups shown; the rest are summed on one line
SERIES = 7  # groups stacked in the chart's bars; the rest as one


@dataclass(frozen=True)
class Made:
    """A cost report made: its reply (without what is said of the chart's sharing), its
    chart's numbers (None: none asked, or nothing to chart), the whole period's spend, and
    the chart's picture where it was drawn with the report (or why it could not be)."""

    reply: Reply
    chart: Chart | None
    whole: Spend
    png: bytes | None = None  # the chart drawn where the report was made
    unchartable: str | None = None  # or why it could not be drawn there


class ReportsElsewhere(Protocol):
    """Makes cost reports away from the service's event loop (``bot/report_process.py``):
    ``ReportError`` when it cannot."""

    async def cost(self, command: Cost, charted: bool, until: float) -> Made: ...


class SpendReport:
    def __init__(
        self,
        *,
        store: SpendStore,
        keeper: SpendKeeper,
        requests: RequestStore,
        clock: Clock,
        interval: float,
        messenger: Messenger | None = None,
        charts: Charts | None = None,
    ) -> None:
        self.store = store
        self.keeper = keeper  # the runs still open, in the spend ledger's records
        self.book = SavingsBook(store, requests)  # what remedies and schedules saved
        self.messenger = messenger
        self.charts = charts  # None: the report is a table only
        self.clock = clock
        self.interval = interval  # the sweep's: how long an observation holds
        # where ``cost`` makes the report (the service's report process); None: here
        self.elsewhere: ReportsElsewhere | None = None

    async def runs(self, since: float, until: float) -> list[SpendRun]:
        """The ledger's runs, and the runs still open, up to now."""
        return await self.store.spend_between(since, until) + await self.keeper.open_runs(until)

    async def read(
        self,
        tallies: Sequence[Tally],
        cluster: str | None = None,
        then: Callable[[Sequence[SpendRun]], Awaitable[object]] | None = None,
    ) -> Sequence[SpendRun]:
        """Fill each tally from the database (of ``cluster``, or of all): its spend and its
        savings, each summed there, the queries at once (the savings once the changes that
        ended since the last report are kept); ``then``: what reads on from the spend (given
        the runs still open), while the savings are read. The runs still open, read once."""
        store = self.store
        running: Sequence[SpendRun] = ()

        async def spending() -> None:
            nonlocal running
            until = max(t.until for t in tallies)
            opened = asyncio.gather(*(self._sums(t, cluster) for t in tallies))
            running, _ = await asyncio.gather(self.keeper.open_runs(until), opened)
            for tally in tallies:
                tally.add(running)
            if then is not None:
                await then(running)

        async def saving() -> list[list[SavedSum]]:
            await self.book.catch_up()
            sums = (store.savings_sums(t.since, t.until, cluster) for t in tallies)
            return list(await asyncio.gather(*sums))

        _, saved = await asyncio.gather(spending(), saving())
        for tally, sums in zip(tallies, saved, strict=True):
            tally.add_saved(sums)
        return running

    async def _sums(self, tally: Tally, cluster: str | None) -> None:
        """``tally`` filled from the database's sums (of ``cluster``, or of all): its groups'
        spend, each day's (where the tally is ``daily``) and the days a sweep watched, not
        the runs still open (``read`` adds them); what the event loop and memory hold is a
        row a group and a day."""
        since, until, store = tally.since, tally.until, self.store
        # the fleet by cluster: a row a cluster, priced by the database
        priced = cluster is None and tally.group is by_cluster and tally.keep is None

        async def groups() -> None:
            if priced:
                tally.add_priced(await store.spend_by_cluster(since, until))
            else:
                tally.add_sums((await store.spend_sums(since, until, cluster=cluster))[0])

        _, (days_summed, spanning), watched = await asyncio.gather(
            groups(),
            store.spend_sums(since, until, cluster=cluster, columns=(), daily=True)
            if tally.daily
            else _no_days(),
            # the fleet's days are its own days; a cluster's report asks for the fleet's
            _nothing() if cluster is None else store.spend_watched(since, until),
        )
        tally.add_days(days_summed, spanning)
        tally.watch(watched)

    async def fleet_days(self, since: float, until: float) -> Tally:
        """The fleet's days over [since, until) from the database's sums, without savings or
        the runs still open (``add`` them), begun at the ledger's first run: a period only
        compared with another."""
        fleet = Tally(since, until)
        (days, spanning), first = await asyncio.gather(
            self.store.spend_sums(since, until, columns=(), daily=True), self.store.first_spend()
        )
        fleet.add_days(days, spanning)
        if first is not None:
            fleet.began(first)
        return fleet

    async def clusters_spend(
        self, since: float, until: float, clusters: Collection[str], running: Sequence[SpendRun]
    ) -> dict[str, Spend]:
        """What [since, until) cost each of ``clusters`` (full names; by id), without
        savings; ``running``: the runs still open (``read`` gives them)."""
        named = Tally(since, until, keep=lambda placed: placed.cluster in clusters, daily=False)
        named.add_priced(await self.store.spend_by_cluster(since, until, clusters))
        named.add(running)
        return named.totals()

    async def series_summed(
        self, series: GroupDays, cluster: str | None, running: Sequence[SpendRun] | None = None
    ) -> None:
        """Each day's spend of the table's first groups, summed by the database; and the
        tally's days (summed over the groups), where it was read without them; ``running``:
        the runs still open, where they were read."""
        tally = series.tally
        sums, spanning = await self.store.spend_sums(
            tally.since,
            tally.until,
            cluster=cluster,
            columns=tally.group.columns,
            daily=True,
            only=series.wanted(),  # the rest summed as one: a row a group and a day
        )
        series.add_sums(sums)
        series.add(spanning)
        if not tally.daily:
            tally.add_days(sums, spanning)
        series.add(await self.keeper.open_runs(tally.until) if running is None else running)

    async def month(self, until: float) -> tuple[str, Spend, dict[str, float]]:
        """This calendar month (UTC) up to ``until``: its name, what it cost, and what was
        saved by each cause."""
        at = datetime.fromtimestamp(until, UTC)
        start = datetime(at.year, at.month, 1, tzinfo=UTC).timestamp()
        tally = Tally(start, until)
        await self.read([tally])
        return at.strftime("%B %Y"), overall(tally.totals()), tally.saved_by()

    async def cost(self, command: Cost, channel: str | None = None) -> Reply:
        """The report (asked in ``channel``: with its chart, shared there); made in the
        report's own process where the service has one (``elsewhere``), here otherwise."""
        until, charted = self.clock(), channel is not None
        if self.elsewhere is not None:
            made = await self.elsewhere.cost(command, charted, until)
        else:
            made = await self.made(command, charted, until)
        reply = made.reply
        if channel is not None and made.chart is not None:
            said = await self.share_chart(made, channel)
            if said is not None:
                reply.add(Note(said))
        return reply

    async def made(
        self, command: Cost, charted: bool, until: float, *, drawn: bool = False
    ) -> Made:
        """The report of [until - since, until) and, ``charted``, its chart (``drawn``:
        drawn here too, as the report's own process does)."""
        since = until - command.since
        group, named = _grouping(command)
        key = command.cluster

        def of_cluster(placed: Placed) -> bool:
            return key in (placed.cluster, placed.cluster.rsplit("/", 1)[-1])

        keep = None if key is None else of_cluster

        # its days come with the chart's series
        tally = Tally(since, until, group, keep, daily=not charted)
        series: GroupDays | None = None

        async def chart_series(running: Sequence[SpendRun]) -> None:
            """Each day's spend of the table's first groups, asked once they are known."""
            nonlocal series
            names = tally.leaders()
            if charted and names:
                series = GroupDays(tally, names[:SERIES], others=len(names) > SERIES)
                await self.series_summed(series, key, running)

        running = await self.read([tally], key, then=chart_series)
        groups = tally.totals()
        if charted and groups and series is None:  # groups that only saved: known now
            series = GroupDays(tally, list(groups)[:SERIES], others=len(groups) > SERIES)
            await self.series_summed(series, key, running)
        whole = overall(groups)
        scope = command.cluster.rsplit("/", 1)[-1] if command.cluster else "all clusters"
        period = _period(command.since)
        reply = Reply(f"cost of {scope}, last {period}: {money(whole.cost, per_hour=False)}")
        reply.add(Heading(f"Cost of {scope}, last {period}"))
        if not groups:
            reply.add(Text("clusterbot has seen nothing cost money in this period."), Note(NOTE))
            return Made(reply, None, whole)
        rows = [_row(name, spend) for name, spend in list(groups.items())[:ROWS]]
        if len(groups) > ROWS:
            rest = overall(dict(list(groups.items())[ROWS:]))
            rows.append(_row(f"{len(groups) - ROWS} more", rest))
        rows.append(_row("total", whole))
        reply.add(
            Table.of(
                (named, "spend", "idle", "idle %", "saved", "node-hours"),
                rows,
                frozenset({1, 2, 3, 4, 5}),
            )
        )
        if whole.unpriced:
            reply.add(
                Note(
                    f"{whole.unpriced:,.0f} node-hours of machines without a list price "
                    "are not in the dollars."
                )
            )
        watched = _watched(tally)
        if watched is not None:
            reply.add(Note(watched))
        reply.add(Note(NOTE), Note("Grouped ", Code(f"by {command.by or named}"), "."))
        if not charted or series is None:
            return Made(reply, None, whole)
        chart = chart_of(tally, (), f"{scope}, last {period}", series)
        if not drawn or self.charts is None:
            return Made(reply, chart, whole)
        try:
            return Made(reply, chart, whole, png=await self.charts.png(chart))
        except ChartError as error:
            return Made(reply, chart, whole, unchartable=str(error))

    async def share_chart(self, made: Made, channel: str) -> str | None:
        """The report's chart as a PNG and its numbers as a CSV, in ``channel``; what to say
        of it (None: no chart is drawn here)."""
        if self.charts is None or self.messenger is None or made.chart is None:
            return None
        try:
            if made.unchartable is not None:
                raise ChartError(made.unchartable)
            await self.share(made.chart, channel, made.whole, made.png)
        except MessengerError as error:
            return f"The chart could not be shared here ({error.code}): {error.advice()}."
        except ChartError as error:
            return f"The chart could not be drawn ({error}); the table above has its numbers."
        return "The chart and its numbers (CSV) are shared in this conversation."

    async def share(
        self, chart: Chart, channel: str, whole: Spend, png: bytes | None = None
    ) -> None:
        """Share the chart (a PNG: ``png``, or drawn now) and its numbers (a CSV) in
        ``channel``, as one message (nothing where no chart is drawn); ``MessengerError``
        when the platform refuses."""
        if self.charts is None or self.messenger is None:
            return
        name = chart.title.replace(", last ", "-").replace(" ", "-")
        comment = (
            f"Cost of {chart.title}: {money(whole.cost, per_hour=False)} spent, "
            f"{money(whole.idle, per_hour=False)} of it idle, "
            f"{money(whole.saved, per_hour=False)} saved (estimates at list prices).",
        )
        files: list[tuple[str, bytes | str]] = [
            (f"cost-{name}.png", png if png is not None else await self.charts.png(chart)),
            (f"cost-{name}.csv", chart.csv()),
        ]
        await self.messenger.share(channel, files, comment)


NOTE = (
    "Estimates at list prices, from the nodes clusterbot saw at each sweep; idle is the time "
    "after the idle threshold with no Slurm demand; saved is what idle remedies and schedules "
    "took off the hourly cost, until the cluster's next change. The Cloud Billing export is "
    "the bill."
)


def _grouping(command: Cost) -> tuple[Grouping, str]:
    if command.by == "pool" or (command.by is None and command.cluster):
        return by_pool, "pool"
    if command.by == "target":
        return by_target, "target"
    if command.by == "label" and command.label:
        return by_label(command.label), f"label {command.label}"
    return by_cluster, "cluster"


def _row(name: str, spend: Spend) -> tuple[str, ...]:
    share = f"{100 * spend.idle / spend.cost:.0f}%" if spend.cost else "-"
    dollars, idle = money(spend.cost, per_hour=False), money(spend.idle, per_hour=False)
    saved = money(spend.saved, per_hour=False) if spend.saved else "-"
    return (name, dollars, idle, share, saved, f"{spend.node_hours:,.1f}")


def _watched(tally: Tally) -> str | None:
    """What the report says of the days no sweep watched, or None when every day was."""
    days = [day for day, _ in tally.by_day()]
    missed = [day for day in days if day not in tally.watched]
    if not missed:
        return None
    seen = [day for day in days if day in tally.watched]
    first = f" (from {_date(seen[0])})" if seen else ""
    return (
        f"clusterbot watched {len(seen)} of these {len(days)} days{first}: the "
        f"{plural(len(missed), 'day')} it did not watch are left out, not counted as $0."
    )


def _date(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%d %b %Y")


def _period(seconds: float) -> str:
    if seconds % TIME_UNITS["d"] == 0:
        return f"{seconds / TIME_UNITS['d']:.0f}d"
    return f"{seconds / HOUR:.0f}h"


async def _nothing() -> set[float]:
    return set()


async def _no_days() -> tuple[list[Sums], list[SpendRun]]:
    return [], []
