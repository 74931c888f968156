"""`clusterbot serve` as a process, attached to `clusterbot sandbox`: SIGTERM drains before
the socket closes and hands unfinished work back, a restart finishes it, and a start that
cannot reach its database says so in one line."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.demo_stack import ends_and_mentions
from tests.support.processes import (
    Replica,
    Sandbox,
    free_port,
    replica,
    sandbox,
    status_of,
    wait_until,
)


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with sandbox(tmp_path) as running:
        yield running


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"


def request_row(tmp_path: Path) -> tuple[str, str | None, float]:
    with sqlite3.connect(tmp_path / "bot.db") as db:
        state, owner, lease = db.execute(
            "SELECT state, owner, lease_until FROM approval_requests"
        ).fetchone()
    return str(state), owner, float(lease)


def final_posted(tmp_path: Path) -> bool:
    """Lasting state: the operation's end is recorded, and its telling (the thread message
    edited to the end, the card, the mention: owed, done at a tick) is done."""
    with sqlite3.connect(tmp_path / "bot.db") as db:
        rows = db.execute("SELECT final FROM tracked_operations").fetchall()
        told = db.execute("SELECT state FROM owed WHERE kind = 'told'").fetchall()
    ended = bool(rows) and all(final == "posted" for (final,) in rows)
    return ended and bool(told) and all(state == "done" for (state,) in told)


def test_sigterm_drains_and_a_restart_finishes_the_operation(box: Sandbox, tmp_path: Path) -> None:
    box.simulator("config", {"durations": {"update": 8}})
    first = replica(tmp_path, box, "one", sqlite_url(tmp_path))
    second = replica(tmp_path, box, "two", sqlite_url(tmp_path))
    box.point_at(first.events)
    try:
        first.start()
        assert box.command("alice", "/cluster resize train01 a4 3")["status"] == 200
        card = box.card("Resize request: train01")
        box.click("bob", card["ts"], "approve")
        wait_until(lambda: request_row(tmp_path)[0] == "running", what="the operation")
        assert first.terminate() == 0
        log = first.log.read_text()
        assert "shutting down" in log and "clusterbot stopped" in log
        with sqlite3.connect(tmp_path / "bot.db") as db:
            [final] = db.execute("SELECT final FROM tracked_operations").fetchone()
            owner, state = db.execute(
                "SELECT owner, state FROM owed WHERE kind = 'follow'"
            ).fetchone()
        assert (owner, state, final) == (None, "due", None)  # handed back, not finished
        assert not any("done, finished" in t for t in box.thread(card["ts"]))

        box.point_at(second.events)
        second.start()
        wait_until(lambda: final_posted(tmp_path), limit=40)
        assert request_row(tmp_path)[0] == "succeeded"
        thread, mentions = ends_and_mentions(box.thread(card["ts"]))
        assert len(thread) == 1 and "done, finished in" in thread[0]
        assert len(mentions) == 1
        assert len(box.requests("PATCH")) == 1
    finally:
        first.stop()
        second.stop()


def approved_behind_503(box: Sandbox, tmp_path: Path, drain: str, deadline: str) -> Replica:
    """A replica holding an approved resize whose check the control plane answers with 503
    (it retries until ``deadline`` seconds); the caller stops it."""
    first = replica(
        tmp_path,
        box,
        "one",
        sqlite_url(tmp_path),
        CLUSTERBOT_DRAIN_SECONDS=drain,
        CLUSTERBOT_VERTEX_RETRY_DEADLINE=deadline,
    )
    box.point_at(first.events)
    try:
        first.start()
        assert box.command("alice", "/cluster resize train01 a4 3")["status"] == 200
        card = box.card("Resize request: train01")
        box.simulator("faults", {"method": "GET", "path": "train01$", "status": 503})
        box.click("bob", card["ts"], "approve")
        wait_until(lambda: request_row(tmp_path)[:2] == ("approved", "one"))
    except BaseException:
        first.stop()
        raise
    return first


def test_a_second_sigterm_while_draining_ends_it_at_once(box: Sandbox, tmp_path: Path) -> None:
    """Asked to stop again while its drain waits on a control plane that answers 503, serve
    ends at once; the approved request it held goes to another replica when its lease
    lapses, and nothing is changed twice."""
    first = approved_behind_503(box, tmp_path, drain="120", deadline="300")
    try:
        assert first.process is not None
        first.process.send_signal(15)
        wait_until(lambda: "shutting down" in first.log.read_text(), what="the drain")
        first.process.send_signal(15)
        assert first.wait_exit(limit=20) == -15
        assert "clusterbot stopped" not in first.log.read_text()
        state, owner, _ = request_row(tmp_path)
        assert (state, owner) == ("approved", "one")  # held until its lease lapses
        assert box.requests("PATCH") == []
    finally:
        first.stop()


def test_sigterm_during_the_reread_hands_the_request_back(box: Sandbox, tmp_path: Path) -> None:
    """The control plane answers 503 while the change is checked; SIGTERM lets it try for
    the drain time, then hands the request back: not left approved with a dead owner."""
    first = approved_behind_503(box, tmp_path, drain="2", deadline="120")
    try:
        assert first.process is not None
        first.process.send_signal(15)
        # while it drains, the socket is open and Slack is told to come back: 503
        refused = wait_until(
            lambda: box.command("carol", "/cluster list").get("status") == 503, limit=5
        )
        assert refused
        assert first.wait_exit(limit=30) == 0
        state, owner, lease = request_row(tmp_path)
        assert (state, owner, lease) == ("approved", None, 0.0)
        assert box.requests("PATCH") == []

        call_faults = box.simulator("faults", None)  # GET: the faults still in place
        assert call_faults["faults"]
        import urllib.request

        urllib.request.urlopen(
            urllib.request.Request(f"{box.url}/vertex/_sim/faults", method="DELETE"), timeout=10
        ).read()
        second = replica(tmp_path, box, "two", sqlite_url(tmp_path))
        box.point_at(second.events)
        second.start()
        try:
            wait_until(lambda: final_posted(tmp_path), limit=40)
            assert request_row(tmp_path)[0] == "succeeded"
            assert len(box.requests("PATCH")) == 1
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_start_that_cannot_reach_the_database_is_one_json_line(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SLACK_BOT_TOKEN": "xoxb-start",
        "SLACK_SIGNING_SECRET": "start-secret-value",
        "PORT": str(free_port()),
        "CLUSTERBOT_TARGETS": "demo-project/us-central1",
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "static-token-value",
        "CLUSTERBOT_DATABASE_URL": "postgresql+asyncpg://bot:dbsecretpw@127.0.0.1:1/clusterbot",
    }
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    entry = json.loads(lines[0])
    assert entry["severity"] == "ERROR"
    assert (
        "could not start: the database postgresql+asyncpg://127.0.0.1/clusterbot"
        in (entry["message"])
    )
    assert "dbsecretpw" not in result.stderr and "Traceback" not in result.stderr


def test_serve_binds_the_configured_address(box: Sandbox, tmp_path: Path) -> None:
    one: Replica = replica(tmp_path, box, "one", sqlite_url(tmp_path))
    try:
        one.start()
        assert status_of(f"http://127.0.0.1:{one.port}/healthz") == 200
        assert f"listening for Slack on 127.0.0.1:{one.port}" in one.log.read_text()
    finally:
        one.stop()
