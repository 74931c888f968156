"""The Messenger for Slack: Web API calls through slack_sdk, with rate limits waited out.

Every refusal becomes a ``MessengerError`` carrying Slack's error code (``not_in_channel``,
``channel_not_found``, ``ratelimited``...), so the core can tell "the bot may not post here"
from a passing failure. Every text is redacted of configured secrets before it leaves.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.redact import Redactor
from bot.slack.render import render
from handlers.messenger import MessengerError
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


def _refusal(error: SlackClientError) -> MessengerError:
    if isinstance(error, SlackApiError):
        code = error.response.get("error") if error.response is not None else None
        return MessengerError(str(code or "unknown_error"))
    return MessengerError("connection_failed")


class SlackMessenger:
    def __init__(self, client: AsyncWebClient, redactor: Redactor | None = None) -> None:
        self.client = client
        self.redactor = redactor or Redactor()

    def _content(self, reply: Reply) -> dict[str, Any]:
        text, blocks = render(reply, self.redactor)
        return {"text": text, "blocks": blocks}

    async def post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        try:
            response = await self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, **self._content(reply)
            )
        except SlackClientError as error:
            raise _refusal(error) from error
        return str(response["ts"])

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        try:
            await self.client.chat_update(channel=channel, ts=ts, **self._content(reply))
        except SlackClientError as error:
            raise _refusal(error) from error

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        try:
            await self.client.chat_postEphemeral(channel=channel, user=user, **self._content(reply))
        except SlackClientError as error:
            raise _refusal(error) from error


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
