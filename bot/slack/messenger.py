"""The Messenger for Slack: Web API calls through slack_sdk, with rate limits waited out.

Every refusal becomes a ``MessengerError`` carrying Slack's error code (``not_in_channel``,
``channel_not_found``, ``ratelimited``...), so the core can tell "the bot may not post here"
from a passing failure. Every text is redacted of configured secrets before it leaves.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.redact import Redactor
from bot.slack.budget import Budget, Crowded, Pacer, Send
from bot.slack.render import mrkdwn, render
from handlers.messenger import MessengerError
from handlers.replies import Line, Reply, plain


class PausingRateLimitHandler(AsyncRateLimitErrorRetryHandler):
    """Waits out a 429 and retries the call, as slack_sdk's handler does, and first pauses
    the whole method in the budget for its ``Retry-After``, so the calls queued behind it wait
    too instead of each running into the same 429."""

    def __init__(self, budget: Budget, max_retry_count: int) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.budget = budget

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is not None:
            method = request.url.split("?", 1)[0].rsplit("/", 1)[-1]
            waited = next(
                (v for k, v in response.headers.items() if k.lower() == "retry-after"), ["1"]
            )
            try:
                seconds = float(waited[0])
            except (IndexError, ValueError):
                seconds = 1.0
            self.budget.pause(method, seconds)
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )


def web_client(
    token: str, base_url: str, budget: Budget | None = None, timeout: float = 30.0
) -> AsyncWebClient:
    """A Web API client that waits out 429s (Retry-After, pausing the method in ``budget``)
    and retries 5xx and dropped connections, so a rate limit delays a message and never
    loses it."""
    rate_limited = (
        AsyncRateLimitErrorRetryHandler(max_retry_count=10)
        if budget is None
        else PausingRateLimitHandler(budget, max_retry_count=10)
    )
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        timeout=int(timeout),
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
            rate_limited,
            AsyncServerErrorRetryHandler(max_retry_count=3),
        ],
    )


OWED_EVENT = "clusterbot_owed"  # the metadata event type of a message the bot owed
CLOCK_SLACK = 120.0  # seconds a look at the history reaches back before an item was owed

# Slack's answers when the bot may not post where it was asked to (chat.postMessage errors,
# https://api.slack.com/methods/chat.postMessage#errors): a public channel it was not invited
# to, a private channel or DM it is not in, an archived one.
NOT_POSTABLE = frozenset(
    {
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "restricted_action",
        "cannot_reply_to_message",
    }
)


# Slack's answers for what a workspace admin's setting forbids, in its docs' words
# (files.getUploadURLExternal, files.completeUploadExternal and chat.postMessage errors): no
# retry changes them.
WORKSPACE_POLICY = {
    "file_uploads_disabled": "file uploads are turned off in this workspace",
    "file_uploads_except_images_disabled": "only images may be uploaded in this workspace",
    "file_type_not_allowed": "the workspace's allowed file types leave this one out",
    "ekm_access_denied": "administrators have suspended posting (Enterprise Key Management)",
}


# Slack's answers for its own passing trouble (every Web API method's documented errors:
# ratelimited, fatal_error, internal_error, request_timeout, service_unavailable)
PASSING = frozenset(
    {"ratelimited", "fatal_error", "internal_error", "request_timeout", "service_unavailable"}
)


def _refusal(error: SlackClientError) -> MessengerError:
    if isinstance(error, SlackApiError):
        code = error.response.get("error") if error.response is not None else None
        said = str(code or "unknown_error")
        policy = WORKSPACE_POLICY.get(said)
        return MessengerError(
            said, not_postable=said in NOT_POSTABLE, policy=policy, passing=said in PASSING
        )
    return MessengerError("connection_failed", passing=True)


class SlackMessenger:
    """Posts and edits within Slack's rate tiers (``bot/slack/budget.py``)."""

    def __init__(
        self,
        client: AsyncWebClient,
        redactor: Redactor | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.client = client
        self.redactor = redactor or Redactor()
        self.pacer = pacer or Pacer(Budget())

    def _content(self, reply: Reply) -> dict[str, Any]:
        text, blocks = render(reply, self.redactor)
        return {"text": text, "blocks": blocks}

    async def post(
        self,
        channel: str,
        reply: Reply,
        thread: str | None = None,
        key: str | None = None,
        waited_for: bool = False,
        progress: bool = False,
    ) -> str:
        posted: list[str] = []
        content = self._content(reply)
        if key is not None:  # unseen by people; read back by ``find``
            content["metadata"] = {"event_type": OWED_EVENT, "event_payload": {"key": key}}

        async def send() -> None:
            response = await self._call(
                self.client.chat_postMessage(channel=channel, thread_ts=thread, **content)
            )
            posted.append(str(response["ts"]))

        where = f"chat.postMessage {channel}"
        if progress:
            await self._paced(self.pacer.now(where, send))
        else:
            await self._must(where, send, patient=key is None or waited_for)
        return posted[0]

    async def find(
        self, channel: str, key: str, since: float, thread: str | None = None
    ) -> str | None:
        """The bot's message carrying ``key`` in its metadata, posted since ``since``: one
        page of the channel's history (conversations.history), or of the thread
        (conversations.replies), with the metadata (``include_all_metadata``)."""
        found: list[dict[str, Any]] = []
        oldest = f"{max(0.0, since - CLOCK_SLACK):.6f}"

        async def send() -> None:
            if thread is None:
                call = self.client.conversations_history(
                    channel=channel, oldest=oldest, include_all_metadata=True, limit=200
                )
            else:
                call = self.client.conversations_replies(
                    channel=channel, ts=thread, oldest=oldest, include_all_metadata=True, limit=200
                )
            response = await self._call(call)
            found.extend(response.get("messages") or [])

        method = "conversations.history" if thread is None else "conversations.replies"
        await self.pacer.must(method, send)
        for message in found:
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if metadata.get("event_type") == OWED_EVENT and payload.get("key") == key:
                return str(message["ts"])
        return None

    async def update(
        self,
        channel: str,
        message: str,
        reply: Reply,
        *,
        progress: bool = False,
        owed: bool = False,
    ) -> None:
        ts = message  # a Slack message is named by its channel and its ts

        async def send() -> None:
            await self._call(
                self.client.chat_update(channel=channel, ts=ts, **self._content(reply))
            )

        which = f"{channel} {ts}"
        if progress:
            await self.pacer.maybe("chat.update", which, send)
        else:
            await self._must("chat.update", send, which, patient=not owed)

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        async def send() -> None:
            await self._call(
                self.client.chat_postEphemeral(channel=channel, user=user, **self._content(reply))
            )

        await self.pacer.must("chat.postEphemeral", send)

    async def upload(self, channel: str, filename: str, content: str, comment: Line) -> None:
        """files.uploadV2: an upload URL, the bytes, then the share in the channel."""

        async def send() -> None:
            await self._call(
                self.client.files_upload_v2(
                    channel=channel,
                    filename=filename,
                    title=filename,
                    content=self.redactor.clean_text(content),
                    initial_comment=self.redactor.clean_text(mrkdwn(comment)),
                )
            )

        await self.pacer.must("files.completeUploadExternal", send)

    async def share(
        self, channel: str, files: Sequence[tuple[str, bytes | str]], comment: Line
    ) -> None:
        """files.uploadV2 with several files: each its upload URL and bytes, then one share
        of them all in the channel, as one message."""
        uploads = [
            {
                "filename": name,
                "title": name,
                "content": content
                if isinstance(content, bytes)
                else self.redactor.clean_text(content),
            }
            for name, content in files
        ]

        async def send() -> None:
            await self._call(
                self.client.files_upload_v2(
                    channel=channel,
                    file_uploads=uploads,
                    initial_comment=self.redactor.clean_text(mrkdwn(comment)),
                )
            )

        await self.pacer.must("files.completeUploadExternal", send)

    async def _must(
        self, key: str, send: Send, message: str | None = None, *, patient: bool
    ) -> None:
        """``Pacer.must``; an owed item's call turned away is the platform's rate limit."""
        await self._paced(self.pacer.must(key, send, message, patient=patient))

    @staticmethod
    async def _paced(sending: Awaitable[None]) -> None:
        """A send through the pacer; a call it turned away is the platform's rate limit."""
        try:
            await sending
        except Crowded as crowded:
            raise MessengerError("ratelimited", retry_after=crowded.seconds) from None

    async def _call(self, call: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
        try:
            return await call
        except SlackClientError as error:
            raise _refusal(error) from error


class LogMessenger:
    """Where messages go when Slack is not configured (`clusterbot sweep --once` from cron):
    the log, one line each."""

    def __init__(self) -> None:
        self.log = logging.getLogger("clusterbot.messages")
        self._ids = itertools.count(1)

    async def post(
        self,
        channel: str,
        reply: Reply,
        thread: str | None = None,
        key: str | None = None,
        waited_for: bool = False,
        progress: bool = False,
    ) -> str:
        ts = f"log-{next(self._ids)}"
        self.log.info("message %s to %s: %s", ts, channel, reply.summary)
        return ts

    async def find(
        self, channel: str, key: str, since: float, thread: str | None = None
    ) -> str | None:
        return None  # the log keeps nothing to look in

    async def update(
        self,
        channel: str,
        message: str,
        reply: Reply,
        *,
        progress: bool = False,
        owed: bool = False,
    ) -> None:
        self.log.info("message %s in %s now: %s", message, channel, reply.summary)

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        self.log.info("to %s in %s: %s", user, channel, reply.summary)

    async def upload(self, channel: str, filename: str, content: str, comment: Line) -> None:
        said = plain(comment)
        self.log.info("file %s (%d bytes) to %s: %s", filename, len(content), channel, said)

    async def share(
        self, channel: str, files: Sequence[tuple[str, bytes | str]], comment: Line
    ) -> None:
        names = ", ".join(name for name, _ in files)
        self.log.info("files %s to %s: %s", names, channel, plain(comment))
