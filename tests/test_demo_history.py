"""The demo starts with a week of spend in its ledger, made the way sweeps make it, so that
``/cluster cost`` shows something real at once."""

from __future__ import annotations

import time
from pathlib import Path

from bot.demo_history import seed_week
from tests.support.demo_stack import demo_stack, text_of


async def test_the_demo_week_is_seeded_once_and_costed(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
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
        shown = await stack.wait(lambda ms: any("Cost of all clusters" in text_of(m) for m in ms))
        [answer] = [m for m in shown if "Cost of all clusters" in text_of(m)]
        said = text_of(answer)
        assert "train01" in said and "cpu01" in said and "total" in said
