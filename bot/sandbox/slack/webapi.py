"""The Slack Web API methods the bot calls, answered as Slack answers them.

Arguments arrive as a JSON body, a form body or query parameters, as slack_sdk sends them; the
token in ``Authorization: Bearer`` (or a ``token`` argument). Every reply is HTTP 200 with
``{"ok": ...}`` except a rate-limited call: HTTP 429 with an integer ``Retry-After``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.sandbox.slack import blockkit, history, uploads
from bot.sandbox.slack.errors import SlackError, require_scope
from bot.sandbox.slack.history import read_metadata
from bot.sandbox.slack.workspace import Message, Workspace

Args = dict[str, Any]
Method = Callable[[Workspace, Args, str], Awaitable[dict[str, Any]]]


@dataclass
class RateLimits:
    """Per-method limits: calls per minute, and a number of forced 429s for tests.

    Slack's limits are per method and workspace (https://api.slack.com/apis/rate-limits);
    ``chat.postMessage`` is limited per channel instead (about one a second)."""

    per_minute: dict[str, int] = field(default_factory=dict)
    forced: dict[str, int] = field(default_factory=dict)
    retry_after: int = 1
    calls: dict[str, deque[float]] = field(default_factory=dict)
    refused: int = 0  # 429s answered, for the benchmarks to check
    refused_by_method: dict[str, int] = field(default_factory=dict)
    refuse_until: float = 0.0  # every method answers 429 until then (a storm, for tests)

    PER_CHANNEL = frozenset({"chat.postMessage"})

    def _refuse(self, method: str) -> None:
        self.refused += 1
        self.refused_by_method[method] = self.refused_by_method.get(method, 0) + 1

    def check(self, method: str, now: float, channel: str | None = None) -> int | None:
        """Seconds to wait when this call is over the limit, else None (and count the call)."""
        if now < self.refuse_until:
            self._refuse(method)
            return max(1, math.ceil(self.refuse_until - now))
        if self.forced.get(method, 0) > 0:
            self.forced[method] -= 1
            self._refuse(method)
            return self.retry_after
        limit = self.per_minute.get(method)
        if limit is None:
            return None
        key = f"{method} {channel}" if method in self.PER_CHANNEL and channel else method
        window = self.calls.setdefault(key, deque())
        while window and now - window[0] >= 60:
            window.popleft()
        if len(window) >= limit:
            self._refuse(method)
            return max(1, math.ceil(60 - (now - window[0])))
        window.append(now)
        return None


def _blocks(args: Args) -> list[dict[str, Any]] | None:
    raw = args.get("blocks")
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise SlackError("invalid_blocks_format") from None
    errors = blockkit.problems(raw)
    if errors:
        raise SlackError(
            "invalid_blocks",
            errors=errors,
            response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
        )
    return list(raw)


def text_and_blocks(
    args: Args, *, required: bool
) -> tuple[str | None, list[dict[str, Any]] | None]:
    blocks = _blocks(args)
    text = args.get("text")
    if text is not None and not isinstance(text, str):
        text = str(text)
    if required and not text and not blocks:
        raise SlackError("no_text")
    if text and len(text) > blockkit.MESSAGE_TEXT_LIMIT:
        raise SlackError("msg_too_long")
    return text, blocks


def _require(args: Args, name: str, error: str) -> str:
    value = args.get(name)
    if not value:
        raise SlackError(error)
    return str(value)


def _message(ws: Workspace, message: Message) -> dict[str, Any]:
    document: dict[str, Any] = {
        "type": "message",
        "user": message.user,
        "text": message.text,
        "ts": message.ts,
        "blocks": message.blocks,
        "team": ws.team_id,
    }
    if message.bot_id:
        document.update(bot_id=message.bot_id, app_id=ws.app_id)
    if message.thread_ts:
        document["thread_ts"] = message.thread_ts
    return document


async def auth_test(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "ok": True,
        "url": f"{origin}/",
        "team": "clusterbot demo",
        "user": ws.bot.name,
        "team_id": ws.team_id,
        "user_id": ws.bot.id,
        "bot_id": ws.bot_id,
        "is_enterprise_install": False,
    }
    if ws.enterprise_id:
        reply["enterprise_id"] = ws.enterprise_id
    return reply


def _postable(ws: Workspace, key: str) -> Any:
    """The channel, if the bot may post in it: chat.postMessage answers ``not_in_channel`` for
    a public channel the bot is not in and ``channel_not_found`` for a private channel or DM
    it is not in (https://api.slack.com/methods/chat.postMessage#errors)."""
    channel = ws.channel(key)
    error = channel.postable_error()
    if error is not None:
        raise SlackError(error)
    return channel


async def chat_post_message(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = _postable(ws, _require(args, "channel", "channel_not_found"))
    text, blocks = text_and_blocks(args, required=True)
    thread_ts = args.get("thread_ts") or None
    if thread_ts:
        try:
            ws.find(channel.id, str(thread_ts))
        except SlackError:
            raise SlackError("thread_not_found") from None
    metadata = read_metadata(args.get("metadata"))
    message = ws.post(
        channel.id, ws.bot.id, text or "", blocks, thread_ts=thread_ts, metadata=metadata
    )
    return {"ok": True, "channel": channel.id, "ts": message.ts, "message": _message(ws, message)}


async def chat_post_ephemeral(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = _postable(ws, _require(args, "channel", "channel_not_found"))
    try:
        user = ws.user(_require(args, "user", "user_not_in_channel"))
    except SlackError:
        raise SlackError("user_not_in_channel") from None
    text, blocks = text_and_blocks(args, required=True)
    message = ws.post(
        channel.id,
        ws.bot.id,
        text or "",
        blocks,
        thread_ts=args.get("thread_ts") or None,
        ephemeral_to=user.id,
    )
    return {"ok": True, "message_ts": message.ts}


async def chat_update(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = _postable(ws, _require(args, "channel", "channel_not_found"))
    message = ws.find(channel.id, _require(args, "ts", "message_not_found"))
    if message.user != ws.bot.id or message.ephemeral_to is not None:
        raise SlackError("cant_update_message")
    text, blocks = text_and_blocks(args, required=False)
    if text is None and blocks is None:
        raise SlackError("no_text")
    ws.update(message, text, blocks, ws.bot.id)
    return {
        "ok": True,
        "channel": channel.id,
        "ts": message.ts,
        "text": message.text,
        "message": _message(ws, message),
    }


async def chat_delete(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = ws.channel(_require(args, "channel", "channel_not_found"))
    message = ws.find(channel.id, _require(args, "ts", "message_not_found"))
    if message.user != ws.bot.id:
        raise SlackError("cant_delete_message")
    ws.delete(message)
    return {"ok": True, "channel": channel.id, "ts": message.ts}


async def chat_get_permalink(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = ws.channel(_require(args, "channel", "channel_not_found"))
    message = ws.find(channel.id, _require(args, "message_ts", "message_not_found"))
    anchor = message.ts.replace(".", "")
    return {"ok": True, "channel": channel.id, "permalink": f"{origin}/#{channel.id}/p{anchor}"}


async def users_info(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    user = ws.user(_require(args, "user", "user_not_found"))
    profile = user.profile(ws.team_id)
    if ws.enterprise_id and not user.is_bot:
        # In a Grid org each user also has an enterprise_user object
        # (https://api.slack.com/methods/users.info, "enterprise_user").
        profile["enterprise_user"] = {
            "id": user.id,
            "enterprise_id": ws.enterprise_id,
            "enterprise_name": ws.enterprise_name,
            "is_admin": False,
            "is_owner": False,
            "teams": [ws.team_id],
        }
    return {"ok": True, "user": profile}


async def conversations_info(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = ws.channel(_require(args, "channel", "channel_not_found"))
    # the scope follows the kind of conversation (conversations.info, "Required scopes")
    require_scope(
        ws.scopes,
        "im:read" if channel.is_im else "groups:read" if channel.is_private else "channels:read",
    )
    if not channel.bot_member and (channel.is_private or channel.is_im):
        raise SlackError("channel_not_found")  # the bot cannot see conversations it is not in
    document: dict[str, Any] = {
        "id": channel.id,
        "is_channel": not channel.is_im and not channel.is_private,
        "is_group": channel.is_private,
        "is_im": channel.is_im,
        "is_private": channel.is_private or channel.is_im,
        "is_member": channel.bot_member,
        "is_archived": False,
    }
    if not channel.is_im:
        document["name"] = channel.name
    return {"ok": True, "channel": document}


async def apps_connections_open(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    websocket = origin.replace("http://", "ws://").replace("https://", "wss://")
    return {"ok": True, "url": f"{websocket}/sandbox/socket"}


async def usergroups_users_list(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    group = _require(args, "usergroup", "no_such_subteam")
    if group not in ws.groups:
        raise SlackError("no_such_subteam")
    return {"ok": True, "users": list(ws.groups[group])}


def _view_arg(args: Args) -> Any:
    """``view``: a JSON-encoded string, or an object in a JSON body (as slack_sdk sends it)."""
    view = args.get("view")
    if not view:
        raise SlackError("invalid_arguments")
    return view


def _view_reply(ws: Workspace, view: Any) -> dict[str, Any]:
    return {"ok": True, "view": view.to_api(ws.team_id, ws.app_id, ws.bot_id)}


async def views_open(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    trigger = _require(args, "trigger_id", "invalid_trigger_id")
    return _view_reply(ws, ws.views.open(trigger, _view_arg(args)))


async def views_push(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    trigger = _require(args, "trigger_id", "invalid_trigger_id")
    return _view_reply(ws, ws.views.push(trigger, _view_arg(args)))


async def views_update(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    if not args.get("view_id") and not args.get("external_id"):
        raise SlackError("invalid_arguments")  # one of view_id or external_id is required
    view = ws.views.update(
        args.get("view_id"),
        args.get("external_id"),
        _view_arg(args),
        args.get("hash"),
    )
    return _view_reply(ws, view)


async def views_publish(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    user = ws.user(_require(args, "user_id", "invalid_arguments"))
    view = ws.views.publish(user.id, _view_arg(args), args.get("hash"))
    return _view_reply(ws, view)


METHODS: dict[str, Method] = {
    "auth.test": auth_test,
    "chat.postMessage": chat_post_message,
    "chat.postEphemeral": chat_post_ephemeral,
    "chat.update": chat_update,
    "chat.delete": chat_delete,
    "chat.getPermalink": chat_get_permalink,
    "users.info": users_info,
    "conversations.info": conversations_info,
    "conversations.history": history.conversations_history,
    "conversations.replies": history.conversations_replies,
    "usergroups.users.list": usergroups_users_list,
    "apps.connections.open": apps_connections_open,
    "views.open": views_open,
    "views.push": views_push,
    "views.update": views_update,
    "views.publish": views_publish,
    "files.getUploadURLExternal": uploads.get_upload_url,
    "files.completeUploadExternal": uploads.complete_upload,
}


async def read_args(request: web.Request) -> Args:
    args: Args = dict(request.query)
    if request.body_exists:  # read already by the edge when it timed the body
        if request.content_type == "application/json":
            try:
                body = await request.json()
            except ValueError:
                raise SlackError("invalid_json") from None
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            args.update(body)
        else:
            args.update(dict(await request.post()))
    return args


# The bot token scope each method needs ("Required scopes" on each method's page,
# https://docs.slack.dev/reference/methods): auth.test, chat.getPermalink and views.* need
# none; conversations.info's depends on the conversation (checked there).
SCOPES = {
    "chat.postMessage": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "users.info": "users:read",
    "usergroups.users.list": "usergroups:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
}


def check_token(ws: Workspace, request: web.Request, args: Args, method: str) -> None:
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else args.get("token")
    if not token:
        raise SlackError("not_authed")
    # apps.connections.open takes the app-level token; every other method the bot token
    expected = ws.app_token if method == "apps.connections.open" else ws.bot_token
    if token != expected:
        raise SlackError("invalid_auth")


async def call(ws: Workspace, limits: RateLimits, name: str, request: web.Request) -> web.Response:
    """Answer one Web API call, as ``POST|GET {base}/{method}``."""
    try:
        method = METHODS.get(name)
        if method is None:
            raise SlackError("unknown_method")
        args = await read_args(request)
        check_token(ws, request, args, name)
        if name in SCOPES:
            require_scope(ws.scopes, SCOPES[name])
        wait = limits.check(name, ws.clock(), str(args.get("channel") or "") or None)
        if wait is not None:
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(wait)},
            )
        reply = await method(ws, args, request.url.origin().human_repr().rstrip("/"))
    except SlackError as error:
        return web.json_response(error.body(), status=error.status)
    return web.json_response(reply)
