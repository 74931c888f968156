"""A week of spend history for the demo, so that ``/cluster cost`` has something to show the
moment the demo starts.

The rows are made the way sweeps make them (``handlers/spend/runs.py``), from the demo's
clusters as the simulator lists them, observed once an hour over the last seven days: each
compute pool busy on weekdays from 09:00 to 18:00 UTC and idle otherwise, except the demo's
idle cluster, which has been idle all week. They are written only into an empty ledger (a
demo started again on its data folder keeps what it has).

The demo's scheduled pool (cpu01's cpu, off Mon-Fri 20:00, on Mon-Fri 08:00 UTC, approved
by bob) slept through the week's nights: its runs are at zero nodes then, and each night's
off and on is a succeeded change asked by the schedule, which is what the cost report's
"saved" and the schedule's own total are read from."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.calendar import CronCalendar
from handlers.changes.resize import apply_sizes, plan_pools
from handlers.costs import PoolSeen, pools_seen
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.schedules.model import Schedule, ScheduleState
from handlers.schedules.times import Weekly
from handlers.spend.runs import (
    HOUR,
    OpenRun,
    SpendRun,
    advance,
    closing,
    still_open,
)

if TYPE_CHECKING:
    from bot.app import ClusterbotService

DAYS = 7
ALWAYS_IDLE = "cpu01"  # the demo's idle cluster (its alert appears within a minute)
SCHEDULED, POOL = "cpu01", "cpu"  # the demo's pool on an off-hours schedule
OFF = Weekly(frozenset(range(5)), 20, 0)  # Mon-Fri 20:00 UTC
ON = Weekly(frozenset(range(5)), 8, 0)  # Mon-Fri 08:00 UTC
SCHEDULE_ID = "sch-demo0001"


def busy_at(t: float) -> bool:
    day = time.gmtime(t)
    return day.tm_wday < 5 and 9 <= day.tm_hour < 18


def nights(now: float) -> list[tuple[float, float]]:
    """The schedule's nights of the week that ended before ``now``: each off and its on."""
    calendar, found = CronCalendar(), list[tuple[float, float]]()
    off = calendar.next_time(OFF, "UTC", now - DAYS * 24 * HOUR)
    while True:
        on = calendar.next_time(ON, "UTC", off)
        if on >= now:
            return found
        found.append((off, on))
        off = calendar.next_time(OFF, "UTC", on)


def _seen(
    pools: tuple[PoolSeen, ...], slept: list[tuple[float, float]], t: float
) -> tuple[PoolSeen, ...]:
    if not any(off <= t < on for off, on in slept):
        return pools
    return tuple(replace(p, nodes=0) if p.pool == POOL else p for p in pools)


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
            scheduled = cluster.cluster_id == SCHEDULED
            slept = nights(now) if scheduled else []
            runs: tuple[OpenRun, ...] = ()
            for hour in range(DAYS * 24, 0, -1):
                t = now - hour * HOUR
                idle = cluster.cluster_id == ALWAYS_IDLE or not busy_at(t)
                seen = _seen(pools, slept, t)
                runs, ended = advance(runs, t, seen, idle=idle, interval=HOUR)
                rows += closing(name, target, labels, ended)
            if scheduled:
                await _schedule(service, cluster, slept, now)
            rows += still_open(name, target, labels, runs, now, HOUR)
    await store.record_spend(rows)
    return len(rows)


async def _schedule(
    service: ClusterbotService, cluster: Any, slept: list[tuple[float, float]], now: float
) -> None:
    """The schedule in force, and the week's nights as the changes it asked."""
    store, prices = service.store, service.core.approvals.prices
    pool = cluster.pool(POOL)
    zero = apply_sizes(cluster, {POOL: (0, 0)})
    down = plan_pools(cluster, {POOL: (0, 0)}, prices)
    up = plan_pools(zero, {POOL: (pool.min_nodes, pool.max_nodes)}, prices)
    for night, (off, on) in enumerate(slept):
        await store.add_request(_done(f"r-demo-off{night}", down, off))
        await store.add_request(_done(f"r-demo-on{night}", up, on))
    freed = prices.freed_hour(cluster, [pool]) or 0.0
    hours = sum(on - off for off, on in slept) / HOUR
    await store.add_schedule(
        Schedule(
            id=SCHEDULE_ID,
            cluster=cluster.name or "",
            pool=POOL,
            off=OFF,
            on=ON,
            zone="UTC",
            requested_by="U0ALICE",
            channel="C0MLINFRA",
            created_at=now - DAYS * 24 * HOUR,
            request_id="r-demo-schedule",
            state=ScheduleState.ACTIVE,
            approved_by="U0BOB",
            next_off=CronCalendar().next_time(OFF, "UTC", now),
            freed_hour=freed,
            saved=freed * hours,
            saved_hours=hours,
        )
    )


def _done(request_id: str, plan: Any, at: float) -> ApprovalRequest:
    return ApprovalRequest(
        id=request_id,
        plan=plan,
        requester=f"schedule:{SCHEDULE_ID}",
        channel="C0MLINFRA",
        created_at=at,
        expires_at=at + HOUR,
        state=RequestState.SUCCEEDED,
        origin=Origin.SCHEDULE,
        decided_by="U0BOB",
        decided_at=at,
        finished_at=at + 60,
        outcome="done",
    )
