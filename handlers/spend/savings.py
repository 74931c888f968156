"""What clusterbot saved: each idle remedy and each scheduled night that lowered a cluster's
cost, from the moment its change succeeded until the next change of that cluster succeeded
(the wake, a resize back up, a restore), at the hourly cost its plan took away.

It comes from the requests themselves: a succeeded change's plan holds the cost before and
after, and its end time. Each succeeded change is kept as a row (``ChangeDone``: when, and
what it took away an hour, if anything) by ``handlers/spend/book.py``, from the requests
that ended since the last row, so a crash loses nothing and a report reads the savings of
its period by time instead of every request's plan. Like the spend, it is an estimate at
list prices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from handlers.domain.names import target_of
from handlers.entities import ApprovalRequest, Origin
from handlers.spend.runs import HOUR

DAY = 86400.0

CAUSES = {
    Origin.IDLE: "idle remedies",
    Origin.IDLE_AUTO: "idle remedies",
    Origin.SCHEDULE: "schedules",
}
WHOLE = "(whole cluster)"  # a saving is the cluster's, whichever of its pools it took


@dataclass(frozen=True)
class Saving:
    cluster: str
    cause: str  # "schedules" or "idle remedies"
    start: float  # when the change that saved succeeded
    end: float | None  # when the next change of the cluster succeeded; None: still saving
    per_hour: float
    request_id: str
    target: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    pool: str = WHOLE

    def within(self, since: float, until: float) -> float:
        end = until if self.end is None else min(self.end, until)
        return max(0.0, end - max(self.start, since))

    def saved(self, since: float, until: float) -> float:
        return self.per_hour * self.within(since, until) / HOUR


@dataclass(frozen=True)
class SavedSum:
    """What the database summed of the savings within a period: a cluster's, of one cause
    (``day`` None); or one UTC day's of the period, of every cluster summed (``day`` set:
    ``cluster`` and ``cause`` empty). Dollars at list prices."""

    cluster: str
    cause: str
    saved: float
    day: float | None = None
    target: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    pool: str = WHOLE


def saved_sums(savings: Iterable[Saving], since: float, until: float) -> list[SavedSum]:
    """The sums of ``savings`` within [since, until), as the database sums them: by
    cluster and cause, and by UTC day."""
    by_cluster: dict[tuple[str, str], float] = {}
    by_day: dict[float, float] = {}
    for saving in savings:
        if saving.within(since, until) <= 0:
            continue
        key = (saving.cluster, saving.cause)
        by_cluster[key] = by_cluster.get(key, 0.0) + saving.saved(since, until)
        start = max(saving.start, since)
        end = until if saving.end is None else min(saving.end, until)
        day = start - start % DAY
        while day < end:
            part = saving.saved(max(day, since), min(day + DAY, end))
            by_day[day] = by_day.get(day, 0.0) + part
            day += DAY
    sums = [SavedSum(cluster, cause, saved) for (cluster, cause), saved in by_cluster.items()]
    return sums + [SavedSum("", "", saved, day) for day, saved in sorted(by_day.items())]


@dataclass(frozen=True)
class ChangeDone:
    """A succeeded change of a cluster: when it ended, and what it took away an hour (None:
    nothing, yet it ends the saving before it)."""

    request_id: str
    cluster: str
    finished_at: float
    cause: str | None = None
    per_hour: float | None = None


def changes_done(requests: Iterable[ApprovalRequest]) -> list[ChangeDone]:
    """The rows the ended ``requests`` keep: every succeeded change, saving or not."""
    return [
        ChangeDone(
            request.id,
            request.cluster,
            request.finished_at,
            CAUSES[request.origin] if cut is not None else None,
            cut,
        )
        for request in requests
        if request.finished_at is not None
        for cut in [_cut(request)]
    ]


def savings(
    requests: Iterable[ApprovalRequest],
    labels: dict[str, tuple[tuple[str, str], ...]] | None = None,
) -> list[Saving]:
    """The savings the succeeded ``requests`` made, oldest first; ``labels``: each
    cluster's labels, for grouping by label."""
    done = sorted(
        (r for r in requests if r.finished_at is not None),
        key=lambda r: (r.finished_at or 0.0, r.id),
    )
    found: list[Saving] = []
    following: dict[str, float] = {}  # each cluster's next change, walking back in time
    for request in reversed(done):
        at = request.finished_at or 0.0
        cut = _cut(request)
        if cut is not None:
            found.append(
                Saving(
                    cluster=request.cluster,
                    cause=CAUSES[request.origin],
                    start=at,
                    end=following.get(request.cluster),
                    per_hour=cut,
                    request_id=request.id,
                    target=target_of(request.cluster),
                    labels=(labels or {}).get(request.cluster, ()),
                )
            )
        following[request.cluster] = at
    return found[::-1]


def _cut(request: ApprovalRequest) -> float | None:
    """The cost an hour a remedy's or a schedule's change took away, or None."""
    plan = request.plan
    if request.origin not in CAUSES or plan.cost_before is None:
        return None
    if plan.cost_after is None or plan.cost_after >= plan.cost_before:
        return None
    return plan.cost_before - plan.cost_after
