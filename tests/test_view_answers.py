"""What Slack does with the app's answer to a modal's submission, in the stand-in: an empty
body closes the modal, ``errors`` shows messages at the input blocks it names, and any other
answer (errors at a block that is not an input of the view, a body that is not a known
``response_action``) leaves the modal open under the "trouble connecting" banner, with the
app's messages shown nowhere. The stand-in is never more forgiving than Slack: a form that
answers errors at a block it lacks fails here as it would in Slack."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.slack.view_delivery import TROUBLE
from tests.support.slack_stack import TOKEN, SlackStack, slack_stack

FORM = {
    "type": "modal",
    "callback_id": "form",
    "title": {"type": "plain_text", "text": "A form"},
    "submit": {"type": "plain_text", "text": "Go"},
    "blocks": [
        {"type": "section", "block_id": "about", "text": {"type": "mrkdwn", "text": "About"}},
        {
            "type": "input",
            "block_id": "size",
            "label": {"type": "plain_text", "text": "Size"},
            "element": {"type": "plain_text_input", "action_id": "value"},
        },
    ],
}


class App:
    """A request URL that keeps each trigger and answers every submission with ``answer``."""

    def __init__(self) -> None:
        self.answer = ""
        self.triggers: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        form = parse_qs((await request.read()).decode())
        self.triggers += form.get("trigger_id", [])
        if "payload" in form:
            return web.Response(text=self.answer, content_type="application/json")
        return web.Response()


async def shown(stack: SlackStack) -> list[dict[str, Any]]:
    status, body = await stack.get("/sandbox/api/views?user=alice")
    assert status == 200
    return list(body["views"])


@pytest.mark.parametrize(
    ("answer", "errors", "open_after"),
    [
        ("", {}, False),
        ('{"response_action": "errors", "errors": {"size": "too big"}}', {"size": "too big"}, True),
        # errors at a section block, at a block the view lacks, or none at all
        ('{"response_action": "errors", "errors": {"about": "no"}}', {"": TROUBLE}, True),
        ('{"response_action": "errors", "errors": {"max:a4": "no"}}', {"": TROUBLE}, True),
        ('{"response_action": "errors", "errors": {}}', {"": TROUBLE}, True),
        # a body that is not an answer Slack knows
        ('{"ok": true}', {"": TROUBLE}, True),
        ("not json", {"": TROUBLE}, True),
        ('{"response_action": "update", "view": {"type": "modal"}}', {"": TROUBLE}, True),
    ],
)
async def test_the_answer_to_a_submission(
    answer: str, errors: dict[str, str], open_after: bool
) -> None:
    app = App()
    server = web.Application()
    server.router.add_post("/slack/events", app.handle)
    running = TestServer(server, host="127.0.0.1")
    await running.start_server()
    try:
        async with slack_stack(with_bot=False) as stack:
            stack.workspace.bot_url = str(running.make_url("/slack/events"))
            await stack.command("alice", "/cluster form")
            client = AsyncWebClient(token=TOKEN, base_url=stack.api_url)
            opened = await client.views_open(trigger_id=app.triggers[-1], view=FORM)
            app.answer = answer
            values = {"size": {"value": "12"}}
            status, reply = await stack.post(
                "/sandbox/api/submit",
                {"user": "alice", "view_id": opened["view"]["id"], "values": values},
            )
            assert status == 200 and reply["status"] == 200
            assert reply["errors"] == errors
            views = await shown(stack)
            assert bool(views) is open_after
            if open_after:  # what was typed is kept
                [view] = views
                assert view["errors"] == errors
                assert view["state"]["values"]["size"]["value"]["value"] == "12"
    finally:
        await running.close()
