"""The demo starts with a week of spend in its ledger, made the way sweeps make it, so that
``/cluster cost`` shows something real at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bot.demo_history import nights, seed_week
from handlers.costs import money
from tests.support.demo_stack import demo_stack, text_of


async def answered(stack: Any, heading: str) -> str:
    """The report's text once it is there (a slow one first says "Working on it…", then is
    replaced), not the chart shared beside it."""

    def report(ms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in ms if heading in text_of(m) and not m.get("files")]

    [answer] = report(await stack.wait(report))
    return text_of(answer)


@pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "in-its-process"])
async def test_the_demo_week_is_seeded_once_and_costed(tmp_path: Path, elsewhere: bool) -> None:
    """The report made on the demo's own loop, or in the report's process as serve makes it."""
    async with demo_stack(tmp_path, report_process=elsewhere) as stack:
        now = time.time()
        written = await seed_week(stack.service, now)
        assert written > 0
        assert await seed_week(stack.service, now) == 0  # never twice into one ledger
        runs = await stack.service.store.spend_between(now - 7 * 86400, now)
        assert {r.cluster.rsplit("/", 1)[-1] for r in runs} >= {"train01", "cpu01"}
        assert min(r.start for r in runs) >= now - 7 * 86400 - 1
        cpu01 = [r for r in runs if r.cluster.endswith("/cpu01") and r.nodes and r.pool != "login"]
        assert cpu01 and all(r.idle for r in cpu01)  # the demo's idle cluster, all week
        await stack.command("carol", "/cluster cost since 7d")

        def answers(ms: list[dict[str, Any]]) -> list[dict[str, Any]]:
            # the reply itself, not the chart shared beside it (either may arrive first)
            return [m for m in ms if "Cost of all clusters" in text_of(m) and not m.get("files")]

        [answer] = answers(await stack.wait(answers))
        said = text_of(answer)
        assert "train01" in said and "cpu01" in said and "total" in said
        # the chart and its numbers, shared with files.uploadV2 where it was asked
        shared = await stack.wait(lambda ms: any(m.get("files") for m in ms))
        [message] = [m for m in shared if m.get("files")]
        assert message["channel"] == answer["channel"] and "saved" in message["text"]
        names = [f["name"] for f in message["files"]]
        assert names == ["cost-all-clusters-7d.png", "cost-all-clusters-7d.csv"]
        picture = message["files"][0]
        assert picture["mimetype"] == "image/png" and picture["filetype"] == "png"
        async with stack.session.get(f"{stack.url}/sandbox/api/files/{picture['id']}") as got:
            assert got.content_type == "image/png"
            assert (await got.read()).startswith(b"\x89PNG")
        reports = stack.service.reports
        assert (reports is not None and reports.started == 1) == elsewhere


async def test_the_demo_has_a_schedule_that_slept_through_the_week(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        now = time.time()
        assert await seed_week(stack.service, now) > 0
        [schedule] = await stack.service.store.schedules()
        assert schedule.scope == "cpu01 / cpu" and schedule.approved_by == "U0BOB"
        assert schedule.next_off is not None and schedule.next_off > now
        slept = nights(now)
        assert len(slept) >= 4  # four or five weeknights and a weekend, ended
        assert schedule.saved_hours == pytest.approx(sum(on - off for off, on in slept) / 3600)
        # what the cost report reads as saved: the nights' changes, asked by the schedule
        runs = await stack.service.store.spend_between(now - 7 * 86400, now)
        cpu = [r for r in runs if r.cluster.endswith("/cpu01") and r.pool == "cpu"]
        assert any(r.nodes == 0 for r in cpu) and any(r.nodes == 4 for r in cpu)
        await stack.command("carol", "/cluster schedules")
        listing = await stack.wait(lambda ms: any("sch-demo0001" in text_of(m) for m in ms))
        said = next(text_of(m) for m in listing if "sch-demo0001" in text_of(m))
        assert "cpu01 / cpu" in said and "Mon-Fri 20:00" in said
        assert schedule.saved > 0
        saved = money(schedule.saved, per_hour=False)
        assert saved in said
        await stack.command("carol", "/cluster cost cpu01 since 7d")
        shown = await stack.wait(lambda ms: any("Cost of cpu01" in text_of(m) for m in ms))
        cost = next(text_of(m) for m in shown if "Cost of cpu01" in text_of(m))
        # the report's saving is read from the nights' changes: the schedule's own total
        assert saved in cost, cost


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        ("file_uploads_disabled", "file uploads are turned off in this workspace"),
        ("file_uploads_except_images_disabled", "only images may be uploaded in this workspace"),
    ],
)
async def test_a_workspace_that_forbids_uploads_is_told_so(
    tmp_path: Path, policy: str, words: str
) -> None:
    async with demo_stack(tmp_path) as stack:
        await seed_week(stack.service, time.time())
        status, _ = await stack.post("/sandbox/api/config", {"upload_policy": policy})
        assert status == 200
        await stack.command("carol", "/cluster cost since 7d")
        said = await answered(stack, "Cost of all clusters")
        assert "train01" in said  # the table is there either way
        assert f"The chart could not be shared here ({policy}): {words}, a workspace admin" in said
        assert "try again" not in said
        assert not [m for m in await stack.messages() if m.get("files")]


async def test_days_before_clusterbot_watched_are_not_counted_as_zero(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        await seed_week(stack.service, time.time())
        await stack.command("carol", "/cluster cost since 30d by label team")
        said = await answered(stack, "Cost of all clusters, last 30d")
        assert "clusterbot watched 8 of these 31 days (from " in said
        assert "the 23 days it did not watch are left out, not counted as $0" in said
        shared = await stack.wait(lambda ms: any(m.get("files") for m in ms))
        [message] = [m for m in shared if m.get("files")]
        csv = next(f for f in message["files"] if f["name"].endswith(".csv"))
        async with stack.session.get(f"{stack.url}/sandbox/api/files/{csv['id']}") as got:
            rows = (await got.text()).splitlines()
        assert rows[0].startswith("day,watched,spend_usd,idle_usd,saved_usd,team=")
        assert sum(r.split(",")[1] == "no" for r in rows[1:]) == 23
        assert all(r.endswith(",,,") for r in rows[1:] if r.split(",")[1] == "no")
