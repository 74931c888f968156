"""A week of spend history for the demo, so that ``/cluster cost`` has something to show the
moment the demo starts.

The rows are made the way sweeps make them (``handlers/spend/runs.py``), from the demo's
clusters as the simulator lists them, observed once an hour over the last seven days: each
compute pool busy on weekdays from 09:00 to 18:00 UTC and idle otherwise, except the demo's
idle cluster, which has been idle all week. They are written only into an empty ledger (a
demo started again on its data folder keeps what it has)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from handlers.spend.runs import HOUR, OpenRun, SpendRun, advance, closing, pools_seen, still_open

if TYPE_CHECKING:
    from bot.app import ClusterbotService

DAYS = 7
ALWAYS_IDLE = "cpu01"  # the demo's idle cluster (its alert appears within a minute)


def busy_at(t: float) -> bool:
    day = time.gmtime(t)
    return day.tm_wday < 5 and 9 <= day.tm_hour < 18


async def seed_week(service: ClusterbotService, now: float | None = None) -> int:
    """Write the week into an empty ledger; returns how many rows were written."""
    now = time.time() if now is None else now
    store = service.store
    if await store.spend_between(0.0, now):
        return 0
    prices = service.core.approvals.prices
    rows: list[SpendRun] = []
    for listing in await service.core.directory.listings():
        for cluster in listing.clusters:
            name, target = cluster.name or "", str(listing.target)
            labels = dict(cluster.labels or {})
            pools = pools_seen(cluster, prices)
            runs: tuple[OpenRun, ...] = ()
            for hour in range(DAYS * 24, 0, -1):
                t = now - hour * HOUR
                idle = cluster.cluster_id == ALWAYS_IDLE or not busy_at(t)
                runs, ended = advance(runs, t, pools, idle=idle, interval=HOUR)
                rows += closing(name, target, labels, ended)
            rows += still_open(name, target, labels, runs, now, HOUR)
    await store.record_spend(rows)
    return len(rows)
