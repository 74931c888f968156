"""Bolt listeners: ack at once, then decode and hand the work to the core's dispatcher.

Listeners stay thin: parsing and authorization are the core's. Work after the ack runs as
tracked background tasks, so shutdown can wait for it. Every command gets exactly one reply,
through its ``response_url`` (which works in any conversation, the bot a member or not): a
reply that takes more than ``WORKING_AFTER`` seconds is preceded by "Working on it…", which
the reply then replaces. A user-facing error carries its own message; anything else is logged
with a reference and the user sees only that reference.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from slack_bolt.async_app import AsyncApp

from bot.slack.responder import Responder
from handlers.dispatch import Answer, Dispatcher, Read, read
from handlers.forms.asks import FormAsk
from handlers.replies import Reply, Text

if TYPE_CHECKING:
    from bot.slack.failures import Failures

COMMAND = "/cluster"
WORKING = Reply("Working on it…").add(Text("Working on it…"))
WORKING_AFTER = 2.0  # seconds before a slow reply is announced with "Working on it…"

log = logging.getLogger(__name__)


T = TypeVar("T")


class Background:
    """Tasks started after an ack; shutdown waits for them, then cancels what is left."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

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


def _action_value(action: dict[str, Any]) -> str:
    """What a button or menu carries. Slack leaves ``value`` out of a button that has none;
    the renderer names each actions block after its first action (``approve:r-123``), so fall
    back on that."""
    selected = action.get("selected_option") or {}
    value = selected.get("value") or action.get("value")
    if value:
        return str(value)
    block_id = str(action.get("block_id") or "")
    return block_id.partition(":")[2]


class SlackEdge:
    """Acks at once, decodes what Slack sent, hands it to the dispatcher and delivers its one
    answer; anything unexpected goes to ``Failures`` (bot/slack/failures.py)."""

    def __init__(
        self,
        app: AsyncApp,
        dispatcher: Dispatcher,
        background: Background,
        responder: Responder,
        *,
        failures: Failures,
        on_command: Callable[[str, str], None] | None = None,
        working_after: float = WORKING_AFTER,
        open_form: Callable[[Any, dict[str, Any], FormAsk], Awaitable[None]] | None = None,
        open_form_clicked: Callable[[Any, dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.open_form = open_form
        self.open_form_clicked = open_form_clicked
        self.app = app
        self.dispatcher = dispatcher
        self.background = background
        self.responder = responder
        self.failures = failures
        self.on_command = on_command or (lambda name, outcome: None)
        self.working_after = working_after

    def register(self) -> None:
        self.app.command(COMMAND)(self.command)
        for action_id in self.dispatcher.action_ids:
            self.app.action(action_id)(self.action)

    # Bolt passes arguments by parameter name.
    async def command(self, ack: Any, body: dict[str, Any]) -> None:
        """An answer at hand goes back in the ack's own body (Slack shows it as the
        command's reply: https://api.slack.com/interactivity/slash-commands#responding_to_commands);
        any other is worked out after the ack and sent to the response_url. A command with
        words missing that a form can ask for opens the form instead."""
        words = read(str(body.get("text", "")), self.dispatcher.registry)  # once: form and answer
        ask = words.form if body.get("trigger_id") else None
        if ask is not None and self.open_form is not None:
            self.on_command(self.dispatcher.registry.forms[ask.kind].subcommand, "form")
            await self.open_form(ack, body, ask)
            return
        answer = await self._answer(body, words, instant=True)
        if answer is None or answer.reply is None:
            await ack()
            work = self._command(body, words)
            self.background.spawn(self.failures.after_ack(work, body, command=words.name))
            return
        self.on_command(answer.name, str(answer.outcome))
        await ack(**self.responder.message(answer.reply, public=answer.public))

    async def action(self, ack: Any, body: dict[str, Any]) -> None:
        action_id = str((body.get("actions") or [{}])[0].get("action_id"))
        opens = action_id.startswith("open_form_")  # OpenForm's ids: the form's kind
        if opens and self.open_form_clicked is not None:
            await self.open_form_clicked(ack, body)  # a form opens on this click's trigger
            return
        await ack()
        self.background.spawn(self.failures.after_ack(self._click(body), body))

    async def _command(self, body: dict[str, Any], words: Read) -> None:
        url = str(body.get("response_url") or "")
        loop = asyncio.get_running_loop()
        working: list[asyncio.Task[None]] = []

        def announce() -> None:  # the answer is slow: say so first
            working.append(loop.create_task(self.responder.send(url, WORKING)))

        timer = loop.call_later(self.working_after, announce)
        try:
            answer = await self._answer(body, words, instant=False)
        finally:
            timer.cancel()
        assert answer is not None  # only the instant path declines
        if working:
            await working[0]  # "Working on it…" arrives first; the answer replaces it
        self.on_command(answer.name, str(answer.outcome))
        if answer.reply is not None:
            await self.responder.send(
                url,
                answer.reply,
                public=answer.public,
                replace_original=True if working else None,
            )

    async def _answer(self, body: dict[str, Any], words: Read, *, instant: bool) -> Answer | None:
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        if instant:
            return await self.dispatcher.instant(user, channel, words)
        return await self.dispatcher.command(user, channel, words)

    async def _click(self, body: dict[str, Any]) -> None:
        user = str(body["user"]["id"])
        action = body["actions"][0]
        url = str(body.get("response_url") or "")
        card_ts = (body.get("container") or {}).get("message_ts")
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        answer = await self.dispatcher.click(
            user, str(action["action_id"]), _action_value(action), card_ts, channel
        )
        if answer.reply is not None:
            await self.responder.send(url, answer.reply, replace_original=answer.replace_original)
