"""The Home tab: one person's overview of what waits on them and what the clusters cost.

- their own pending requests, and those waiting for their approval (with the link to act:
  the card itself, where Approve and Withdraw are);
- operations in flight;
- idle clusters and what they cost now, from the last sweep;
- health problems from the last sweep: broken nodes and clusters out of RUNNING;
- this month's spend, and what clusterbot saved, as of the last sweep (so a tab is
  published again only when a sweep changed it);
- every cluster with its cost per hour.

Buttons open the same forms as ``/cluster resize`` and ``/cluster delete``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from handlers.actions import OpenForm
from handlers.changes.approval_card import cost_change
from handlers.changes.kinds import kind_of
from handlers.costs import money
from handlers.entities import ApprovalRequest, RequestState
from handlers.health.report import unhealthy
from handlers.idle.alert import IDLE_PAYING
from handlers.idle.report import SweepReport
from handlers.policy import Policy, Role, may_approve
from handlers.reading.reports import Reports
from handlers.replies import Button, Buttons, Heading, Note, Reply, Rule, Table, Text, Time
from handlers.spend.report import SpendReport
from handlers.words import duration, plural

ROWS = 15  # rows of each table; more are counted


class PendingRequests(Protocol):
    async def requests_in(self, states: Sequence[str]) -> list[ApprovalRequest]: ...


def _request_rows(requests: Sequence[ApprovalRequest]) -> list[tuple[str, str, str, str]]:
    rows = []
    for request in requests[:ROWS]:
        plan = request.plan
        rows.append((request.id, plan.cluster_id, str(plan.kind), cost_change(plan)))
    return rows


@dataclass(frozen=True)
class Snapshot:
    """What every person's tab shows alike, read once for all the tabs of a refresh: the
    pending requests (each tab picks its own from them), operations in flight, idle
    clusters and every cluster."""

    pending: list[ApprovalRequest]
    shared: Reply


class Home:
    def __init__(
        self,
        reports: Reports,
        requests: PendingRequests,
        policy: Policy,
        spend: SpendReport | None = None,
    ) -> None:
        self.reports = reports
        self.requests = requests
        self.policy = policy
        self.spend = spend

    async def snapshot(self) -> Snapshot:
        shared = Reply("shared")
        await self._operations(shared)
        latest = await self._idle(shared)
        if latest is not None:
            _health(shared, latest)
        if latest is not None and self.spend is not None:
            await self._month(shared, latest.finished)
        clusters = await self.reports.clusters()
        shared.add(Rule(), *clusters.parts)
        return Snapshot(await self.requests.requests_in([RequestState.PENDING]), shared)

    def view(self, user: str, role: Role, snapshot: Snapshot) -> Reply:
        reply = Reply("clusterbot Home").add(
            Heading("clusterbot"),
            Text("Vertex AI training clusters: your requests, changes under way, idle cost."),
        )
        if role >= Role.OPERATOR:
            reply.add(
                Buttons(
                    (
                        Button(OpenForm("resize"), "Resize a pool…", style="primary"),
                        Button(OpenForm("delete"), "Delete a cluster…"),
                    ),
                )
            )
        pending = snapshot.pending
        mine = [r for r in pending if r.requester == user]
        waiting = [
            r
            for r in pending
            if r.requester != user
            and may_approve(self.policy, role, destructive=kind_of(r.plan).destructive)
        ]
        header = ("REQUEST", "CLUSTER", "CHANGE", "COST")
        for title, requests, empty in (
            ("Your requests", mine, "None waiting."),
            ("Waiting for your approval", waiting, "Nothing to approve."),
        ):
            reply.add(Rule(), Heading(f"{title} ({len(requests)})"))
            if not requests:
                reply.add(Text(empty))
                continue
            reply.add(Table.of(header, _request_rows(requests)))
            soonest = min(r.expires_at for r in requests)
            reply.add(
                Note(
                    "Decide them on their cards in the channel; the first expires ",
                    Time(soonest),
                    ".",
                )
            )
        return reply.add(*snapshot.shared.parts)

    async def _operations(self, reply: Reply) -> None:
        operations = [o for o in await self.reports.operations.active_operations() if not o.done]
        reply.add(Rule(), Heading(f"Operations in flight ({len(operations)})"))
        if not operations:
            reply.add(Text("No change is running right now."))
            return
        now = self.reports.clock()
        rows = [
            (o.cluster.rsplit("/", 1)[-1], duration(now - o.started_at), o.progress or "starting")
            for o in operations[:ROWS]
        ]
        reply.add(Table.of(("CLUSTER", "AGE", "PROGRESS"), rows, right=frozenset({1})))

    async def _month(self, reply: Reply, until: float) -> None:
        assert self.spend is not None
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

    async def _idle(self, reply: Reply) -> SweepReport | None:
        sweeper = self.reports.sweeper
        latest = await sweeper.latest() if sweeper is not None else None
        if latest is None:
            return None
        idle = [e for e in latest.entries if e.status in IDLE_PAYING]
        waste = sum(e.cost_hour or 0.0 for e in idle)
        reply.add(Rule(), Heading(f"Idle clusters ({len(idle)}, {money(waste)})"))
        if not idle:
            reply.add(Text("None: every cluster that costs money is busy."))
            return latest
        now = self.reports.clock()
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
        return latest


def _health(reply: Reply, latest: SweepReport) -> None:
    """The clusters with a health problem at the last sweep, and what their broken nodes
    cost an hour."""
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
