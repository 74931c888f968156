"""The fake Slack workspace's state: users, channels, messages, response URLs, live listeners."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class SlackError(Exception):
    """A Web API error: ``{"ok": false, "error": code}``, with details where Slack gives them."""

    def __init__(self, code: str, *, status: int = 200, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.status = status
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, **self.extra}


@dataclass(frozen=True)
class User:
    id: str
    name: str
    role: str
    real_name: str
    is_bot: bool = False

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "role": self.role}

    def profile(self, team_id: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "real_name": self.real_name,
            "is_bot": self.is_bot,
            "deleted": False,
            "tz": "UTC",
            "profile": {"display_name": self.name, "real_name": self.real_name},
        }


@dataclass(frozen=True)
class Channel:
    id: str
    name: str

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name}


@dataclass
class Message:
    ts: str
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    ephemeral_to: str | None = None
    edited: dict[str, str] | None = None
    bot_id: str | None = None

    def to_api(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "channel": self.channel,
            "user": self.user,
            "text": self.text,
            "blocks": self.blocks,
            "thread_ts": self.thread_ts,
            "ephemeral_to": self.ephemeral_to,
            "edited": self.edited,
            "bot_id": self.bot_id,
        }

    def visible_to(self, user: str | None) -> bool:
        return self.ephemeral_to is None or user is None or self.ephemeral_to == user


@dataclass
class ResponseUrl:
    """A ``response_url``: five uses within thirty minutes, tied to where it was handed out."""

    token: str
    channel: str
    user: str
    kind: str  # "command" or "action"
    created: float
    source_ts: str | None = None
    uses: int = 0

    MAX_USES = 5
    LIFETIME = 30 * 60


DEMO_USERS = (
    User("U0ALICE", "alice", "operator", "Alice Operator"),
    User("U0BOB", "bob", "approver", "Bob Approver"),
    User("U0CAROL", "carol", "viewer", "Carol Viewer"),
)
DEMO_CHANNELS = (Channel("C0MLINFRA", "ml-infra"), Channel("C0GENERAL", "general"))


@dataclass
class Workspace:
    signing_secret: str
    bot_token: str
    bot_url: str | None = None
    team_id: str = "T0DEMO"
    team_domain: str = "clusterbot-demo"
    app_id: str = "A0CLUSTERBOT"
    bot: User = field(
        default_factory=lambda: User("U0BOT", "clusterbot", "bot", "clusterbot", True)
    )
    bot_id: str = "B0BOT"
    app_token: str | None = None  # xapp-...: apps.connections.open hands out a Socket Mode URL
    command: str = "/cluster"
    ack_deadline: float = 3.0  # Slack's limit for the HTTP 200 ack
    clock: Callable[[], float] = time.time
    users: dict[str, User] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    messages: dict[str, list[Message]] = field(default_factory=dict)
    response_urls: dict[str, ResponseUrl] = field(default_factory=dict)
    listeners: set[asyncio.Queue[dict[str, Any] | None]] = field(default_factory=set)
    sockets: list[Any] = field(default_factory=list)  # the app's Socket Mode connections
    pending_acks: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(
        default_factory=lambda: {"S0APPROVERS": ["U0BOB"]}
    )  # user group id -> member user ids
    _last_ts: float = 0.0

    def __post_init__(self) -> None:
        if not self.users:
            self.users = {u.id: u for u in DEMO_USERS}
        self.users[self.bot.id] = self.bot
        if not self.channels:
            self.channels = {c.id: c for c in DEMO_CHANNELS}
        for channel in self.channels:
            self.messages.setdefault(channel, [])

    # -- lookups -------------------------------------------------------------------------------

    def user(self, key: str) -> User:
        key = key.lstrip("@")
        found = self.users.get(key) or next((u for u in self.users.values() if u.name == key), None)
        if found is None:
            raise SlackError("user_not_found")
        return found

    def channel(self, key: str) -> Channel:
        key = key.lstrip("#")
        found = self.channels.get(key) or next(
            (c for c in self.channels.values() if c.name == key), None
        )
        if found is None:
            raise SlackError("channel_not_found")
        return found

    def find(self, channel: str, ts: str) -> Message:
        message = next((m for m in self.messages.get(channel, []) if m.ts == ts), None)
        if message is None:
            raise SlackError("message_not_found")
        return message

    def history(self, channel: str, viewer: str | None = None) -> list[Message]:
        return [m for m in self.messages[channel] if m.visible_to(viewer)]

    # -- changes -------------------------------------------------------------------------------

    def next_ts(self) -> str:
        # Slack's ts is seconds.microseconds and unique per channel; keep it strictly increasing.
        now = max(self.clock(), self._last_ts + 0.000001)
        self._last_ts = now
        return f"{now:.6f}"

    def post(
        self,
        channel: str,
        user: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        ephemeral_to: str | None = None,
    ) -> Message:
        if thread_ts is not None:
            parent = self.find(channel, thread_ts)
            thread_ts = parent.thread_ts or parent.ts  # a reply to a reply joins the same thread
        message = Message(
            ts=self.next_ts(),
            channel=channel,
            user=user,
            text=text,
            blocks=blocks or [],
            thread_ts=thread_ts,
            ephemeral_to=ephemeral_to,
            bot_id=self.bot_id if user == self.bot.id else None,
        )
        self.messages[channel].append(message)
        self.publish("message", message)
        return message

    def update(
        self, message: Message, text: str | None, blocks: list[dict[str, Any]] | None, by: str
    ) -> Message:
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = blocks
        message.edited = {"user": by, "ts": self.next_ts()}
        self.publish("message_changed", message)
        return message

    def delete(self, message: Message) -> None:
        self.messages[message.channel].remove(message)
        self.publish("message_deleted", message)

    # -- response URLs ---------------------------------------------------------------------------

    def response_url(
        self, origin: str, channel: str, user: str, kind: str, source_ts: str | None = None
    ) -> str:
        token = secrets.token_urlsafe(18)
        self.response_urls[token] = ResponseUrl(
            token, channel, user, kind, self.clock(), source_ts=source_ts
        )
        return f"{origin}/sandbox/response/{token}"

    def use_response_url(self, token: str) -> ResponseUrl:
        entry = self.response_urls.get(token)
        if entry is None:
            raise SlackError("invalid_url", status=404)
        if self.clock() - entry.created > ResponseUrl.LIFETIME:
            raise SlackError("expired_url", status=404)
        if entry.uses >= ResponseUrl.MAX_USES:
            raise SlackError("used_url", status=404)
        entry.uses += 1
        return entry

    # -- live listeners --------------------------------------------------------------------------

    def publish(self, kind: str, message: Message) -> None:
        event = {"type": kind, "channel": message.channel, "message": message.to_api()}
        for queue in list(self.listeners):
            queue.put_nowait(event)

    def close_listeners(self) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(None)
