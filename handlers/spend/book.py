"""The savings, kept as rows of the succeeded changes: each report first keeps the requests
that ended since the newest row (all of them the first time), then asks the database for the
period's savings summed (``SpendStore.savings_sums``); no report reads every request's plan.

The first catch-up reads every succeeded request there is (90,000 for a thousand clusters on
schedules for 90 days: 25 s on SQLite), in pages: ``READ_PAGE`` requests parsed between two
awaits (a few milliseconds of the event loop), ``KEEP_PAGE`` changes kept a transaction (in
smaller ones, each mending the last one's ends, it took longer: 44 s in pages of 500)."""

from __future__ import annotations

from handlers.entities import ApprovalRequest
from handlers.ports import RequestStore
from handlers.spend.ports import SpendStore
from handlers.spend.savings import changes_done

# A request stamped as ended a little before the newest row may commit after it (another
# replica, a slow transaction): the requests of this long before it are looked at again.
MARGIN = 3600.0
READ_PAGE = 50
KEEP_PAGE = 2000


class SavingsBook:
    def __init__(self, store: SpendStore, requests: RequestStore) -> None:
        self.store = store
        self.requests = requests

    async def catch_up(self) -> int:
        """Keep the succeeded changes not kept yet; how many requests were read to keep
        them (the ids of the last ``MARGIN`` are looked at, only the new ones are read)."""
        new = await self.store.changes_unkept(MARGIN)
        for at in range(0, len(new), KEEP_PAGE):
            ids = new[at : at + KEEP_PAGE]
            found: dict[str, ApprovalRequest] = {}
            for page in range(0, len(ids), READ_PAGE):
                found.update(await self.requests.get_requests(ids[page : page + READ_PAGE]))
            await self.store.keep_changes_done(changes_done([found[i] for i in ids if i in found]))
        return len(new)
