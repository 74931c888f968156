"""Idle sweeps in a child process (bot/sweep_process.py), over real HTTP and a real database:
the child alerts and reports as the service would, "Sweep now" goes through it, and a child
whose service stops or vanishes gives the sweep's lease back and ends."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.store import schema
from bot.sweep_process import LENGTH, SweepProcess, shareable
from handlers.sweep.sweep import SWEEP_LEASE
from tests.support.demo_stack import Stack, demo_stack, text_of
from tests.test_idle_e2e import fresh_report, policy, the_alert


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(
        tmp_path, policy=policy(), sweep_interval=0.3, sweep_process=True
    ) as running:
        yield running


async def lease_of(stack: Stack) -> tuple[str | None, float | None]:
    table = schema.leases
    async with stack.service.store.engine.connect() as connection:
        row = (
            await connection.execute(
                sa.select(table.c.owner, table.c.last_finished).where(table.c.name == SWEEP_LEASE)
            )
        ).first()
    return (row[0], row[1]) if row else (None, None)


async def until_held(stack: Stack, limit: float = 30.0) -> None:
    """Wait until a child holds the sweep's lease (it is sweeping)."""
    deadline = asyncio.get_running_loop().time() + limit
    while (await lease_of(stack))[0] != stack.service.owner:
        assert asyncio.get_running_loop().time() < deadline, "no child took the sweep's lease"
        await asyncio.sleep(0.05)


async def test_the_scheduled_sweep_and_sweep_now_run_in_a_child(stack: Stack) -> None:
    sweeps = stack.service.sweeps
    assert sweeps is not None, "a file database is shared with the child: sweeps go there"
    alert = await the_alert(stack)  # posted by the child, through the Slack stand-in
    assert "cpu: 4 x n2-standard-8" in text_of(alert)
    assert sweeps.started >= 1
    started = sweeps.started
    replaced = await fresh_report(stack)  # "Sweep now": the report of a sweep after the click
    assert "cpu01" in text_of(replaced)
    assert sweeps.started > started
    metrics = await (await stack.session.get(f"{stack.url}/metrics")).text()
    counted = [line for line in metrics.splitlines() if "clusterbot_sweep_seconds_count" in line]
    assert counted and float(counted[0].split()[-1]) >= 2, counted
    assert (await lease_of(stack))[0] is None  # each child handed the lease back


@pytest.mark.parametrize("killed", [False, True])
async def test_a_child_stopped_with_the_service_hands_the_lease_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed: bool
) -> None:
    """Told to stop, the child gives its lease back; one that does not stop in its grace
    (a loaded machine, a hung call) is killed, and the service gives its lease back."""
    if killed:
        monkeypatch.setattr("bot.sweep_process.STOP_GRACE", 0.0)
    async with demo_stack(
        tmp_path, policy=policy(), sweep_interval=3600, sweep_process=True
    ) as stack:
        sweeps = stack.service.sweeps
        assert sweeps is not None
        status, _ = await stack.post("/vertex/_sim/faults", {"latency_ms": 60_000})
        assert status == 201  # the control plane now leaves every call hanging
        # the sweep at start may be hanging already; this one waits for it, then hangs too
        mine = asyncio.get_running_loop().create_task(sweeps.sweep(force=True))
        await until_held(stack)
        children = [sweeps.child]
        # as the service's stop does once its drain time is out
        runs = [mine, *stack.service.jobs.running]
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        assert all(c is not None and c.returncode is not None for c in children)
        if killed:
            assert all(c is not None and c.returncode == -9 for c in children), children
        assert sweeps.child is None
        assert (await lease_of(stack))[0] is None


async def test_a_child_whose_service_vanished_ends(tmp_path: Path) -> None:
    """The service is killed (its end of the child's stdin closes): the child stops sweeping
    and gives the lease back rather than sweep on beside the replica that replaces it."""
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=3600) as stack:
        await until_finished(stack)  # the service's own sweep at start
        await stack.post("/vertex/_sim/faults", {"latency_ms": 60_000})
        await orphan_ends(stack)


async def until_finished(stack: Stack, limit: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while (await lease_of(stack))[1] is None:
        assert asyncio.get_running_loop().time() < deadline, "no sweep finished"
        await asyncio.sleep(0.05)


async def orphan(stack: Stack, grace: float = 10.0) -> asyncio.subprocess.Process:
    """A sweep child started as the service starts one, once it holds the sweep's lease."""
    service = stack.service
    payload = pickle.dumps((service.settings, service.policy, "vanished", True, grace))
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.sweep_child", stdin=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None
    child.stdin.write(len(payload).to_bytes(LENGTH, "big") + payload)
    await child.stdin.drain()
    deadline = asyncio.get_running_loop().time() + 30
    while (await lease_of(stack))[0] != "vanished":
        assert asyncio.get_running_loop().time() < deadline, "the child never swept"
        await asyncio.sleep(0.05)
    return child


async def orphan_ends(stack: Stack) -> None:
    child = await orphan(stack)
    assert child.stdin is not None
    child.stdin.close()
    assert await asyncio.wait_for(child.wait(), 30) != 0
    assert (await lease_of(stack))[0] is None


async def test_a_child_whose_stop_hangs_ends_by_its_own_deadline(tmp_path: Path) -> None:
    """Told to stop twice (SIGTERM as the service stops, then end-of-file as it dies), a
    child that cannot give its lease back (another connection holds the database's write
    lock, and SQLite waits 30 s for it) ends when its grace is out, by SIGALRM, rather than
    hang on; a second SIGTERM would end it at once."""
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=3600) as stack:
        await until_finished(stack)
        await stack.post("/vertex/_sim/faults", {"latency_ms": 60_000})
        child = await orphan(stack, grace=1.0)
        path = stack.service.settings.database_url.split(":///", 1)[1]
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")  # the child's lease write now waits
            child.send_signal(signal.SIGTERM)
            assert child.stdin is not None
            child.stdin.close()
            code = await asyncio.wait_for(child.wait(), 20)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert code == -signal.SIGALRM
        assert (await lease_of(stack))[0] == "vanished"  # it lapses, as a killed child's does


def test_only_a_database_on_disk_or_a_server_is_shared_with_the_child() -> None:
    assert shareable("sqlite+aiosqlite:////var/lib/clusterbot/clusterbot.db")
    assert shareable("postgresql+asyncpg://bot@db/clusterbot")
    assert not shareable("sqlite+aiosqlite://")
    assert not shareable("sqlite+aiosqlite:///:memory:")
    assert not shareable("sqlite+aiosqlite:///file:x?mode=memory&uri=true")


async def test_a_child_that_fails_says_so_in_one_line(stack: Stack) -> None:
    service = stack.service
    broken = SweepProcess(
        service.settings,
        service.policy,
        "broken",
        lock=asyncio.Lock(),
        free=service.store.free_lease,
    )
    broken.settings = service.settings.model_copy(
        update={"database_url": f"sqlite+aiosqlite:///{os.devnull}/nowhere.db"}
    )
    with pytest.raises(Exception, match=r"the sweep's process ended with exit code 1"):
        await broken.sweep(force=True)


@pytest.mark.postgres
def test_a_replica_killed_mid_sweep_leaves_no_error_on_postgresql(tmp_path: Path) -> None:
    """kill -9 a replica while its child sweeps, over and over at different moments of the
    sweep: the child, left alone, stops and ends without logging an error (on PostgreSQL a
    query cut off makes the driver send a cancel, whose connection the child's exit cuts)."""
    import time

    from tests.support.postgres import fresh_database
    from tests.support.processes import replica, sandbox, wait_until

    with sandbox(tmp_path) as box, fresh_database() as url:
        one = replica(tmp_path, box, "one", url, CLUSTERBOT_SWEEP_INTERVAL="1")
        for attempt in range(6):
            one.start()
            until = time.monotonic() + 30
            while "sweep" not in one.log.read_text() and time.monotonic() < until:
                time.sleep(0.1)  # the child's first sweep is under way
            time.sleep(0.3 + attempt * 0.37)  # the moment of the kill, a little later each time
            assert one.process is not None
            one.process.send_signal(signal.SIGKILL)
            one.wait_exit()
            wait_until(lambda: not children_of(one.port), what="the orphaned child to end")
        errors = [line for line in one.log.read_text().splitlines() if '"ERROR"' in line]
        assert errors == []


def children_of(port: int) -> list[int]:
    """Sweep children started by the replica on ``port`` (their environment says which),
    alive or not yet reaped."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes()
            environment = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bot.sweep_child" in command and f"PORT={port}".encode() in environment:
            found.append(int(proc.name))
    return found
