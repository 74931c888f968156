"""Bolt listeners: ack at once, then parse, authorize and hand the work to the handlers.

Listeners stay thin. Work after the ack runs as tracked background tasks, so shutdown can wait
for it. Every command gets exactly one reply, through its ``response_url`` (which works in
any conversation, the bot a member or not): a reply that takes more than ``WORKING_AFTER``
seconds is preceded by "Working on it…", which the reply then replaces. A user-facing error
carries its own message; anything else is logged with a reference and the user sees only
that reference.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.redact import Redactor
from bot.slack.render import render
from bot.vertex.errors import VertexError
from handlers.approvals import Approvals
from handlers.clusters import error_text
from handlers.commands import USAGE, CommandError, parse
from handlers.dispatch import ClusterBot, needed_role
from handlers.idle_clicks import IdleClicks
from handlers.policy import Policy, Role
from handlers.replies import Reply, Text, error_reply, escape
from handlers.sweep import Sweeper

COMMAND = "/cluster"
IDLE_ACTIONS = ("idle_scale_to_zero", "idle_delete", "idle_snooze", "idle_keep", "idle_unkeep")
DECISIONS = ("approve", "reject", "withdraw")
WORKING_AFTER = 2.0  # seconds before a slow reply is announced with "Working on it…"
GROUP_CACHE_SECONDS = 300.0

log = logging.getLogger(__name__)


class Background:
    """Tasks started after an ack; shutdown waits for them, then cancels what is left."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self, limit: float = 30.0) -> int:
        """Wait up to ``limit`` seconds; cancel the rest. Returns how many were cancelled."""
        if not self.tasks:
            return 0
        _done, pending = await asyncio.wait(set(self.tasks), timeout=limit)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        return len(pending)


class Roles:
    """A user's role from the policy, resolving Slack user groups (cached a few minutes).

    The cache starts empty and stale: the first lookup always reads the groups, whatever
    the clock reads (a monotonic clock counts from boot, so "0" is not "long ago")."""

    def __init__(
        self,
        policy: Policy,
        client: AsyncWebClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.client = client
        self.clock = clock
        self._members: dict[str, frozenset[str]] = {}
        self._fetched: float | None = None

    async def _groups_of(self, user: str) -> frozenset[str]:
        groups = self.policy.group_ids()
        if not groups:
            return frozenset()
        if self._fetched is None or self.clock() - self._fetched > GROUP_CACHE_SECONDS:
            members: dict[str, frozenset[str]] = {}
            for group in sorted(groups):
                try:
                    reply = await self.client.usergroups_users_list(usergroup=group)
                    members[group] = frozenset(reply.get("users") or [])
                except SlackApiError as error:
                    log.warning("cannot read user group %s: %s", group, error.response.get("error"))
                    members[group] = frozenset()
            self._members, self._fetched = members, self.clock()
        return frozenset(g for g, users in self._members.items() if user in users)

    async def of(self, user: str) -> Role:
        return self.policy.role_of(user, await self._groups_of(user))


class Responder:
    """Replies to a ``response_url`` over one pooled HTTP session (Slack allows 5 uses in
    30 minutes; a command uses at most two: "Working on it…" and the reply)."""

    def __init__(self, redactor: Redactor, timeout: float = 10.0) -> None:
        self.redactor = redactor
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def send(
        self,
        url: str,
        reply: Reply,
        *,
        public: bool = False,
        replace_original: bool | None = None,
    ) -> None:
        text, blocks = render(reply, self.redactor)
        body: dict[str, Any] = {
            "text": text,
            "blocks": blocks,
            "response_type": "in_channel" if public else "ephemeral",
        }
        if replace_original is not None:
            body["replace_original"] = replace_original
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        try:
            async with self._session.post(url, json=body) as answer:
                if answer.status >= 400:
                    log.warning("response_url refused a reply: HTTP %d", answer.status)
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("could not reply through response_url: %s", type(error).__name__)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _action_value(action: dict[str, Any]) -> str:
    """What a button or menu carries. Slack leaves ``value`` out of a button that has none;
    our buttons name their subject in ``block_id`` too (``decide:r-123``), so fall back on it."""
    selected = action.get("selected_option") or {}
    value = selected.get("value") or action.get("value")
    if value:
        return str(value)
    block_id = str(action.get("block_id") or "")
    return block_id.partition(":")[2]


class SlackEdge:
    def __init__(
        self,
        app: AsyncApp,
        bot: ClusterBot,
        changes: Approvals,
        policy: Policy,
        roles: Roles,
        background: Background,
        responder: Responder,
        *,
        clicks: IdleClicks | None = None,
        sweeper: Sweeper | None = None,
        on_command: Callable[[str, str], None] | None = None,
        working_after: float = WORKING_AFTER,
    ) -> None:
        self.app = app
        self.bot = bot
        self.changes = changes
        self.policy = policy
        self.roles = roles
        self.background = background
        self.responder = responder
        self.clicks = clicks
        self.sweeper = sweeper
        self.on_command = on_command or (lambda name, outcome: None)
        self.working_after = working_after

    def register(self) -> None:
        self.app.command(COMMAND)(self.command)
        for action in DECISIONS:
            self.app.action(action)(self.decision)
        for action in IDLE_ACTIONS:
            self.app.action(action)(self.idle_action)
        self.app.action("idle_sweep_now")(self.sweep_now)

    # Bolt passes arguments by parameter name.
    async def command(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        self.background.spawn(self._command(body))

    async def decision(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        self.background.spawn(self._decide(body))

    async def idle_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        self.background.spawn(self._idle_action(body))

    async def sweep_now(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        self.background.spawn(self._sweep_now(body))

    # -- commands ------------------------------------------------------------------------------

    async def _command(self, body: dict[str, Any]) -> None:
        url = str(body.get("response_url") or "")
        work = asyncio.ensure_future(self._answer(body))
        done, _ = await asyncio.wait({work}, timeout=self.working_after)
        if not done:
            await self.responder.send(url, Reply("Working on it…").add(Text("Working on it…")))
        reply, public = await work
        if reply is not None:
            await self.responder.send(
                url, reply, public=public, replace_original=True if not done else None
            )

    async def _answer(self, body: dict[str, Any]) -> tuple[Reply | None, bool]:
        """The one reply to a command, and whether everyone in the channel sees it."""
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        text = str(body.get("text", ""))
        name = (text.split() or ["help"])[0].lower()
        outcome = "ok"
        try:
            command = parse(text)
            if not self.policy.channel_allowed(channel):
                outcome = "denied"
                allowed = ", ".join(f"<#{escape(c)}>" for c in self.policy.channels)
                refusal = f"clusterbot is not enabled in this channel; use {allowed}."
                return Reply(refusal).add(Text(refusal)), False
            role = await self.roles.of(user)
            needed = needed_role(command)
            if role < needed:
                outcome = "denied"
                reason = (
                    f"/cluster {name} needs the {needed.label} role; you are {role.label}. "
                    "An admin can grant it in the policy file."
                )
                return error_reply(reason), False
            reply = await self.bot.handle(command, user, channel)
            if reply is None:  # answered in the channel (an approval card)
                return None, False
            return reply, reply.public
        except CommandError as error:
            outcome = "bad_input"
            name = error.subcommand or name
            return error_reply(error.reason, error.usage), False
        except VertexError as error:
            outcome = "upstream_error"
            return error_reply(error_text(error, f"run /cluster {name}")), False
        except Exception:
            outcome = "internal_error"
            return self._internal_error(f"/cluster {text[:200]!r} from {user}"), False
        finally:
            self.on_command(name if name in USAGE else "unknown", outcome)

    # -- clicks --------------------------------------------------------------------------------

    async def _decide(self, body: dict[str, Any]) -> None:
        user = str(body["user"]["id"])
        action = body["actions"][0]
        request_id = _action_value(action)
        url = str(body.get("response_url") or "")
        card_ts = (body.get("container") or {}).get("message_ts")
        try:
            if action["action_id"] == "withdraw":
                reply = await self.changes.withdraw(user, request_id, card_ts)
            else:
                role = await self.roles.of(user)
                approve = action["action_id"] == "approve"
                reply = await self.changes.decide(user, role, request_id, approve, card_ts)
        except Exception:
            reply = self._internal_error(f"click on {request_id} by {user}")
        if reply is not None:
            await self.responder.send(url, reply, replace_original=False)

    async def _idle_action(self, body: dict[str, Any]) -> None:
        user = str(body["user"]["id"])
        action = body["actions"][0]
        url = str(body.get("response_url") or "")
        try:
            if self.clicks is None:
                raise RuntimeError("idle actions arrived but idle detection is not configured")
            reply = await self.clicks.click(
                action["action_id"], user, await self.roles.of(user), _action_value(action)
            )
        except Exception:
            reply = self._internal_error(f"{action.get('action_id')} by {user}")
        if reply is not None:
            await self.responder.send(url, reply, replace_original=False)

    async def _sweep_now(self, body: dict[str, Any]) -> None:
        """Sweep at once and replace the report the button was on with the new one."""
        user = str(body["user"]["id"])
        url = str(body.get("response_url") or "")
        try:
            role = await self.roles.of(user)
            if self.sweeper is None:
                reply = Reply("Idle report").add(Text("Idle detection is not configured."))
            elif role < Role.VIEWER:
                reply = error_reply("Sweeping needs the viewer role.")
            else:
                swept = await self.sweeper.sweep(force=True)
                reply = await self.bot.idle_report()
                if swept is None:
                    reply.add(
                        Text("Another replica is sweeping right now; this is the last report.")
                    )
        except Exception:
            reply = self._internal_error(f"sweep now by {user}")
        await self.responder.send(url, reply, replace_original=True)

    def _internal_error(self, what: str) -> Reply:
        reference = secrets.token_hex(4)
        log.exception("internal error [ref %s] handling %s", reference, what)
        return Reply("An internal error occurred").add(
            Text(f"An internal error occurred (reference `{reference}`). It has been logged.")
        )
