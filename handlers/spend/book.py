"""The savings of a period, from the succeeded changes kept as rows: each read first keeps the
requests that ended since the newest row (all of them the first time), then asks the
database for the savings that overlap the period; no report reads every request's plan."""

from __future__ import annotations

from handlers.domain.names import target_of
from handlers.entities import RequestState
from handlers.ports import RequestStore
from handlers.spend.ports import SpendStore
from handlers.spend.savings import Saving, changes_done

# A request stamped as ended a little before the newest row may commit after it (another
# replica, a slow transaction): the requests of this long before it are looked at again.
MARGIN = 3600.0

Labels = dict[str, tuple[tuple[str, str], ...]]


class SavingsBook:
    def __init__(self, store: SpendStore, requests: RequestStore) -> None:
        self.store = store
        self.requests = requests

    async def catch_up(self) -> int:
        """Keep the succeeded changes not kept yet; how many requests were looked at."""
        newest = await self.store.changes_done_until()
        since = 0.0 if newest is None else newest - MARGIN
        ended = await self.requests.requests_ended(str(RequestState.SUCCEEDED), since)
        await self.store.keep_changes_done(changes_done(ended))
        return len(ended)

    async def between(self, since: float, until: float) -> list[Saving]:
        """The savings that overlap [since, until), as kept (``placed`` names their place)."""
        await self.catch_up()
        return await self.store.savings_between(since, until)


def placed(savings: list[Saving], labels: Labels) -> list[Saving]:
    """The savings with each cluster's target and labels, for grouping: made once each (a
    period's savings number tens of thousands), each cluster's place worked out once."""
    targets: dict[str, str] = {}
    out = []
    for s in savings:
        target = targets.get(s.cluster)
        if target is None:
            target = targets[s.cluster] = target_of(s.cluster)
        out.append(
            Saving(
                s.cluster,
                s.cause,
                s.start,
                s.end,
                s.per_hour,
                s.request_id,
                target,
                labels.get(s.cluster, s.labels),
                s.pool,
            )
        )
    return out
