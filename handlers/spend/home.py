"""Spend's part of every Home tab: this month's spend and what clusterbot saved, as of the
last sweep (so a tab is published again only when a sweep changed it)."""

from __future__ import annotations

from handlers.costs import money
from handlers.replies import Heading, Note, Reply, Rule, Text, Time
from handlers.spend.report import SpendReport
from handlers.sweep.report import SweepReport


class SpendHome:
    def __init__(self, spend: SpendReport) -> None:
        self.spend = spend

    async def home(self, reply: Reply, latest: SweepReport) -> None:
        until = latest.finished
        month, spent, causes = await self.spend.month(until)
        reply.add(Rule(), Heading(f"{month}: {money(spent.cost, per_hour=False)} spent"))
        saved = "; ".join(f"{money(v, per_hour=False)} by {cause}" for cause, v in causes.items())
        reply.add(
            Text(
                f"{money(spent.idle, per_hour=False)} of it while idle. clusterbot saved "
                f"{money(spent.saved, per_hour=False)}" + (f" ({saved})." if saved else ".")
            ),
            Note(
                "Estimates at list prices, to the sweep ", Time(until), "; /cluster cost has more."
            ),
        )
