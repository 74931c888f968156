"""The one place an unexpected error in answering Slack ends.

Bolt calls ``Failures.bolt`` (registered with ``app.error``) for what fails before a
request's ack; the work a listener starts after its ack runs inside ``Failures.guard``,
which hands what it raises to the same handling (Bolt's error handler never sees a task
that outlives the request). Either way the error is logged once with a short reference,
the person sees only the reference, and a command's metric counts it as an internal error.
An error meant for the person (a refusal, a control-plane failure) never gets here: the
core answers it in words.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from slack_bolt.response import BoltResponse

from handlers.dispatch import Outcome, read
from handlers.replies import Code, Reply, Text

if TYPE_CHECKING:
    from bot.slack.responder import Responder

log = logging.getLogger(__name__)
T = TypeVar("T")
Tell = Callable[[Reply], Awaitable[None]]
FORM_ERROR = "An internal error occurred; it has been logged."


def internal_error(error: BaseException, what: str) -> Reply:
    """Log the failure with a reference; the person sees only the reference."""
    reference = secrets.token_hex(4)
    log.error("internal error [ref %s] handling %s", reference, what, exc_info=error)
    return Reply("An internal error occurred").add(
        Text("An internal error occurred (reference ", Code(reference), "). It has been logged.")
    )


def _what(body: dict[str, Any]) -> str:
    user = (body.get("user") or {}).get("id") or body.get("user_id") or "someone"
    if body.get("command"):
        return f"/cluster {str(body.get('text', ''))[:200]!r} from {user}"
    if body.get("type") == "view_submission":
        return f"form {(body.get('view') or {}).get('callback_id')} from {user}"
    actions = body.get("actions") or [{}]
    return f"{actions[0].get('action_id') or body.get('type')} by {user}"


def _last_input(view: dict[str, Any]) -> str | None:
    """The block id of a form's last field, where an error that belongs to no field shows."""
    inputs = [b.get("block_id") for b in view.get("blocks") or [] if b.get("type") == "input"]
    return inputs[-1] if inputs else None


class Failures:
    def __init__(self, responder: Responder, on_command: Callable[[str, str], None]) -> None:
        self.responder = responder
        self.on_command = on_command

    async def bolt(self, error: Exception, body: dict[str, Any]) -> BoltResponse:
        """Bolt's error handler: what a listener raised before its ack, answered in the
        request's own response."""
        reply = internal_error(error, _what(body))
        if body.get("command"):  # a slash command's reply is the response's body
            self.on_command(read(str(body.get("text", ""))).name, str(Outcome.INTERNAL_ERROR))
            return _json(self.responder.message(reply))
        view = body.get("view") or {}
        block = _last_input(view) if body.get("type") == "view_submission" else None
        if block is not None:  # the form stays open and says so at its last field
            return _json({"response_action": "errors", "errors": {block: FORM_ERROR}})
        url = str(body.get("response_url") or "")
        if url:
            await self.responder.send(url, reply)
        return BoltResponse(status=200, body="")  # answered: Slack must not send it again

    async def guard(
        self, work: Awaitable[T], what: str, *, tell: Tell | None = None, command: str = ""
    ) -> T | None:
        """Run work started after an ack; what it raises is logged and told like Bolt's
        (``command``: the subcommand, counted as an internal error)."""
        try:
            return await work
        except Exception as error:  # the one catch-all for work after an ack
            reply = internal_error(error, what)
            if command:
                self.on_command(command, str(Outcome.INTERNAL_ERROR))
            if tell is not None:
                await tell(reply)
            return None

    async def after_ack(self, work: Awaitable[T], body: dict[str, Any], command: str = "") -> None:
        """Work a listener started after acking ``body``, told through its response_url."""
        tell = self.by_url(str(body.get("response_url") or ""))
        await self.guard(work, _what(body), tell=tell, command=command)

    def by_url(self, url: str) -> Tell | None:
        """How to tell the person through a response_url, when there is one."""
        if not url:
            return None

        async def tell(reply: Reply) -> None:
            await self.responder.send(url, reply)

        return tell


def _json(document: dict[str, Any]) -> BoltResponse:
    return BoltResponse(
        status=200, body=json.dumps(document), headers={"content-type": "application/json"}
    )
