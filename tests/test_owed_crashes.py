"""Kill `clusterbot serve` at each named step of the paths that tell rather than change, the
weekly digest and an idle alert (found in the code: tests/support/steps.py), restart it, and
check that each is said once: one digest with one chart, one alert; nothing owed left undone.
On SQLite and on PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.store import Store
from tests.support.faults import crashed_then_restarted, undone
from tests.support.postgres import execute, query
from tests.support.processes import POLICY, Sandbox, replica, sandbox, wait_until
from tests.support.steps import steps_of
from tests.test_crash_points import database

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
QUICK_IDLE = POLICY + "[idle]\nidle_after_minutes = 0.05\n"


def migrated(url: str) -> None:
    import asyncio

    async def run() -> None:
        store = Store.from_url(url)
        await store.migrate()
        await store.close()

    asyncio.run(run())


def watched_an_hour(url: str) -> str:
    """clusterbot has watched spend for an hour; a daily digest was due two minutes ago (one
    firing): its cron."""
    now = time.time()
    execute(
        url,
        'INSERT INTO spend_runs (cluster, pool, start, "end", nodes, node_hour, idle, '
        "target, labels) VALUES (:c, 'a4', :s, :e, 2, 53.0, false, "
        "'demo-project/us-central1', '[]')",
        c=TRAIN01,
        s=now - 3600,
        e=now - 60,
    )
    fired = time.gmtime(now - 120)
    return f"{fired.tm_min} {fired.tm_hour} * * *"


def digests(box: Sandbox) -> list[dict[str, object]]:
    return [m for m in box.messages() if str(m["text"]).startswith("weekly cost digest")]


def charts(box: Sandbox) -> list[dict[str, object]]:
    return [m for m in box.messages() if m.get("files")]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", steps_of("digest"))
def test_a_crash_at_any_step_of_a_digest_says_it_once(
    point: str, kind: str, tmp_path: Path
) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        migrated(url)
        cron = watched_an_hour(url)
        one = replica(
            tmp_path, box, "one", url, CLUSTERBOT_DIGEST_CRON=cron, CLUSTERBOT_DEBUG_CRASH_AT=point
        )
        box.point_at(one.events)
        try:
            one.start(may_exit=True)
            crashed_then_restarted(one, point)
            wait_until(lambda: digests(box) and not undone(url), limit=120, what="the digest")
        finally:
            one.stop()
        assert len(digests(box)) == 1  # said once, whatever died
        shared = charts(box)
        if point == "digest-chart-shared":  # the share may have gone: not sent again, said so
            assert len(shared) == 1
            notes = [m for m in box.messages() if "stopped while sharing it" in str(m["blocks"])]
            assert len(notes) == 1
        else:
            assert len(shared) == 1


def last_sweep(url: str) -> float | None:
    """When the last sweep saved its report, or None before the first has."""
    rows = query(url, "SELECT at FROM sweep_reports WHERE name = 'latest'")
    return float(rows[0][0]) if rows else None


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", steps_of("idle-alert"))
def test_a_crash_at_any_step_of_an_idle_alert_alerts_once(
    point: str, kind: str, tmp_path: Path
) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        one = replica(
            tmp_path,
            box,
            "one",
            url,
            QUICK_IDLE,
            CLUSTERBOT_SWEEP_INTERVAL="2",
            CLUSTERBOT_DEBUG_CRASH_AT=point,
        )
        box.point_at(one.events)

        def alerts() -> list[dict[str, object]]:
            return [m for m in box.messages() if str(m["text"]).startswith("Idle cluster cpu01:")]

        try:
            one.start(may_exit=True)
            crashed_then_restarted(one, point)
            # the alert is posted by the sweep's listeners, before the sweep saves its report
            wait_until(
                lambda: alerts() and not undone(url) and last_sweep(url) is not None,
                limit=120,
                what="the idle alert and its sweep's report",
            )
            # three sweeps more (a sweep a couple of seconds): still one alert
            swept = last_sweep(url) or 0.0
            wait_until(
                lambda: (last_sweep(url) or 0.0) > swept + 5, limit=60, what="three more sweeps"
            )
        finally:
            one.stop()
        assert len(alerts()) == 1
