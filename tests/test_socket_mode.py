"""Socket Mode: the bot connects out over a WebSocket; commands and clicks come as envelopes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.demo import DEMO_TOKEN
from tests.demo_stack import demo_stack, free_port, text_of
from tests.test_serve_process import call, wait_until

APP_TOKEN = "xapp-1-A0CLUSTERBOT-socket-test"


async def test_commands_and_clicks_over_socket_mode(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        stack.workspace.bot_url = None  # nothing over HTTP: only the socket
        stack.workspace.app_token = APP_TOKEN
        assert stack.service.bolt is not None
        handler = AsyncSocketModeHandler(stack.service.bolt, APP_TOKEN)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            for _ in range(100):
                if stack.workspace.sockets:
                    break
                await asyncio.sleep(0.05)
            help_text = text_of(await stack.reply_to("carol", "/cluster help"))
            assert "resize CLUSTER POOL N" in help_text
            card = await stack.card("alice", "/cluster resize train01 a4 3")
            await stack.click("bob", card["ts"], "approve")
            await stack.wait(
                lambda ms: any(
                    "done, finished in" in text_of(m) for m in ms if m["thread_ts"] == card["ts"]
                ),
                limit=20,
            )
            assert len(await stack.requests("PATCH")) == 1
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]


async def test_socket_mode_needs_the_app_token(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        stack.workspace.app_token = APP_TOKEN
        async with stack.session.post(
            f"{stack.url}/api/apps.connections.open",
            headers={"Authorization": f"Bearer {DEMO_TOKEN}"},  # the bot token will not do
        ) as reply:
            assert (await reply.json())["error"] == "invalid_auth"
        async with stack.session.post(
            f"{stack.url}/api/apps.connections.open",
            headers={"Authorization": f"Bearer {APP_TOKEN}"},
        ) as reply:
            assert (await reply.json())["url"].startswith("ws://127.0.0.1:")


def test_serve_in_socket_mode(tmp_path: Path) -> None:
    port, health = free_port(), free_port()
    log = (tmp_path / "demo.log").open("w")
    demo = subprocess.Popen(
        [sys.executable, "-m", "bot", "demo", "--port", str(port)], stdout=log, stderr=log
    )
    stand_in = f"http://127.0.0.1:{port}"
    serve = None
    try:
        wait_until(lambda: call(f"{stand_in}/healthz"))
        call(f"{stand_in}/sandbox/api/config", {"bot_url": "", "app_token": APP_TOKEN})
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "SLACK_BOT_TOKEN": DEMO_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "PORT": str(health),
            "CLUSTERBOT_TARGETS": "demo-project/us-central1",
            "CLUSTERBOT_SLACK_API_URL": f"{stand_in}/api/",
            "CLUSTERBOT_VERTEX_API_URL": f"{stand_in}/vertex",
            "CLUSTERBOT_VERTEX_STATIC_TOKEN": "socket-test",
            "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        }
        with (tmp_path / "serve.log").open("w") as serve_log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "bot", "serve"], env=env, stdout=serve_log, stderr=serve_log
            )
        wait_until(lambda: call(f"http://127.0.0.1:{health}/readyz")["scheduler"])
        reply = wait_until(
            lambda: (
                (
                    r := call(
                        f"{stand_in}/sandbox/api/command",
                        {"user": "carol", "channel": "ml-infra", "text": "/cluster list"},
                    )
                )["status"]
                == 200
                and r
            )
        )
        assert reply["status"] == 200
        listed = wait_until(
            lambda: [
                m
                for m in call(f"{stand_in}/sandbox/api/messages?channel=ml-infra&user=carol")[
                    "messages"
                ]
                if "train01" in text_of(m)
            ]
        )
        assert listed
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        assert "connected to Slack in Socket Mode" in (tmp_path / "serve.log").read_text()
    finally:
        if serve is not None and serve.poll() is None:
            serve.kill()
        demo.terminate()
        demo.wait(timeout=20)
        log.close()
