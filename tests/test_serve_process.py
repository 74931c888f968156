"""`clusterbot serve` as a process: configured from the environment, drained by SIGTERM.

The demo process hosts the Slack stand-in and the simulator; the stand-in is pointed at the
served bot, so the whole path is real processes talking HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo import DEMO_TOKEN
from tests.demo_stack import free_port, text_of

SECRET = "serve-process-signing-secret"


def call(url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def wait_until(check: Any, limit: float = 30.0) -> Any:
    end = time.monotonic() + limit
    while True:
        try:
            result = check()
        except OSError:
            result = None
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.2)


@pytest.fixture
def stand_ins(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "demo.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "demo", "--port", str(port)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: call(f"{url}/healthz"))
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def serve(tmp_path: Path, stand_in: str, port: int, name: str) -> subprocess.Popen[bytes]:
    policy = tmp_path / "policy.toml"
    policy.write_text('[roles]\noperator = ["U0ALICE"]\napprover = ["U0BOB"]\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SLACK_BOT_TOKEN": DEMO_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "PORT": str(port),
        "CLUSTERBOT_TARGETS": "demo-project/us-central1,demo-project/europe-west4",
        "CLUSTERBOT_SLACK_API_URL": f"{stand_in}/api/",
        "CLUSTERBOT_VERTEX_API_URL": f"{stand_in}/vertex",
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "serve-test-token",
        "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        "CLUSTERBOT_POLICY_FILE": str(policy),
    }
    with (tmp_path / f"{name}.log").open("w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"], env=env, stdout=log, stderr=log
        )


def thread_texts(stand_in: str, card_ts: str) -> list[str]:
    messages = call(f"{stand_in}/sandbox/api/messages?channel=ml-infra")["messages"]
    return [text_of(m) for m in messages if m["thread_ts"] == card_ts]


def test_sigterm_drains_and_a_restart_finishes_the_operation(
    stand_ins: str, tmp_path: Path
) -> None:
    port = free_port()
    call(
        f"{stand_ins}/sandbox/api/config",
        {"bot_url": f"http://127.0.0.1:{port}/slack/events", "signing_secret": SECRET},
    )
    call(f"{stand_ins}/vertex/_sim/config", {"durations": {"update": 8}})
    first = serve(tmp_path, stand_ins, port, "first")
    try:
        wait_until(lambda: call(f"http://127.0.0.1:{port}/readyz")["database"])
        reply = call(
            f"{stand_ins}/sandbox/api/command",
            {"user": "alice", "channel": "ml-infra", "text": "/cluster resize train01 a4 3"},
        )
        assert reply["status"] == 200
        card = wait_until(
            lambda: next(
                (
                    m
                    for m in call(f"{stand_ins}/sandbox/api/messages?channel=ml-infra")["messages"]
                    if m["text"].startswith("Resize request: train01")
                ),
                None,
            )
        )
        call(
            f"{stand_ins}/sandbox/api/click",
            {"user": "bob", "channel": "ml-infra", "ts": card["ts"], "action_id": "approve"},
        )
        wait_until(lambda: thread_texts(stand_ins, card["ts"]))  # progress is showing
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
    finally:
        if first.poll() is None:
            first.kill()
    log = (tmp_path / "first.log").read_text()
    assert "shutting down" in log and "clusterbot stopped" in log
    with sqlite3.connect(tmp_path / "bot.db") as db:
        owner, final = db.execute("SELECT owner, final FROM tracked_operations").fetchone()
    assert owner is None and final is None  # handed back, not finished
    assert not any("done, finished in" in t for t in thread_texts(stand_ins, card["ts"]))

    second = serve(tmp_path, stand_ins, port, "second")
    try:
        wait_until(
            lambda: any("done, finished in" in t for t in thread_texts(stand_ins, card["ts"])),
            limit=40,
        )
        time.sleep(1.5)
        finals = [t for t in thread_texts(stand_ins, card["ts"]) if "done, finished in" in t]
        assert len(finals) == 1
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
