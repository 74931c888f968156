"""A schedule as a change kind: a standing change approved once on a card like any other.

Its card shows the times it will scale the pools to zero and back (the next five, in the
schedule's zone) and what a week of it saves at list prices. Approving it sends nothing to
the control plane: its effect is to record the approval (``RECORD``); each "off" and "on"
after that is an ordinary resize, asked by the schedule and approved by the same person.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.changes.effects import RECORD
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail
from handlers.costs import money
from handlers.domain.models import Cluster
from handlers.replies import Code, Line, Part, Strong, Table, Text, bullets
from handlers.schedules.times import local

NAME: Final = "schedule"


class ScheduleDetail(Detail):
    kind: Literal["schedule"] = NAME
    schedule: str  # the schedule's id
    pool: str | None = None  # None: every compute pool
    off: str  # "Mon-Fri 20:00"
    on: str
    zone: str
    upcoming: tuple[tuple[float, float], ...] = ()  # the next (off, on) pairs, epoch seconds
    pools: tuple[str, ...] = ()  # the pools it scales
    freed_hour: float | None = None  # what an hour at zero stops paying, as the pools are now
    hours_week: float = 0.0  # hours asleep in a week
    replaces: str | None = None  # the schedule of the same scope this one takes over from

    @property
    def saving_week(self) -> float | None:
        return None if self.freed_hour is None else self.freed_hour * self.hours_week


SchedulePlan = ChangePlan[ScheduleDetail]


class ScheduleKind(ChangeKind[ScheduleDetail]):
    name = NAME
    detail = ScheduleDetail
    effect = RECORD
    doing = "schedule"
    heading = "Schedule request"
    verb = "put on an off-hours schedule"
    recorded = "the schedule is in force"
    needs_running = False  # a schedule can be set on a cluster that is being resized

    def title(self, plan: SchedulePlan) -> str:
        pool = plan.detail.pool
        return f"{self.heading}: {plan.cluster_id}" + (f" / {pool}" if pool else "")

    def ask(self, plan: SchedulePlan) -> Line:
        return (
            f" asks to {self.verb} ",
            Strong(plan.cluster_id),
            " (",
            Code(plan.target),
            ").",
        )

    def card(self, plan: SchedulePlan) -> list[Part]:
        detail = plan.detail
        pools = ", ".join(detail.pools) or "its compute pools"
        lines = [
            f"Off {detail.off}, on {detail.on} ({detail.zone}): {pools} to zero nodes, then "
            "back to the exact bounds they had",
            "A standing change: each off and on then runs as a resize asked by the schedule "
            "and approved by whoever approves this",
            "Never under running work: while Slurm has running jobs, or pending jobs that can "
            "start, the off waits and looks again, and skips the night past a limit",
            f"Saves {money(detail.saving_week, per_hour=False)} a week at list prices "
            f"({detail.hours_week:g} h at zero, {money(detail.freed_hour)} as the pools are now)",
        ]
        if detail.replaces:
            lines.append(f"Replaces schedule {detail.replaces} of the same pools")
        rows = [(local(off, detail.zone), local(on, detail.zone)) for off, on in detail.upcoming]
        return [Text(bullets(lines)), Table.of(("NEXT OFF", "BACK ON"), rows)]

    def wanted(self, plan: SchedulePlan) -> str:
        detail = plan.detail
        return f"off {detail.off}, on {detail.on} ({detail.zone})"

    def drift(self, plan: SchedulePlan, current: Cluster) -> str | None:
        return None  # a schedule reads the cluster afresh at each off and on

    def applied(self, plan: SchedulePlan, current: Cluster) -> bool:
        return False  # nothing of it shows in the cluster: recording it is repeatable


SCHEDULE = ScheduleKind()
