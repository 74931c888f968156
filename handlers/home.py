"""The Home tab: one person's overview of what waits on them and what the clusters cost.

- their own pending requests, and those waiting for their approval (with the link to act:
  the card itself, where Approve and Withdraw are);
- operations in flight;
- each capability's part, from the last sweep, in the capabilities' order (``HomePart``,
  declared as ``home`` beside its other declarations): idle clusters and what they cost
  now, this month's spend and what clusterbot saved, health problems (so a tab is
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
from handlers.entities import ApprovalRequest, RequestState
from handlers.policy import Policy, Role, may_approve
from handlers.reading.reports import Reports
from handlers.replies import Button, Buttons, Heading, Note, Reply, Rule, Table, Text, Time
from handlers.sweep.report import SweepReport
from handlers.words import duration

ROWS = 15  # rows of each table; more are counted


class PendingRequests(Protocol):
    async def requests_in(self, states: Sequence[str]) -> list[ApprovalRequest]: ...


class HomePart(Protocol):
    """A capability's part of every Home tab, drawn from the last sweep's report."""

    async def home(self, reply: Reply, latest: SweepReport) -> None: ...


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
        parts: Sequence[HomePart] = (),
    ) -> None:
        self.reports = reports
        self.requests = requests
        self.policy = policy
        self.parts = tuple(parts)  # the capabilities' parts, in their order

    async def snapshot(self) -> Snapshot:
        shared = Reply("shared")
        await self._operations(shared)
        sweeper = self.reports.sweeper
        latest = await sweeper.latest() if sweeper is not None else None
        if latest is not None:  # each part is of the last sweep
            for part in self.parts:
                await part.home(shared, latest)
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
