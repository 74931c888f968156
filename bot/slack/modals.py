"""Forms in Slack: open one for a command that asks for it, keep it up to date as fields
change, and turn its submission into the same request as the typed command.

A modal opens on the command's ``trigger_id``, which lasts 3 s: the form opens at once and
what needs the control plane (a cluster's pools) fills in by ``views.update``, guarded by the
view's ``hash`` so an older update never overwrites a newer one. A submission must be acked
within 3 s: the request is made while the ack waits up to ``SUBMIT_WAIT`` seconds, so a
refusal shows at its field (``response_action: errors``); when it takes longer the form
closes and the outcome is said in the channel, to the submitter alone.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.failures import Failures, Tell
from bot.slack.files import FileRefused, SlackFiles
from bot.slack.listeners import Background
from bot.slack.modal_views import (
    CALLBACK,
    CLUSTER_ACTION,
    block_of,
    entries_of,
    modal,
    option,
    state_of,
    state_values,
    unreadable_form,
)
from bot.slack.responder import Responder
from handlers.actions import open_form
from handlers.dispatch import Dispatcher
from handlers.entities import Submission
from handlers.errors import UserError
from handlers.forms.asks import FormAsk
from handlers.forms.choices import Forms
from handlers.forms.flow import FormFlow
from handlers.forms.flow import state_of as state_asked
from handlers.forms.model import BadState, Entries, FormState
from handlers.intake import Intake, submission_key
from handlers.replies import Reply, Text, error_reply, plain

SUBMIT_WAIT = 2.0  # seconds a submission's ack waits for the request (Slack allows 3)

log = logging.getLogger(__name__)


class Modals:
    def __init__(
        self,
        *,
        app: AsyncApp,
        client: AsyncWebClient,
        dispatcher: Dispatcher,
        forms: Forms,
        background: Background,
        responder: Responder,
        intake: Intake,
        failures: Failures,
        home_channel: str | None = None,
    ) -> None:
        self.failures = failures
        self.app = app
        self.client = client
        self.dispatcher = dispatcher
        self.forms = forms
        self.flow = FormFlow(forms, dispatcher, home_channel)
        self.kinds = dispatcher.registry.forms  # every capability's forms, by kind
        self.background = background
        self.responder = responder
        self.intake = intake
        self.home_channel = home_channel

    def register(self) -> None:
        self.app.options(CLUSTER_ACTION)(self.cluster_options)
        self.app.action(re.compile(r"^form_"))(self.changed)
        self.app.view(CALLBACK)(self.submitted)

    # -- opening -------------------------------------------------------------------------------

    async def open(self, ack: Any, body: dict[str, Any], ask: FormAsk) -> None:
        """Open the form a command asked for (or say why not, in the ack)."""
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        subcommand = self.kinds[ask.kind].subcommand
        refusal = await self.dispatcher.refusal(user, channel, subcommand, ask.role)
        if refusal is not None and refusal.reply is not None:
            await ack(**self.responder.message(refusal.reply))
            return
        await ack()
        await self._open(user, channel, str(body["trigger_id"]), ask, body.get("response_url"))

    async def open_clicked(self, ack: Any, body: dict[str, Any]) -> None:
        """Open a form from a button: the Home tab's (its requests go to the home channel) or
        a message's in a channel (a digest's opportunity, on its cluster)."""
        await ack()
        user = str(body["user"]["id"])
        action = body["actions"][0]
        clicked = open_form(str(action.get("action_id")), str(action.get("value")))
        kind = clicked.kind
        # from a message in a channel (a digest), the request goes there; from the Home tab,
        # to the home channel
        channel = str((body.get("channel") or {}).get("id") or self.home_channel or "")
        spec = self.kinds.get(kind)  # None: an id no form of ours has
        if spec is None or not spec.clickable:
            return
        ask = FormAsk(kind, clicked.cluster)
        refusal = await self.dispatcher.refusal(user, channel, spec.subcommand, ask.role)
        if refusal is not None:
            log.info("form %s not opened for %s: %s", kind, user, refusal.reason)
            return
        await self._open(user, channel, str(body["trigger_id"]), ask, None)

    async def _open(
        self, user: str, channel: str, trigger: str, ask: FormAsk, response_url: Any
    ) -> None:
        state = state_asked(ask, channel)
        try:
            view = modal(self.flow.first(state))
            opened = await self.client.views_open(trigger_id=trigger, view=view)
        except SlackApiError as error:
            code = error.response.get("error")
            log.warning("form %s not opened for %s: %s", ask.kind, user, code)
            if response_url:
                reason = f"the form could not open ({code}); type the whole command instead"
                await self.responder.send(str(response_url), error_reply(reason))
            return
        if ask.cluster:
            view = opened["view"]
            self.background.spawn(self._fill(view["id"], view["hash"], state, ask.pool))

    async def _fill(self, view_id: str, hash_: str, state: FormState, pool: str | None) -> None:
        """The form for a cluster named in the command, once the cluster is read."""
        await self._update(view_id, hash_, modal(await self.flow.filled(state, pool)))

    async def _update(self, view_id: str, hash_: str | None, view: dict[str, Any]) -> None:
        try:
            await self.client.views_update(view_id=view_id, hash=hash_, view=view)
        except SlackApiError as error:
            # hash_conflict: a newer change already updated the form; not_found: it closed
            messages = (error.response.get("response_metadata") or {}).get("messages") or []
            log.info("form %s not updated: %s %s", view_id, error.response.get("error"), messages)

    # -- while it is open ------------------------------------------------------------------------

    async def cluster_options(self, ack: Any, body: dict[str, Any]) -> None:
        try:
            typed = str(body.get("value") or "")
            choices = await asyncio.wait_for(self.forms.clusters(typed), 2.5)
        except TimeoutError:
            choices = []
        except UserError:  # the control plane could not list them: an empty menu says so
            choices = []
        await ack(options=[option(c) for c in choices])

    async def changed(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        view = body.get("view") or {}
        if not view:
            return
        self.background.spawn(self._changed(view))

    async def _changed(self, view: dict[str, Any]) -> None:
        try:
            state = state_of(view, self.kinds)
        except BadState as error:
            log.warning("a pick in a form with unreadable metadata ignored: %s", error)
            return
        form = await self.flow.changed(state, entries_of(state_values(view)))
        if form is not None:
            await self._update(str(view["id"]), view.get("hash"), modal(form))

    # -- submitting --------------------------------------------------------------------------

    async def submitted(self, ack: Any, body: dict[str, Any]) -> None:
        view = body["view"]
        user = str(body["user"]["id"])
        try:
            state = state_of(view, self.kinds)
        except BadState as error:
            reference = secrets.token_hex(4)
            log.warning("form from %s refused [ref %s]: %s", user, reference, error)
            await ack(response_action="update", view=unreadable_form(reference))
            return
        # kept before any work, and the work owned by the drain from its first step, so a stop
        # at any moment ends it with a card or a word to the sender (handlers/intake.py)
        key = submission_key(str(view.get("id") or ""), str(view.get("hash") or ""))
        channel = state.channel or self.home_channel or ""
        submission = await self.intake.receive(key, user, channel, f"{state.kind} form")
        if submission is None:  # a replay of a submission already taken
            await ack()
            return
        task = self.background.spawn(self._owned(submission, state, state_values(view)))
        done, _ = await asyncio.wait({task}, timeout=SUBMIT_WAIT)
        if task in done and (errors := task.result()):
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        if task not in done:
            told = self._not_made(user, state.channel)
            late = self._late(task, told)
            self.background.spawn(self.failures.guard(late, f"form {state.kind}", tell=told))

    async def _owned(
        self, submission: Submission, state: FormState, values: dict[str, dict[str, Any]]
    ) -> dict[str, str]:
        try:
            errors = await self._submit(submission.user, state, values)
        except asyncio.CancelledError:  # cut off by a stop: told now, not left to guess
            await self.intake.settle(submission)
            raise
        except Exception:  # nothing was made: said so, and the error goes on to Failures
            await self.intake.refused(submission)
            raise
        if errors:
            await self.intake.refused(submission)
        else:
            await self.intake.made(submission)
        return errors

    def _not_made(self, user: str, channel: str) -> Tell:
        """Tell the sender, privately, that their form's request was not made, and why."""

        async def tell(reply: Reply) -> None:
            said = " ".join(plain(p.spans) for p in reply.parts if isinstance(p, Text))
            text = "Your form's request was not made: " + said
            try:
                await self.client.chat_postEphemeral(channel=channel, user=user, text=text)
            except SlackApiError as error:
                log.warning("could not tell %s: %s", user, error.response.get("error"))

        return tell

    async def _late(self, task: asyncio.Task[dict[str, str]], tell: Tell) -> None:
        if errors := await task:
            await tell(Reply("not made").add(Text("; ".join(errors.values()))))

    async def _submit(
        self, user: str, state: FormState, values: dict[str, dict[str, Any]]
    ) -> dict[str, str]:
        """Make the request; the problems keyed by the block that shows them ({} when made)."""
        entries = entries_of(values)
        errors = await self._problems(user, state, entries)
        last = self.dispatcher.registry.last_field(state.kind)

        def shown_at(field: str) -> str:
            # a problem goes to its field's block, or to the form's last field when the form
            # has no such field (a script form has no cluster field)
            return block_of(values, field) or block_of(values, last) or last

        return {shown_at(field): text for field, text in errors.items()}

    async def _problems(self, user: str, state: FormState, entries: Entries) -> dict[str, str]:
        """What is wrong, by field name ({} when the request was made)."""
        files: list[str] = []
        if "file" in entries:  # a form with a file field (a script's)
            uploaded = entries["file"].files
            files, problem = await self._files(uploaded)
            if problem:
                return {"file": problem}
        return await self.flow.submitted(user, state, entries, files)

    async def _files(self, files: Sequence[Mapping[str, Any]]) -> tuple[list[str], str]:
        """Each uploaded file's text, read from Slack with the bot token (``bot/slack/files``)."""
        reader = SlackFiles(str(self.client.token), self.client.base_url)
        session = self.responder.session
        own = session is None or session.closed
        if own:
            session = aiohttp.ClientSession()
        assert session is not None
        try:
            for file in files:
                reader.check(file)  # every file is checked before any is fetched
            return [await reader.text(session, file) for file in files], ""
        except FileRefused as error:
            return [], str(error)
        except (aiohttp.ClientError, TimeoutError):
            return [], "the file could not be read; try again, or paste it"
        finally:
            if own:
                await session.close()
