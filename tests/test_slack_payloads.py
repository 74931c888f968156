"""Slack's documented payloads through the bot, signed as Slack signs them: a slash command
from the docs, one typed in a DM and one in a private channel the bot is not in, and
block_actions clicks as the docs and bolt-python's own tests show them (a generated block_id,
no message on an ephemeral click, an Enterprise Grid user, a button without a value)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.demo_stack import Stack, demo_stack, text_of

FIXTURES = Path(__file__).with_name("fixtures") / "slack"


def payload(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name).read_text())["body"])


class Hooks:
    """Stands where a payload's response_url points (hooks.slack.com is not reachable)."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.server: TestServer | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.replies.append(await request.json())
        return web.json_response({"ok": True})

    def url(self, name: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(f"/hook/{name}"))


@pytest.fixture
async def hooks() -> AsyncIterator[Hooks]:
    recorder = Hooks()
    app = web.Application()
    app.router.add_post("/hook/{name}", recorder.handle)
    recorder.server = TestServer(app, host="127.0.0.1")
    await recorder.server.start_server()
    yield recorder
    await recorder.server.close()


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def deliver(stack: Stack, body: str) -> int:
    """POST a form body to the bot, signed with the workspace's secret, as Slack does."""
    status, _ = await stack.deliver(body)
    return status


async def answered(stack: Stack, hooks: Hooks, count: int = 1) -> list[dict[str, Any]]:
    async def got() -> bool:
        return len(hooks.replies) >= count

    await stack.wait_for(got)
    return hooks.replies


async def test_the_docs_slash_command_is_answered(stack: Stack, hooks: Hooks) -> None:
    body = payload("slash_command.json")
    body["response_url"] = hooks.url("list")
    assert await deliver(stack, urlencode(body)) == 200
    [reply] = await answered(stack, hooks)
    assert reply["response_type"] == "ephemeral"
    assert "train01" in text_of(reply) and "cpu01" in text_of(reply)


@pytest.mark.parametrize("name", ["slash_command_dm.json", "slash_command_private.json"])
async def test_a_change_asked_where_the_bot_cannot_post_leaves_nothing_pending(
    stack: Stack, hooks: Hooks, name: str
) -> None:
    body = payload(name)
    body.update(user_id="U0ALICE", user_name="alice", response_url=hooks.url("change"))
    assert await deliver(stack, urlencode(body)) == 200
    [reply] = await answered(stack, hooks)
    text = text_of(reply)
    assert "cannot post the approval card in this conversation" in text
    assert "/invite @clusterbot" in text and "Nothing was requested" in text
    assert "Usage" not in text  # the input was fine: no usage under a refusal
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
    # and the cluster is not blocked: the same change asked in #ml-infra gets its card
    cluster = "train01" if "resize" in body["text"] else "cpu01"
    card = await stack.card("alice", f"/cluster {body['text']}")
    assert cluster in text_of(card)


async def test_reads_work_anywhere_through_the_response_url(stack: Stack, hooks: Hooks) -> None:
    body = payload("slash_command_private.json")
    body.update(text="show cpu01", response_url=hooks.url("read"))
    assert await deliver(stack, urlencode(body)) == 200
    [reply] = await answered(stack, hooks)
    assert reply["response_type"] == "ephemeral" and "cpu01" in text_of(reply)


async def test_the_docs_block_actions_click_is_decided(stack: Stack, hooks: Hooks) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    request_id = card["blocks"][-1]["block_id"].partition(":")[2] or next(
        e["value"] for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]
    )
    body = payload("block_actions.json")
    body["actions"][0].update(action_id="approve", value=request_id)
    body["response_url"] = hooks.url("click")
    assert await deliver(stack, urlencode({"payload": json.dumps(body)})) == 200
    [reply] = await answered(stack, hooks)
    # UA8RXUSPL is no approver in this workspace's policy: told so, privately
    assert "You cannot approve this" in text_of(reply) and reply["replace_original"] is False
    assert await stack.requests("PATCH") == []


async def test_a_button_without_a_value_is_read_from_its_block(stack: Stack, hooks: Hooks) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    block = next(b for b in card["blocks"] if b["type"] == "actions")
    body = payload("block_actions_no_value.json")
    body["actions"][0].update(action_id="reject", block_id=block["block_id"])
    body["user"] = {"id": "U0BOB", "username": "bob", "team_id": "T0DEMO"}
    body["response_url"] = hooks.url("reject")
    # the click was on this card: Slack names its message and channel (the bot may read the
    # card's ts from here before it has saved it)
    body["container"].update(message_ts=card["ts"], channel_id=card["channel"])
    body["channel"]["id"] = card["channel"]
    body["message"]["ts"] = card["ts"]
    assert await deliver(stack, urlencode({"payload": json.dumps(body)})) == 200
    await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "*Rejected* by <@U0BOB>" in text_of(m) for m in ms)
    )


async def test_an_ephemeral_click_by_a_grid_user(stack: Stack, hooks: Hooks) -> None:
    body = payload("block_actions_ephemeral_grid.json")
    body["actions"][0].update(action_id="idle_sweep_now", value="sweep", block_id="idle-report")
    body["response_url"] = hooks.url("sweep")
    assert "message" not in body and body["user"]["id"].startswith("W")
    assert await deliver(stack, urlencode({"payload": json.dumps(body)})) == 200
    [reply] = await answered(stack, hooks)
    assert reply["replace_original"] is True and "Idle report" in text_of(reply)


async def test_a_grid_user_is_answered_and_held_to_the_policy(stack: Stack) -> None:
    # the stand-in joins an Enterprise Grid org: payloads carry enterprise_id, dave is W0DAVE
    status, _ = await stack.post("/sandbox/api/config", {"enterprise_id": "E0GRID"})
    assert status == 200
    listed = text_of(await stack.reply_to("dave", "/cluster list"))
    assert "train01" in listed and "cpu01" in listed
    # dave has the default role (viewer): he may read, not ask for a change
    refused = text_of(await stack.reply_to("dave", "/cluster resize train01 a4 3"))
    assert "viewer" in refused and await stack.service.store.requests_in(["pending"]) == []
