"""A sweep that cannot read its targets is loud: a WARNING naming each target and why, a
metric from the first such sweep, `/readyz` saying so once it has lasted a whole interval, and
`clusterbot sweep --once` failing."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from handlers.sweep.reach import Reach
from tests.support.demo_stack import Stack, demo_stack

TARGETS = ("demo-project/europe-west4", "demo-project/us-central1")


def test_blind_is_when_no_target_at_all_was_read() -> None:
    start = Reach(0.0, 0)
    one_bad = start.then(100.0, 2, {"p/a": "denied"})
    assert not one_bad.blind and one_bad.problem(10_000.0, 900.0) is None
    blind = one_bad.then(200.0, 2, {"p/a": "denied", "p/b": "denied"})
    assert blind.blind and blind.blind_since == 200.0
    still = blind.then(1100.0, 2, {"p/a": "denied", "p/b": "unreachable"})
    assert still.blind_since == 200.0  # the run of blind sweeps began at the first
    assert still.problem(1099.0, 900.0) is None  # not yet a whole interval
    assert still.problem(1100.0, 900.0) == (
        "the idle sweep has not read any of the 2 targets for 15 min "
        "(p/a: denied; p/b: unreachable)"
    )
    healed = still.then(1200.0, 2, {"p/a": "denied"})
    assert healed.blind_since is None and healed.problem(99_999.0, 900.0) is None
    assert Reach.from_json(still.to_json()) == still


def test_one_target_of_one_and_many_reasons_read_well() -> None:
    alone = Reach(0.0, 0).then(0.0, 1, {"p/a": "denied"})
    assert (
        alone.problem(3600.0, 900.0)
        == "the idle sweep has not read the target for 1 h (p/a: denied)"
    )
    many = {f"p/r{i}": "denied" for i in range(5)}
    problem = Reach(0.0, 0).then(0.0, 5, many).problem(900.0, 900.0)
    assert problem is not None and problem.endswith("p/r2: denied; and 2 more)")


async def swept(stack: Stack) -> None:
    """A sweep made now, whatever the one at start is doing."""
    for _ in range(200):
        if await stack.service.sweep(force=True) is not None:
            return
        await stack.service.core.sweeper.lock.acquire()
        stack.service.core.sweeper.lock.release()
    raise AssertionError("no sweep could be made")


async def ready(stack: Stack) -> tuple[int, dict[str, object]]:
    async with stack.session.get(f"{stack.url}/readyz") as reply:
        return reply.status, dict(await reply.json())


async def metrics(stack: Stack) -> str:
    async with stack.session.get(f"{stack.url}/metrics") as reply:
        return await reply.text()


async def test_a_sweep_that_reads_no_target_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    denied = (
        "Permission 'aiplatform.modelDevelopmentClusters.list' denied on resource "
        "'//aiplatform.googleapis.com/projects/demo-project/locations/x' (or it may not exist)."
    )
    async with demo_stack(tmp_path, sweep_interval=3600) as stack:
        stack.simulator.add_fault(
            {"method": "GET", "path": "modelDevelopmentClusters$", "status": 403, "message": denied}
        )
        caplog.set_level(logging.WARNING)
        await swept(stack)
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        for target in TARGETS:
            assert any(
                m.startswith(f"idle sweep: cannot read target {target}: ") and "denied" in m
                for m in warned
            ), warned
        assert any(m.startswith("idle sweep: 2 of 2 targets could not be read") for m in warned)
        text = await metrics(stack)
        assert "clusterbot_sweep_unreadable_targets 2.0" in text
        for target in TARGETS:
            # one for each sweep that failed it: this one, and the one at start if it came late
            count = re.search(rf'_target_failures_total{{target="{target}"}} (\d+)\.0', text)
            assert count is not None and int(count[1]) >= 1
        status, body = await ready(stack)
        assert status == 200 and body["targets"] is True  # not yet a whole interval
        started = time.time()
        stack.service.clock = lambda: started + 3600
        status, body = await ready(stack)
        assert status == 200  # said, not taken out of the load balancer
        problem = str(body["targets"])
        assert problem.startswith("the idle sweep has not read any of the 2 targets for 1 h (")
        assert "demo-project/europe-west4: " in problem and "denied" in problem
        stack.simulator.faults.clear()
        await swept(stack)
        status, body = await ready(stack)
        assert body["targets"] is True
        assert "clusterbot_sweep_unreadable_targets 0.0" in await metrics(stack)


def test_sweep_once_fails_when_it_reads_no_target(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.processes import replica, sandbox

    with sandbox(tmp_path) as box:
        box.simulator("faults", {"method": "GET", "path": "Clusters$", "status": 403})
        env = replica(tmp_path, box, "cron", f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}").env
        result = subprocess.run(
            [sys.executable, "-m", "bot", "sweep", "--once"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("clusterbot sweep: no target could be read (demo-project/us-central1: ")
    assert "idle sweep: cannot read target demo-project/europe-west4" in result.stderr
