"""A running fake Slack and a Bolt app behind it, both on loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from bot.sandbox.slack import Workspace, create_app
from tests.support.slack_testbot import build_test_bot

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


@dataclass
class SlackStack:
    url: str
    workspace: Workspace
    session: aiohttp.ClientSession

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(f"{self.url}{path}", json=body) as reply:
            return reply.status, await reply.json()

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(f"{self.url}{path}") as reply:
            return reply.status, await reply.json()

    async def command(self, user: str, text: str, channel: str = "ml-infra") -> dict[str, Any]:
        status, body = await self.post(
            "/sandbox/api/command", {"user": user, "channel": channel, "text": text}
        )
        assert status == 200, body
        return dict(body)

    async def messages(self, channel: str = "ml-infra", user: str | None = None) -> list[Any]:
        query = f"channel={channel}" + (f"&user={user}" if user else "")
        status, body = await self.get(f"/sandbox/api/messages?{query}")
        assert status == 200, body
        return list(body["messages"])


@asynccontextmanager
async def slack_stack(with_bot: bool = True) -> AsyncIterator[SlackStack]:
    workspace = Workspace(signing_secret=SECRET, bot_token=TOKEN)
    slack = TestServer(create_app(workspace), host="127.0.0.1")
    await slack.start_server()
    url = str(slack.make_url("")).rstrip("/")
    bot_server = None
    if with_bot:
        bot = build_test_bot(f"{url}/api/", TOKEN, SECRET)
        bot_server = TestServer(bot.web_app(path="/slack/events"), host="127.0.0.1")
        await bot_server.start_server()
        workspace.bot_url = str(bot_server.make_url("/slack/events"))
    try:
        async with aiohttp.ClientSession() as session:
            yield SlackStack(url, workspace, session)
    finally:
        if bot_server is not None:
            await bot_server.close()
        await slack.close()
