"""conversations.history and conversations.replies, as Slack answers a bot token, with message
metadata (https://docs.slack.dev/reference/methods/conversations.history, .../conversations.replies,
https://docs.slack.dev/messaging/message-metadata):

- the scope follows the conversation: ``channels:history``, ``groups:history``, ``im:history``;
  a conversation the bot is not in answers ``not_in_channel`` (public) or
  ``channel_not_found`` (private, DM);
- history lists the channel's messages newest first, thread replies left out; replies lists a
  thread's parent and then its replies, oldest first (``thread_not_found`` for no such ts);
- ``oldest`` and ``latest`` bound the ts, exclusive unless ``inclusive``; ``limit`` defaults to
  100; ``has_more`` and a ``next_cursor`` page on;
- a message's ``metadata`` (``event_type``, ``event_payload``) is returned only with
  ``include_all_metadata=true``;
- ephemeral messages are never listed.
"""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox.slack.errors import SlackError, require_scope
from bot.sandbox.slack.workspace import Message, Workspace

Args = dict[str, Any]
MAX_LIMIT = 999


def read_metadata(value: Any) -> dict[str, Any] | None:
    """chat.postMessage's ``metadata``: an object with ``event_type`` and ``event_payload``
    (a JSON string in a form-encoded call); ``invalid_metadata_format`` otherwise."""
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SlackError("invalid_metadata_format") from None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("event_type"), str)
        or not isinstance(value.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_format")
    return {"event_type": value["event_type"], "event_payload": value["event_payload"]}


def _readable(ws: Workspace, key: str) -> Any:
    channel = ws.channel(key)
    scope = (
        "im:history"
        if channel.is_im
        else "groups:history"
        if channel.is_private
        else ("channels:history")
    )
    require_scope(ws.scopes, scope)
    if not channel.bot_member:
        raise SlackError(
            "channel_not_found" if channel.is_private or channel.is_im else ("not_in_channel")
        )
    return channel


def _flag(args: Args, name: str) -> bool:
    return str(args.get(name, "")).lower() in ("1", "true")


def _bounded(args: Args, messages: list[Message]) -> list[Message]:
    inclusive = _flag(args, "inclusive")
    oldest, latest = args.get("oldest"), args.get("latest")
    try:
        low = float(oldest) if oldest else None
        high = float(latest) if latest else None
    except ValueError:
        raise SlackError("invalid_ts_oldest" if oldest else "invalid_ts_latest") from None

    def within(message: Message) -> bool:
        at = float(message.ts)
        if low is not None and (at < low or (at == low and not inclusive)):
            return False
        return not (high is not None and (at > high or (at == high and not inclusive)))

    return [m for m in messages if within(m)]


def _page(ws: Workspace, args: Args, messages: list[Message]) -> dict[str, Any]:
    try:
        limit = min(MAX_LIMIT, max(1, int(args.get("limit") or 100)))
        start = int(args.get("cursor") or 0)
    except ValueError:
        raise SlackError("invalid_cursor") from None
    page = messages[start : start + limit]
    more = start + limit < len(messages)
    metadata = _flag(args, "include_all_metadata")
    listed = []
    for message in page:
        document: dict[str, Any] = {
            "type": "message",
            "user": message.user,
            "text": message.text,
            "ts": message.ts,
        }
        if message.thread_ts:
            document["thread_ts"] = message.thread_ts
        if message.bot_id:
            document.update(bot_id=message.bot_id, app_id=ws.app_id)
        if metadata and message.metadata is not None:
            document["metadata"] = message.metadata
        listed.append(document)
    return {
        "ok": True,
        "messages": listed,
        "has_more": more,
        "response_metadata": {"next_cursor": str(start + limit) if more else ""},
    }


async def conversations_history(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = _readable(ws, str(args.get("channel") or ""))
    top = [
        m
        for m in ws.messages.get(channel.id, [])
        if m.ephemeral_to is None and (m.thread_ts is None or m.thread_ts == m.ts)
    ]
    return _page(ws, args, list(reversed(_bounded(args, top))))


async def conversations_replies(ws: Workspace, args: Args, origin: str) -> dict[str, Any]:
    channel = _readable(ws, str(args.get("channel") or ""))
    ts = str(args.get("ts") or "")
    parent = next((m for m in ws.messages.get(channel.id, []) if m.ts == ts), None)
    if parent is None:
        raise SlackError("thread_not_found")
    thread = [
        m
        for m in ws.messages.get(channel.id, [])
        if m.ephemeral_to is None and (m.ts == ts or m.thread_ts == ts)
    ]
    return _page(ws, args, _bounded(args, thread))
