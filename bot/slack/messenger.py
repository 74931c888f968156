"""The Messenger for Slack: Web API calls through slack_sdk, with rate limits waited out."""

from __future__ import annotations

import itertools
import logging

from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.render import render
from handlers.replies import Reply


def web_client(token: str, base_url: str) -> AsyncWebClient:
    """A Web API client that waits out 429s (Retry-After) and retries 5xx and dropped
    connections, so a rate limit delays a message and never loses it."""
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
            AsyncRateLimitErrorRetryHandler(max_retry_count=10),
            AsyncServerErrorRetryHandler(max_retry_count=3),
        ],
    )


class SlackMessenger:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        text, blocks = render(reply)
        response = await self.client.chat_postMessage(
            channel=channel, text=text, blocks=blocks, thread_ts=thread_ts
        )
        return str(response["ts"])

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        text, blocks = render(reply)
        await self.client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        text, blocks = render(reply)
        await self.client.chat_postEphemeral(channel=channel, user=user, text=text, blocks=blocks)


class LogMessenger:
    """Where messages go when Slack is not configured (`clusterbot sweep --once` from cron):
    the log, one line each."""

    def __init__(self) -> None:
        self.log = logging.getLogger("clusterbot.messages")
        self._ids = itertools.count(1)

    async def post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        ts = f"log-{next(self._ids)}"
        self.log.info("message %s to %s: %s", ts, channel, reply.summary)
        return ts

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        self.log.info("message %s in %s now: %s", ts, channel, reply.summary)

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        self.log.info("to %s in %s: %s", user, channel, reply.summary)
