"""Health's part of every Home tab: the clusters with a problem at the last sweep (nodes out
of service, a state out of RUNNING), and what their broken nodes cost an hour."""

from __future__ import annotations

from handlers.costs import money
from handlers.health.report import unhealthy
from handlers.replies import Heading, Note, Reply, Rule, Table, Text
from handlers.sweep.report import SweepReport
from handlers.words import plural

ROWS = 15  # rows of the table; more are counted


class HealthHome:
    async def home(self, reply: Reply, latest: SweepReport) -> None:
        sick = unhealthy(latest.entries)
        reply.add(Rule(), Heading(f"Health problems ({len(sick)})"))
        if not sick:
            reply.add(Text("None: no node out of service, no cluster out of RUNNING."))
            return
        rows = [
            (
                e.cluster_id,
                f"{plural(len(h.nodes), 'node')} out of service" if h.nodes else "-",
                h.trouble.state if h.trouble else "RUNNING",
                money(h.broken_hour, per_hour=False),
            )
            for e, h in sick[:ROWS]
        ]
        titles = ("CLUSTER", "NODES", "STATE", "BROKEN $/H")
        reply.add(
            Table.of(titles, rows, right=frozenset({3})),
            Note("/cluster health shows each node, why, and since when."),
        )
