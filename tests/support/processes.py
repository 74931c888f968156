"""`clusterbot sandbox` and `clusterbot serve` as real processes on loopback ports, and the
calls a test makes to them. Waits poll lasting state (messages, request logs, rows)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.demo_stack import text_of
from tests.support.ports import free_port

POLICY = '[roles]\noperator = ["U0ALICE"]\napprover = ["U0BOB"]\n'


def call(url: str, body: Any = None, method: str | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method=method
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        text = reply.read()
    return json.loads(text) if text else None


def status_of(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return None


START_LIMIT = 90.0  # seconds a replica may take to be ready


def wait_until(check: Callable[[], Any], limit: float = 30.0, what: str = "lasting state") -> Any:
    end = time.monotonic() + limit
    while True:
        try:
            result = check()
        except OSError:
            result = None
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@dataclass
class Sandbox:
    """`clusterbot sandbox`: the Slack stand-in, and the simulator under /vertex."""

    url: str
    process: subprocess.Popen[bytes]

    @property
    def config(self) -> dict[str, Any]:
        return dict(call(f"{self.url}/sandbox/api/config"))

    def point_at(self, *bot_urls: str) -> None:
        call(f"{self.url}/sandbox/api/config", {"bot_url": list(bot_urls)})

    def command(self, user: str, text: str, channel: str = "ml-infra") -> dict[str, Any]:
        body = {"user": user, "channel": channel, "text": text}
        return dict(call(f"{self.url}/sandbox/api/command", body))

    def click(self, user: str, ts: str, action: str, channel: str = "ml-infra") -> Any:
        body = {"user": user, "channel": channel, "ts": ts, "action_id": action}
        return call(f"{self.url}/sandbox/api/click", body)

    def messages(self, channel: str = "ml-infra") -> list[dict[str, Any]]:
        return list(call(f"{self.url}/sandbox/api/messages?channel={channel}")["messages"])

    def card(self, prefix: str) -> dict[str, Any]:
        return dict(
            wait_until(
                lambda: next((m for m in self.messages() if m["text"].startswith(prefix)), None),
                what=f"a message starting {prefix!r}",
            )
        )

    def thread(self, card_ts: str) -> list[str]:
        return [text_of(m) for m in self.messages() if m["thread_ts"] == card_ts]

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        query = f"?method={method}" if method else ""
        return list(call(f"{self.url}/vertex/_sim/requests{query}")["requests"])

    def simulator(self, path: str, body: Any) -> Any:
        return call(f"{self.url}/vertex/_sim/{path}", body)


@contextmanager
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    port = free_port()
    log = (tmp_path / "sandbox.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "sandbox", "--port", str(port)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: call(f"{url}/sandbox/api/config"), what="the sandbox")
        yield Sandbox(url, process)
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


@dataclass
class Replica:
    """One `clusterbot serve` process attached to a sandbox."""

    name: str
    port: int
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    exits: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> str:
        return f"{self.url}/slack/events"

    def start(
        self, *, may_exit: bool = False, paused: Path | None = None, **extra_env: str
    ) -> Replica:
        """Start it and wait until it is ready; with ``may_exit``, one that ends on its own
        before then (at a crash point its first periodic run reaches) is not a failure; with
        ``paused``, one that stands still at its pause point before then (the marker file is
        there) is not either."""
        env = {**self.env, **extra_env}
        with self.log.open("a") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bot", "serve"], env=env, stdout=log, stderr=log
            )
        wait_until(
            lambda: (
                self.process is not None
                and (
                    self.process.poll() is not None
                    or (paused is not None and paused.exists())
                    or status_of(f"{self.url}/readyz") == 200
                )
            ),
            # a process's start (imports, migrations, recovery) on a 2-core machine running two
            # suites at once: a restart after a crash point took over 30 s
            limit=START_LIMIT,
            what=f"{self.name} to be ready",
        )
        assert may_exit or self.process.poll() is None, self.log.read_text()[-3000:]
        return self

    def wait_exit(self, limit: float = 60.0) -> int:
        assert self.process is not None
        code = self.process.wait(timeout=limit)
        self.exits.append(code)
        return code

    def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def replica(
    tmp_path: Path,
    box: Sandbox,
    name: str,
    database_url: str,
    policy_text: str = POLICY,
    **settings: str,
) -> Replica:
    """A replica's environment: the sandbox's token and secret, fast ticks for tests."""
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text)
    config = box.config
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "SLACK_BOT_TOKEN": config["bot_token"],
        "SLACK_SIGNING_SECRET": config["signing_secret"],
        "PORT": str(port),
        "CLUSTERBOT_HOST": "127.0.0.1",
        "CLUSTERBOT_REPLICA_ID": name,
        "CLUSTERBOT_TARGETS": "demo-project/us-central1,demo-project/europe-west4",
        "CLUSTERBOT_SLACK_API_URL": f"{box.url}/api/",
        "CLUSTERBOT_VERTEX_API_URL": f"{box.url}/vertex",
        "CLUSTERBOT_MONITORING_API_URL": f"{box.url}/vertex",
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "serve-test-token",
        "CLUSTERBOT_VERTEX_RETRY_DEADLINE": "5",
        # short calls, so that what a killed process may still have in flight is over soon
        "CLUSTERBOT_VERTEX_REQUEST_TIMEOUT": "10",
        "CLUSTERBOT_SLACK_TIMEOUT": "5",
        "CLUSTERBOT_DATABASE_URL": database_url,
        "CLUSTERBOT_POLICY_FILE": str(policy),
        "CLUSTERBOT_ALERT_CHANNEL": "C0MLINFRA",
        "CLUSTERBOT_SWEEP_INTERVAL": "3600",
        **settings,
    }
    return Replica(name, port, env, tmp_path / f"{name}.log")
