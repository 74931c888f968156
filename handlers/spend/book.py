"""The savings, kept as rows of the succeeded changes: each report first keeps the requests
that ended since the newest row (all of them the first time), then asks the database for the
period's savings summed (``SpendStore.savings_sums``); no report reads every request's plan."""

from __future__ import annotations

from handlers.ports import RequestStore
from handlers.spend.ports import SpendStore
from handlers.spend.savings import changes_done

# A request stamped as ended a little before the newest row may commit after it (another
# replica, a slow transaction): the requests of this long before it are looked at again.
MARGIN = 3600.0


class SavingsBook:
    def __init__(self, store: SpendStore, requests: RequestStore) -> None:
        self.store = store
        self.requests = requests

    async def catch_up(self) -> int:
        """Keep the succeeded changes not kept yet; how many requests were read to keep
        them (the ids of the last ``MARGIN`` are looked at, only the new ones are read)."""
        new = await self.store.changes_unkept(MARGIN)
        found = await self.requests.get_requests(new)
        await self.store.keep_changes_done(changes_done([found[i] for i in new if i in found]))
        return len(new)
