"""Socket Mode: the bot connects out over a WebSocket; commands and clicks come as envelopes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.demo import DEMO_TOKEN
from tests.support.demo_stack import demo_stack, text_of
from tests.support.processes import call, replica, sandbox, wait_until

APP_TOKEN = "xapp-1-A0CLUSTERBOT-socket-test"


async def test_commands_and_clicks_over_socket_mode(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        stack.workspace.bot_url = None  # nothing over HTTP: only the socket
        stack.workspace.app_token = APP_TOKEN
        assert stack.service.chat.bolt is not None
        handler = AsyncSocketModeHandler(stack.service.chat.bolt, APP_TOKEN)
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
    with sandbox(tmp_path) as box:
        call(f"{box.url}/sandbox/api/config", {"bot_url": "", "app_token": APP_TOKEN})
        url = f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"
        server = replica(tmp_path, box, "socket", url, SLACK_APP_TOKEN=APP_TOKEN)
        try:
            server.start()
            reply = wait_until(
                lambda: (r := box.command("carol", "/cluster list"))["status"] == 200 and r
            )
            assert reply["status"] == 200
            listed = wait_until(
                lambda: [
                    m
                    for m in call(f"{box.url}/sandbox/api/messages?channel=ml-infra&user=carol")[
                        "messages"
                    ]
                    if "train01" in text_of(m)
                ]
            )
            assert listed
            assert server.terminate() == 0
            assert "connected to Slack in Socket Mode" in server.log.read_text()
        finally:
            server.stop()
