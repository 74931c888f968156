"""The idle clusters' part of every Home tab: each cluster idle and paying at the last sweep,
for how long, and what it costs an hour."""

from __future__ import annotations

from handlers.costs import money
from handlers.ports import Clock
from handlers.replies import Heading, Note, Reply, Rule, Table, Text, Time
from handlers.sweep.alert import IDLE_PAYING
from handlers.sweep.report import SweepReport
from handlers.words import duration

ROWS = 15  # rows of the table; more are counted


class IdleHome:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def home(self, reply: Reply, latest: SweepReport) -> None:
        idle = [e for e in latest.entries if e.status in IDLE_PAYING]
        waste = sum(e.cost_hour or 0.0 for e in idle)
        reply.add(Rule(), Heading(f"Idle clusters ({len(idle)}, {money(waste)})"))
        if not idle:
            reply.add(Text("None: every cluster that costs money is busy."))
            return
        now = self.clock()
        rows = [
            (
                e.cluster_id,
                duration(now - e.idle_since) if e.idle_since is not None else "-",
                money(e.cost_hour, per_hour=False),
            )
            for e in idle[:ROWS]
        ]
        reply.add(
            Table.of(("CLUSTER", "QUIET FOR", "$/H"), rows, right=frozenset({1, 2})),
            Note("From the sweep ", Time(latest.finished), "; act on the alert in the channel."),
        )
