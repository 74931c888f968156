"""Kill `clusterbot serve` at each step of a schedule's night (its "off", then its "on"),
or stop it with SIGTERM while the night's resize runs, restart it, and check that the night is
finished, not lost or done twice: one PATCH for the off and one for the on, the pools back at
exactly their bounds. On SQLite and on PostgreSQL.

The schedule is stored as an approved one is (in force, approved by U0BOB), due now.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.jobs import CRASH_EXIT
from bot.store import Store
from handlers.schedules.model import Schedule, ScheduleState
from handlers.schedules.times import Weekly
from tests.support.faults import undone
from tests.support.postgres import execute, query
from tests.support.processes import Replica, Sandbox, replica, sandbox, wait_until
from tests.support.steps import night_steps
from tests.test_crash_points import database

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
# every named step of a night, found in the code (tests/support/steps.py), the change's
# PATCH, and a SIGTERM while the night's resize runs
NIGHTS = [*night_steps(), ("off", "after-patch"), ("off", "sigterm"), ("on", "sigterm")]


def in_force(url: str, off_in: float = -1.0) -> None:
    """The schedule as its approval left it, with its first off due now (or ``off_in``
    seconds from now)."""
    now = time.time()
    hour = time.gmtime(now + 6 * 3600).tm_hour

    async def run() -> None:
        store = Store.from_url(url)
        await store.migrate()
        await store.add_schedule(
            Schedule(
                id="sch-crash",
                cluster=CPU01,
                pool=None,
                off=Weekly(frozenset(range(7)), (hour + 12) % 24, 0),
                on=Weekly(frozenset(range(7)), hour, 0),
                zone="UTC",
                requested_by="U0ALICE",
                channel="C0MLINFRA",
                created_at=now,
                request_id="r-approved",
                state=ScheduleState.ACTIVE,
                approved_by="U0BOB",
                next_off=now + off_in,
            )
        )
        await store.close()

    asyncio.run(run())


def phase(url: str) -> str:
    return str(query(url, "SELECT phase FROM schedules WHERE id = 'sch-crash'")[0][0])


def cpu_bounds(box: Sandbox) -> tuple[int, int]:
    """The cpu pool's bounds as the last PATCH sent them (proto3 JSON omits a zero)."""
    body = box.requests("PATCH")[-1]["body"]
    pool = next(p for p in body.get("nodePools", body.get("node_pools", [])) if p["id"] == "cpu")
    spec = pool.get("scalingSpec", pool.get("scaling_spec", {}))
    low = spec.get("minNodeCount", spec.get("min_node_count", 0))
    return int(low), int(spec.get("maxNodeCount", spec.get("max_node_count", 0)))


def through(one: Replica, box: Sandbox, point: str, patches_before: int) -> None:
    """Run until the process ends itself at ``point`` (or is stopped mid-resize, for
    "sigterm"), then start it again."""
    if point == "sigterm":
        one.start()
        wait_until(lambda: len(box.requests("PATCH")) > patches_before, what="the resize")
        assert one.terminate() == 0  # a stop lets the night's work be taken up again
    else:
        one.start(may_exit=True, CLUSTERBOT_DEBUG_CRASH_AT=point)  # it may end before ready
        assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
        assert f"exiting at {point}" in one.log.read_text()
    one.start()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize(("night", "point"), NIGHTS)
def test_a_crash_at_any_step_of_a_night_loses_nothing(
    night: str, point: str, kind: str, tmp_path: Path
) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        box.simulator("config", {"durations": {"update": 2}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # nothing runs tonight
        in_force(url)
        one = replica(tmp_path, box, "one", url, CLUSTERBOT_SCHEDULE_CHECK_SECONDS="0.3")
        box.point_at(one.events)
        try:
            if night == "off":
                through(one, box, point, 0)
            else:
                one.start()
            wait_until(lambda: phase(url) == "asleep", limit=60, what=f"asleep after {point}")
            assert len(box.requests("PATCH")) == 1  # sent once, whatever died
            assert cpu_bounds(box) == (0, 0)
            if night == "on":
                one.stop()
                execute(url, "UPDATE schedules SET next_on = :now", now=time.time() - 1)
                through(one, box, point, 1)
                wait_until(lambda: phase(url) == "awake", limit=60, what=f"awake after {point}")
                assert len(box.requests("PATCH")) == 2
                assert cpu_bounds(box) == (4, 4)  # exactly the bounds it had
            # nothing owed is left undone: a card or a line cut off is finished, not lost
            wait_until(lambda: not undone(url), limit=120, what=f"what is owed after {point}")
        finally:
            one.stop()
        states = sorted(s for (s,) in query(url, "SELECT state FROM approval_requests"))
        asked = 1 if night == "off" else 2
        assert states == ["succeeded"] * asked
        # each night's card once, even when a crash cut it off between its post and its record
        cards = [m for m in box.messages() if m["text"].startswith("Resize request: cpu01")]
        assert len(cards) == asked, [m["text"] for m in cards]
        lines = [m["text"] for m in box.messages() if m["text"].startswith("schedule sch-crash")]
        said = [t for t in box.messages() if "asleep: cpu at zero nodes" in str(t["blocks"])]
        assert len(said) == 1, lines  # the thread's line once, whatever died
        if night == "on":
            back = [t for t in box.messages() if "back on: cpu 4:4" in str(t["blocks"])]
            assert len(back) == 1, lines
        # each night's roll-up in the channel once, its last drawing saying how it ended
        rollups = [m["text"] for m in box.messages() if m["text"].startswith("Schedules: ")]
        assert rollups == ["Schedules: 1 night asked · 1 done"] * asked, rollups
