"""The fake Slack workspace's state: users, channels, messages, response URLs, live listeners."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.views import Views


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
    """A conversation. Slack posts only where the bot is a member; a public channel it is
    not in answers ``not_in_channel``, a private channel or DM ``channel_not_found``
    (chat.postMessage, "Errors": https://api.slack.com/methods/chat.postMessage)."""

    id: str
    name: str
    is_private: bool = False
    is_im: bool = False
    bot_member: bool = True
    members: tuple[str, ...] = ()  # a DM's two people; empty: everyone in the workspace

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "is_private": self.is_private,
            "is_im": self.is_im,
            "bot_member": self.bot_member,
        }

    @property
    def payload_name(self) -> str:
        """``channel_name`` in a slash command: Slack sends ``directmessage`` for a DM and
        ``privategroup`` for a private channel."""
        if self.is_im:
            return "directmessage"
        return "privategroup" if self.is_private else self.name

    def postable_error(self) -> str | None:
        """The error chat.postMessage answers when the bot may not post here."""
        if self.bot_member:
            return None
        return "channel_not_found" if self.is_private or self.is_im else "not_in_channel"


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
    files: list[dict[str, Any]] = field(default_factory=list)  # shared by files.uploadV2
    metadata: dict[str, Any] | None = None  # chat.postMessage's event_type and event_payload

    def to_api(self) -> dict[str, Any]:
        return {
            "files": self.files,
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
    source_ts: str | None = None  # the message an action came from; for a command, its last reply
    uses: int = 0

    MAX_USES = 5
    LIFETIME = 30 * 60


DEMO_USERS = (
    User("U0ALICE", "alice", "operator", "Alice Operator"),
    User("U0BOB", "bob", "approver", "Bob Approver"),
    User("U0CAROL", "carol", "viewer", "Carol Viewer"),
)
DEMO_CHANNELS = (
    Channel("C0MLINFRA", "ml-infra"),
    Channel("C0GENERAL", "general"),
    Channel("C0RANDOM", "random", bot_member=False),  # public; the bot was not invited
    Channel("C0SECRETLAB", "secret-lab", is_private=True, bot_member=False),
    Channel("D0ALICEBOB", "alice-bob", is_im=True, bot_member=False, members=("U0ALICE", "U0BOB")),
)
# Users created in an Enterprise Grid org get W ids; older members keep their U ids
# (https://api.slack.com/enterprise/grid, "User IDs").
GRID_USER = User("W0DAVE", "dave", "viewer", "Dave Grid")
# The bot scopes the app is installed with: what docs/deploy/slack/manifest.yaml asks for, its
# optional ones left out (tests/test_deploy.py holds the two together). A method whose scope
# is not granted answers missing_scope, as Slack does.
INSTALLED_SCOPES = frozenset(
    {"commands", "chat:write", "files:read", "files:write", "channels:history", "groups:history"}
)
BLOCK_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789=+/"


@dataclass
class Workspace:
    signing_secret: str
    bot_token: str
    bot_url: str | list[str] | None = None  # several: deliveries spread over replicas
    team_id: str = "T0DEMO"
    team_domain: str = "clusterbot-demo"
    app_id: str = "A0CLUSTERBOT"
    bot: User = field(
        default_factory=lambda: User("U0BOT", "clusterbot", "bot", "clusterbot", True)
    )
    bot_id: str = "B0BOT"
    app_token: str | None = None  # xapp-...: apps.connections.open hands out a Socket Mode URL
    scopes: set[str] = field(default_factory=lambda: set(INSTALLED_SCOPES))  # the bot token's
    enterprise_id: str | None = None  # set for an Enterprise Grid org (users are W...)
    enterprise_name: str | None = None
    # an admin's file-upload setting (files.getUploadURLExternal's errors): None lets every
    # file through, "file_uploads_disabled" none, "file_uploads_except_images_disabled" images
    upload_policy: str | None = None
    command: str = "/cluster"
    escape_commands: bool = True  # the manifest's should_escape: mentions arrive as <@U…|name>
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
    views: Views = field(init=False, repr=False)  # modals, Home tabs, the triggers handed out
    _last_ts: float = 0.0
    _deliveries: int = 0

    def __post_init__(self) -> None:
        self.views = Views(self.generate_block_ids, self.clock, self.publish_views)
        if not self.users:
            self.users = {u.id: u for u in DEMO_USERS}
        self.users[self.bot.id] = self.bot
        if not self.channels:
            self.channels = {c.id: c for c in DEMO_CHANNELS}
        for channel in self.channels:
            self.messages.setdefault(channel, [])

    # -- lookups -------------------------------------------------------------------------------

    def join_grid(self, enterprise_id: str, name: str) -> None:
        """Make this workspace part of an Enterprise Grid org: payloads carry enterprise_id
        and enterprise_name, and dave, a user created in the org, has a W id."""
        self.enterprise_id, self.enterprise_name = enterprise_id, name
        self.users.setdefault(GRID_USER.id, GRID_USER)

    def next_bot_url(self) -> str | None:
        """Where the next delivery goes: the request URL, or the next of several in turn, as
        a load balancer in front of replicas would."""
        if isinstance(self.bot_url, list):
            if not self.bot_url:
                return None
            url = self.bot_url[self._deliveries % len(self.bot_url)]
            self._deliveries += 1
            return url
        return self.bot_url

    def generate_block_ids(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Slack gives every block without a ``block_id`` a random one, and sends it back in
        interaction payloads (e.g. ``"block_id": "=qXel"`` in the block_actions example)."""
        out = []
        for block in blocks:
            if isinstance(block, dict) and "block_id" not in block:
                block = {
                    **block,
                    "block_id": "".join(secrets.choice(BLOCK_ID_ALPHABET) for _ in range(5)),
                }
            out.append(block)
        return out

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
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        if thread_ts is not None:
            parent = self.find(channel, thread_ts)
            thread_ts = parent.thread_ts or parent.ts  # a reply to a reply joins the same thread
        message = Message(
            ts=self.next_ts(),
            channel=channel,
            user=user,
            text=text,
            blocks=self.generate_block_ids(blocks or []),
            thread_ts=thread_ts,
            ephemeral_to=ephemeral_to,
            bot_id=self.bot_id if user == self.bot.id else None,
            metadata=metadata,
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
            message.blocks = self.generate_block_ids(blocks)
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

    def publish_views(self, user: str) -> None:
        """Tell the page that a user's modals or Home tab changed (it reads them again)."""
        for queue in list(self.listeners):
            queue.put_nowait({"type": "views", "user": user})

    def close_listeners(self) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(None)
