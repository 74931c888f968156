"""Deliver signed slash commands and button clicks to the bot's request URL, as Slack does.

Slack waits 3 s for the HTTP 200 ack; what an ack carries is shown to the user (ephemeral
unless it says ``in_channel``), and a failed or late ack shows Slack's own error line.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from bot.sandbox.slack import blockkit
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.workspace import Channel, User, Workspace


@dataclass
class Delivery:
    """What the bot answered: its HTTP status (None when it did not answer) and body."""

    status: int | None
    body: str
    error: str | None = None

    def to_api(self) -> dict[str, Any]:
        reply: dict[str, Any] = {"status": self.status, "body": self.body}
        if self.error:
            reply["error"] = self.error
        return reply


def signed_headers(secret: str, body: str, content_type: str) -> dict[str, str]:
    timestamp = str(int(time.time()))  # the bot checks it against its own clock
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body) or ""
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


async def send(
    session: aiohttp.ClientSession,
    ws: Workspace,
    kind: str,
    payload: dict[str, Any],
    body: str,
    content_type: str = "application/x-www-form-urlencoded",
) -> Delivery:
    """To the app's Socket Mode connection when it has one, else signed to its request URL."""
    if ws.sockets:
        return await _over_socket(ws, kind, payload)
    url = ws.next_bot_url()
    if not url:
        return Delivery(None, "", "no request URL is configured for the app")
    headers = signed_headers(ws.signing_secret, body, content_type)
    try:
        async with asyncio.timeout(ws.ack_deadline):
            async with session.post(url, data=body.encode(), headers=headers) as reply:
                return Delivery(reply.status, await reply.text())
    except TimeoutError:
        return Delivery(None, "", "operation_timeout")
    except aiohttp.ClientError:
        return Delivery(None, "", "dispatch_failed")


async def _over_socket(ws: Workspace, kind: str, payload: dict[str, Any]) -> Delivery:
    """A Socket Mode envelope; the app acks it with the same envelope_id (and maybe a payload)."""
    envelope_id = secrets.token_hex(12)
    acked: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    ws.pending_acks[envelope_id] = acked
    envelope = {
        "envelope_id": envelope_id,
        "type": kind,
        "payload": payload,
        # a response payload is taken for a slash command, a view submission and an options
        # request (https://docs.slack.dev/apis/events-api/using-socket-mode)
        "accepts_response_payload": kind == "slash_commands"
        or payload.get("type") in ("view_submission", "block_suggestion"),
        "retry_attempt": 0,
        "retry_reason": "",
    }
    try:
        await next(iter(ws.sockets)).send_json(envelope)
        async with asyncio.timeout(ws.ack_deadline):
            ack = await acked
    except TimeoutError:
        return Delivery(None, "", "operation_timeout")
    except (ConnectionError, RuntimeError):
        return Delivery(None, "", "dispatch_failed")
    finally:
        ws.pending_acks.pop(envelope_id, None)
    reply = ack.get("payload")
    return Delivery(200, json.dumps(reply) if reply else "")


def _failed(ws: Workspace, channel: Channel, user: User, error: str) -> None:
    """Slack's own line, shown only to the user, when a slash command could not be answered."""
    ws.post(
        channel.id, ws.bot.id, f'{ws.command} failed with the error "{error}"', ephemeral_to=user.id
    )


def _show_ack(ws: Workspace, delivery: Delivery, channel: Channel, user: User) -> None:
    """Show the user what Slack would show after a slash command's ack."""
    if delivery.status != 200:
        _failed(ws, channel, user, delivery.error or "dispatch_failed")
        return
    if not delivery.body.strip():
        return
    try:
        reply: Any = json.loads(delivery.body)
    except ValueError:
        reply = {"text": delivery.body}
    if not isinstance(reply, dict) or not (reply.get("text") or reply.get("blocks")):
        return
    blocks = reply.get("blocks")
    if blocks is not None and blockkit.problems(blocks):
        _failed(ws, channel, user, "invalid_blocks")
        return
    in_channel = reply.get("response_type") == "in_channel"
    ws.post(
        channel.id,
        ws.bot.id,
        str(reply.get("text") or ""),
        blocks,
        ephemeral_to=None if in_channel else user.id,
    )


def escape_mentions(ws: Workspace, text: str) -> str:
    """With "Escape channels, users, and links" on (the manifest's ``should_escape: true``),
    Slack sends a mention of a person as ``<@U123|name>`` (https://docs.slack.dev/interactivity/
    implementing-slash-commands, "Parsing the payload")."""

    def person(found: re.Match[str]) -> str:
        user = next((u for u in ws.users.values() if u.name == found.group(1)), None)
        return f"<@{user.id}|{user.name}>" if user is not None else found.group(0)

    return re.sub(r"(?<![<\w])@([a-z0-9._-]+)", person, text)


async def deliver_command(
    ws: Workspace,
    session: aiohttp.ClientSession,
    origin: str,
    user: User,
    channel: Channel,
    text: str,
) -> Delivery:
    command, _, rest = text.strip().partition(" ")
    if command != ws.command:
        raise SlackError("unknown_command", status=400, hint=f"commands start with {ws.command}")
    if len(text) > blockkit.MESSAGE_TEXT_LIMIT:
        # Slack's composer takes no more than a message holds.
        raise SlackError("msg_too_long", status=400)
    if channel.members and user.id not in channel.members:
        raise SlackError("channel_not_found", status=404)  # not their conversation
    rest = escape_mentions(ws, rest) if ws.escape_commands else rest
    # The fields of Slack's own example (https://api.slack.com/interactivity/slash-commands):
    # enterprise_id and enterprise_name only in an Enterprise Grid org.
    payload = {
        "token": "sandbox-verification-token",
        "team_id": ws.team_id,
        "team_domain": ws.team_domain,
        **(
            {"enterprise_id": ws.enterprise_id, "enterprise_name": ws.enterprise_name or ""}
            if ws.enterprise_id
            else {}
        ),
        "channel_id": channel.id,
        "channel_name": channel.payload_name,
        "user_id": user.id,
        "user_name": user.name,
        "command": command,
        "text": rest.strip(),
        "api_app_id": ws.app_id,
        "is_enterprise_install": "false",
        "response_url": ws.response_url(origin, channel.id, user.id, "command"),
        "trigger_id": ws.views.issue_trigger(user.id),
    }
    delivery = await send(session, ws, "slash_commands", payload, urlencode(payload))
    _show_ack(ws, delivery, channel, user)
    return delivery


async def deliver_click(
    ws: Workspace,
    session: aiohttp.ClientSession,
    origin: str,
    user: User,
    channel: Channel,
    ts: str,
    action_id: str,
    value: str | None = None,
) -> Delivery:
    """Click a button, or pick an option of a menu (``value``; the first option by default)."""
    try:
        message = ws.find(channel.id, ts)
    except SlackError:
        raise SlackError("message_not_found", status=404) from None
    if not message.visible_to(user.id):
        raise SlackError("message_not_found", status=404)
    match = next(
        (
            (bid, b)
            for bid, b in blockkit.buttons(message.blocks)
            if b.get("action_id") == action_id
        ),
        None,
    )
    if match is None:
        raise SlackError("no_such_button", status=404)
    block_id, button = match
    action: dict[str, Any] = {
        "type": button["type"],
        "action_id": action_id,
        "block_id": block_id or "",
        "action_ts": ws.next_ts(),
    }
    if button["type"] == "static_select":
        options = button.get("options") or []
        chosen = next((o for o in options if o.get("value") == value), None)
        if chosen is None and value is not None:
            raise SlackError("no_such_option", status=404)
        action["selected_option"] = chosen or options[0]
        action["placeholder"] = button.get("placeholder")
    else:
        action["text"] = button.get("text")
        for key in ("value", "style"):
            if key in button:
                action[key] = button[key]
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user.id, "username": user.name, "name": user.name, "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "sandbox-verification-token",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": channel.id,
            "is_ephemeral": message.ephemeral_to is not None,
        },
        "trigger_id": ws.views.issue_trigger(user.id),
        "team": {
            "id": ws.team_id,
            "domain": ws.team_domain,
            **(
                {"enterprise_id": ws.enterprise_id, "enterprise_name": ws.enterprise_name or ""}
                if ws.enterprise_id
                else {}
            ),
        },
        "enterprise": (
            {"id": ws.enterprise_id, "name": ws.enterprise_name or ""} if ws.enterprise_id else None
        ),
        "is_enterprise_install": False,
        "channel": {"id": channel.id, "name": channel.payload_name},
        "state": {"values": {}},
        "response_url": ws.response_url(origin, channel.id, user.id, "action", message.ts),
        "actions": [action],
    }
    if message.thread_ts:
        payload["container"]["thread_ts"] = message.thread_ts
    if message.ephemeral_to is None:  # Slack sends no message body for ephemeral sources
        payload["message"] = {
            "type": "message",
            "user": message.user,
            "bot_id": message.bot_id,
            "ts": message.ts,
            "text": message.text,
            "blocks": message.blocks,
            "team": ws.team_id,
            **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
        }
    body = urlencode({"payload": json.dumps(payload)})
    return await send(session, ws, "interactive", payload, body)
