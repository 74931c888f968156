"""``/cluster cost [CLUSTER] [since 30d] [by pool|target|label KEY]``: what the clusters
cost while clusterbot watched them, and the part spent idle, from the spend ledger."""

from __future__ import annotations

from dataclasses import dataclass

from bot.vertex.names import target_of
from handlers.costs import money
from handlers.grammar import TIME_UNITS, CommandError, cluster_word, echo, time_back
from handlers.ports import Clock, IdleRecordStore, SpendStore
from handlers.replies import Code, Heading, Note, Reply, Table, Text
from handlers.spend.runs import HOUR, SpendRun, still_open
from handlers.spend.totals import (
    Grouping,
    Spend,
    by_cluster,
    by_label,
    by_pool,
    by_target,
    overall,
    totals,
)

DEFAULT_SINCE = 30 * 24 * HOUR
GROUPS = ("pool", "target", "label")
ROWS = 40  # groups shown; the rest are summed on one line


@dataclass(frozen=True)
class Cost:
    cluster: str | None = None
    since: float = DEFAULT_SINCE  # seconds back from now
    by: str | None = None  # pool, target or label; None: by cluster (by pool for one)
    label: str | None = None  # the label's key, with by label


def parse_cost(args: list[str]) -> Cost:
    words = list(args)
    cluster = by = label = None
    since = DEFAULT_SINCE
    if words and words[0].lower() not in ("since", "by"):
        cluster = cluster_word(words.pop(0), "cost")
    while words:
        key = words.pop(0).lower()
        if key not in ("since", "by") or not words:
            raise CommandError(f"cost takes {echo(key)}: use since 30d or by pool", "cost")
        value = words.pop(0).lower()
        if key == "since":
            since = time_back(value, "cost")
        elif value not in GROUPS:
            raise CommandError(f"cost by {echo(value)}: use by pool, target or label KEY", "cost")
        else:
            by = value
            if value == "label":
                if not words:
                    raise CommandError("by label needs the label's key: by label team", "cost")
                label = words.pop(0)
    return Cost(cluster, since, by, label)


class SpendReport:
    def __init__(
        self, store: SpendStore, records: IdleRecordStore, clock: Clock, interval: float
    ) -> None:
        self.store = store
        self.records = records
        self.clock = clock
        self.interval = interval  # the sweep's: how long an observation holds

    async def runs(self, since: float, until: float) -> list[SpendRun]:
        """The ledger's runs, and the runs still open in the idle records, up to now."""
        runs = await self.store.spend_between(since, until)
        for record in await self.records.all():
            labels = dict(record.labels)
            target = target_of(record.cluster)
            runs += still_open(
                record.cluster, target, labels, record.spending, until, self.interval
            )
        return runs

    async def cost(self, command: Cost) -> Reply:
        until = self.clock()
        since = until - command.since
        runs = await self.runs(since, until)
        if command.cluster is not None:
            key = command.cluster
            runs = [r for r in runs if key in (r.cluster, r.cluster.rsplit("/", 1)[-1])]
        group, named = _grouping(command)
        groups = totals(runs, since, until, group)
        whole = overall(groups)
        scope = command.cluster.rsplit("/", 1)[-1] if command.cluster else "all clusters"
        period = _period(command.since)
        reply = Reply(f"cost of {scope}, last {period}: {money(whole.cost, per_hour=False)}")
        reply.add(Heading(f"Cost of {scope}, last {period}"))
        if not groups:
            return reply.add(
                Text("clusterbot has seen nothing cost money in this period."),
                Note(NOTE),
            )
        rows = [_row(name, spend) for name, spend in list(groups.items())[:ROWS]]
        if len(groups) > ROWS:
            rest = overall(dict(list(groups.items())[ROWS:]))
            rows.append(_row(f"{len(groups) - ROWS} more", rest))
        rows.append(_row("total", whole))
        reply.add(
            Table.of(
                (named, "spend", "idle", "idle %", "node-hours"), rows, frozenset({1, 2, 3, 4})
            )
        )
        if whole.unpriced:
            reply.add(
                Note(
                    f"{whole.unpriced:,.0f} node-hours of machines without a list price "
                    "are not in the dollars."
                )
            )
        return reply.add(Note(NOTE), Note("Grouped ", Code(f"by {command.by or named}"), "."))


NOTE = (
    "Estimates at list prices, from the nodes clusterbot saw at each sweep; idle is the time "
    "after the idle threshold with no Slurm demand. The Cloud Billing export is the bill."
)


def _grouping(command: Cost) -> tuple[Grouping, str]:
    if command.by == "pool" or (command.by is None and command.cluster):
        return by_pool, "pool"
    if command.by == "target":
        return by_target, "target"
    if command.by == "label" and command.label:
        return by_label(command.label), f"label {command.label}"
    return by_cluster, "cluster"


def _row(name: str, spend: Spend) -> tuple[str, str, str, str, str]:
    share = f"{100 * spend.idle / spend.cost:.0f}%" if spend.cost else "-"
    dollars = money(spend.cost, per_hour=False)
    return (name, dollars, money(spend.idle, per_hour=False), share, f"{spend.node_hours:,.1f}")


def _period(seconds: float) -> str:
    if seconds % TIME_UNITS["d"] == 0:
        return f"{seconds / TIME_UNITS['d']:.0f}d"
    return f"{seconds / HOUR:.0f}h"
