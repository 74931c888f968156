"""Bolt listeners: ack at once, then parse, authorize and hand the work to the handlers.

Listeners stay thin. Work after the ack runs as tracked background tasks, so shutdown can wait
for it. A user-facing error carries its own message; anything else is logged with a reference
and the user sees only that reference.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.render import render
from bot.vertex.errors import VertexError
from handlers.bot import ClusterBot, needed_role
from handlers.changes import ChangeService
from handlers.clusters import error_text
from handlers.commands import USAGE, CommandError, parse
from handlers.policy import Policy, Role
from handlers.replies import Reply, Text, error_reply, escape
from handlers.sweep import IdleSweeper

COMMAND = "/cluster"
IDLE_ACTIONS = ("idle_scale_to_zero", "idle_delete", "idle_snooze", "idle_keep", "idle_unkeep")

log = logging.getLogger(__name__)
GROUP_CACHE_SECONDS = 300.0
Respond = Callable[..., Awaitable[Any]]


class Background:
    """Tasks started after an ack; shutdown waits for them."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self, limit: float = 30.0) -> None:
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=limit)


class Roles:
    """A user's role from the policy, resolving Slack user groups (cached a few minutes)."""

    def __init__(self, policy: Policy, client: AsyncWebClient) -> None:
        self.policy = policy
        self.client = client
        self._members: dict[str, frozenset[str]] = {}
        self._fetched = 0.0

    async def _groups_of(self, user: str) -> frozenset[str]:
        groups = self.policy.group_ids()
        if not groups:
            return frozenset()
        if time.monotonic() - self._fetched > GROUP_CACHE_SECONDS:
            members: dict[str, frozenset[str]] = {}
            for group in groups:
                try:
                    reply = await self.client.usergroups_users_list(usergroup=group)
                    members[group] = frozenset(reply.get("users") or [])
                except SlackApiError as error:
                    log.warning("cannot read user group %s: %s", group, error.response.get("error"))
                    members[group] = frozenset()
            self._members, self._fetched = members, time.monotonic()
        return frozenset(g for g, users in self._members.items() if user in users)

    async def of(self, user: str) -> Role:
        return self.policy.role_of(user, await self._groups_of(user))


def _ephemeral(reply: Reply, **extra: Any) -> dict[str, Any]:
    text, blocks = render(reply)
    return {"text": text, "blocks": blocks, "response_type": "ephemeral", **extra}


class SlackEdge:
    def __init__(
        self,
        app: AsyncApp,
        bot: ClusterBot,
        changes: ChangeService,
        policy: Policy,
        roles: Roles,
        background: Background,
        sweeper: IdleSweeper | None = None,
        on_command: Callable[[str, str], None] | None = None,
    ) -> None:
        self.sweeper = sweeper
        self.app = app
        self.bot = bot
        self.changes = changes
        self.policy = policy
        self.roles = roles
        self.background = background
        self.on_command = on_command or (lambda name, outcome: None)

    def register(self) -> None:
        self.app.command(COMMAND)(self.command)
        self.app.action("approve")(self.approve)
        self.app.action("reject")(self.reject)
        for action in IDLE_ACTIONS:
            self.app.action(action)(self.idle_action)

    # Bolt passes arguments by parameter name.
    async def command(self, ack: Any, body: dict[str, Any], respond: Respond) -> None:
        await ack()
        self.background.spawn(self._command(body, respond))

    async def approve(self, ack: Any, body: dict[str, Any], respond: Respond) -> None:
        await ack()
        self.background.spawn(self._decide(body, respond, approve=True))

    async def reject(self, ack: Any, body: dict[str, Any], respond: Respond) -> None:
        await ack()
        self.background.spawn(self._decide(body, respond, approve=False))

    async def idle_action(self, ack: Any, body: dict[str, Any], respond: Respond) -> None:
        await ack()
        self.background.spawn(self._idle_action(body, respond))

    async def _idle_action(self, body: dict[str, Any], respond: Respond) -> None:
        user = body["user"]["id"]
        action = body["actions"][0]
        value = (action.get("selected_option") or {}).get("value") or action.get("value", "")
        try:
            if self.sweeper is None:
                raise RuntimeError("idle actions arrived but idle detection is not configured")
            reply = await self.sweeper.click(
                action["action_id"], user, await self.roles.of(user), value
            )
            if reply is not None:
                await respond(**_ephemeral(reply, replace_original=False))
        except Exception:
            await respond(
                **_ephemeral(
                    self._internal_error(f"{action.get('action_id')} by {user}"),
                    replace_original=False,
                )
            )

    async def _command(self, body: dict[str, Any], respond: Respond) -> None:
        user, channel = body["user_id"], body["channel_id"]
        text = body.get("text", "")
        name = (text.split() or ["help"])[0].lower()
        outcome = "ok"
        try:
            command = parse(text)
            if not self.policy.channel_allowed(channel):
                outcome = "denied"
                allowed = ", ".join(f"<#{escape(c)}>" for c in self.policy.channels)
                refusal = Reply("clusterbot is not enabled in this channel").add(
                    Text(f"clusterbot is not enabled in this channel; use {allowed}.")
                )
                await respond(**_ephemeral(refusal))
                return
            role = await self.roles.of(user)
            needed = needed_role(command)
            if role < needed:
                outcome = "denied"
                reason = (
                    f"/cluster {name} needs the {needed.label} role; you are {role.label}. "
                    "An admin can grant it in the policy file."
                )
                await respond(**_ephemeral(error_reply(reason)))
                return
            reply = await self.bot.handle(command, user, channel)
            if reply is not None:
                if reply.public:
                    text_, blocks = render(reply)
                    await respond(text=text_, blocks=blocks, response_type="in_channel")
                else:
                    await respond(**_ephemeral(reply))
        except CommandError as error:
            outcome = "bad_input"
            name = error.subcommand or name
            await respond(**_ephemeral(error_reply(error.reason, error.usage)))
        except VertexError as error:
            outcome = "upstream_error"
            await respond(**_ephemeral(error_reply(error_text(error, f"run /cluster {name}"))))
        except Exception:
            outcome = "internal_error"
            await respond(**_ephemeral(self._internal_error(f"/cluster {text!r} from {user}")))
        finally:
            self.on_command(name if name in USAGE else "unknown", outcome)

    async def _decide(self, body: dict[str, Any], respond: Respond, approve: bool) -> None:
        user = body["user"]["id"]
        request_id = body["actions"][0].get("value", "")
        try:
            role = await self.roles.of(user)
            reply = await self.changes.decide(user, role, request_id, approve)
            if reply is not None:
                await respond(**_ephemeral(reply, replace_original=False))
        except Exception:
            await respond(
                **_ephemeral(
                    self._internal_error(f"click on {request_id} by {user}"), replace_original=False
                )
            )

    def _internal_error(self, what: str) -> Reply:
        reference = secrets.token_hex(4)
        log.exception("internal error [ref %s] handling %s", reference, what)
        return Reply("An internal error occurred").add(
            Text(f"An internal error occurred (reference `{reference}`). It has been logged.")
        )
