"""The Slack stand-in speaks Slack's protocol: signed delivery, the Web API, response URLs."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox.slack.workspace import ResponseUrl
from tests.support.slack_stack import SECRET, TOKEN, SlackStack, slack_stack

SLASH_FIELDS = {
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "command",
    "text",
    "api_app_id",
    "is_enterprise_install",
    "response_url",
    "trigger_id",
}


def web_client(stack: SlackStack, token: str = TOKEN) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=stack.api_url)


async def test_users_and_channels(stack: SlackStack) -> None:
    _, users = await stack.get("/sandbox/api/users")
    assert users == [
        {"id": "U0ALICE", "name": "alice", "role": "operator"},
        {"id": "U0BOB", "name": "bob", "role": "approver"},
        {"id": "U0CAROL", "name": "carol", "role": "viewer"},
    ]
    _, channels = await stack.get("/sandbox/api/channels")
    by_name = {c["name"]: c for c in channels}
    assert by_name["ml-infra"]["id"] == "C0MLINFRA" and by_name["ml-infra"]["bot_member"]
    # a private channel and a public one the bot was never invited to, and a DM
    assert by_name["secret-lab"]["is_private"] and not by_name["secret-lab"]["bot_member"]
    assert not by_name["random"]["is_private"] and not by_name["random"]["bot_member"]
    assert by_name["alice-bob"]["is_im"] and by_name["alice-bob"]["id"].startswith("D")


async def test_ack_text_is_shown_only_to_the_user(stack: SlackStack) -> None:
    reply = await stack.command("alice", "/cluster help")
    assert reply["status"] == 200
    assert reply["body"] == "usage: /cluster help | ping | card"  # Bolt acks a str as text
    messages = await stack.messages()
    assert len(messages) == 1
    message = messages[0]
    assert message["ephemeral_to"] == "U0ALICE"
    assert message["user"] == "U0BOT"
    assert message["text"].startswith("usage: /cluster help")
    assert await stack.messages(user="bob") == []
    assert len(await stack.messages(user="alice")) == 1


async def test_in_channel_ack_is_seen_by_everyone(stack: SlackStack) -> None:
    await stack.command("U0ALICE", "/cluster broadcast", channel="C0MLINFRA")
    [message] = await stack.messages(user="carol")
    assert message["ephemeral_to"] is None and message["text"] == "everyone sees this"


async def test_respond_through_response_url(stack: SlackStack) -> None:
    reply = await stack.command("alice", "/cluster ping")
    assert reply == {"status": 200, "body": ""}
    for _ in range(100):  # respond() runs after the ack, in Bolt's background task
        messages = await stack.messages()
        if messages:
            break
        await asyncio.sleep(0.02)
    assert [(m["text"], m["ephemeral_to"]) for m in messages] == [("pong", "U0ALICE")]


async def wait_for(stack: SlackStack, predicate: Any, channel: str = "ml-infra") -> list[Any]:
    for _ in range(200):
        messages = await stack.messages(channel)
        if predicate(messages):
            return messages
        await asyncio.sleep(0.02)
    raise AssertionError(f"condition never held; messages: {messages}")


async def test_click_approve_edits_the_card_and_replies_in_thread(stack: SlackStack) -> None:
    await stack.command("alice", "/cluster card")
    [card] = await wait_for(stack, lambda ms: len(ms) == 1)
    assert card["ephemeral_to"] is None and card["edited"] is None
    assert [b["type"] for b in card["blocks"]] == [
        "header",
        "section",
        "context",
        "divider",
        "actions",
    ]

    status, reply = await stack.post(
        "/sandbox/api/click",
        {"user": "bob", "channel": "ml-infra", "ts": card["ts"], "action_id": "approve"},
    )
    assert status == 200 and reply["status"] == 200
    messages = await wait_for(stack, lambda ms: len(ms) == 2 and ms[0]["edited"])
    edited, threaded = messages
    assert edited["ts"] == card["ts"]
    assert edited["blocks"][0]["text"]["text"] == "*Approved* by <@U0BOB>"
    assert edited["edited"]["user"] == "U0BOT"
    assert threaded["thread_ts"] == card["ts"] and threaded["text"] == "Operation started: 0%"


async def test_reject_replaces_the_original_through_response_url(stack: SlackStack) -> None:
    await stack.command("alice", "/cluster card")
    [card] = await wait_for(stack, lambda ms: len(ms) == 1)
    await stack.post(
        "/sandbox/api/click",
        {"user": "bob", "channel": "ml-infra", "ts": card["ts"], "action_id": "reject"},
    )
    [replaced] = await wait_for(stack, lambda ms: ms[0]["edited"] is not None)
    assert replaced["text"] == "Rejected" and replaced["blocks"] == []


async def test_click_without_such_button_is_404(stack: SlackStack) -> None:
    await stack.command("alice", "/cluster card")
    [card] = await wait_for(stack, lambda ms: len(ms) == 1)
    status, body = await stack.post(
        "/sandbox/api/click",
        {"user": "bob", "channel": "ml-infra", "ts": card["ts"], "action_id": "nothing"},
    )
    assert status == 404 and body["error"] == "no_such_button"
    status, _ = await stack.post(
        "/sandbox/api/click",
        {"user": "bob", "channel": "ml-infra", "ts": "1.000001", "action_id": "approve"},
    )
    assert status == 404


async def test_unknown_user_channel_or_command(stack: SlackStack) -> None:
    for body in (
        {"user": "mallory", "channel": "ml-infra", "text": "/cluster help"},
        {"user": "alice", "channel": "nowhere", "text": "/cluster help"},
        {"user": "alice", "channel": "ml-infra", "text": "/deploy now"},
    ):
        status, reply = await stack.post("/sandbox/api/command", body)
        assert status in (400, 404) or reply["ok"] is False, body
        assert reply["ok"] is False


class Recorder:
    """A request URL that records what it receives and acks as configured."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.status = status
        self.delay = delay

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.read()))
        await asyncio.sleep(self.delay)
        return web.Response(status=self.status)


async def recorder_server(recorder: Recorder) -> TestServer:
    app = web.Application()
    app.router.add_post("/slack/events", recorder.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def test_slash_command_is_signed_and_complete() -> None:
    recorder = Recorder()
    server = await recorder_server(recorder)
    async with slack_stack(with_bot=False) as stack:
        stack.workspace.bot_url = str(server.make_url("/slack/events"))
        await stack.command("carol", "/cluster show  train01 ")
    await server.close()
    [(headers, body)] = recorder.requests
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid(
        body=body,
        timestamp=headers["X-Slack-Request-Timestamp"],
        signature=headers["X-Slack-Signature"],
    )
    assert not SignatureVerifier("another-secret").is_valid(
        body=body,
        timestamp=headers["X-Slack-Request-Timestamp"],
        signature=headers["X-Slack-Signature"],
    )
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    assert set(form) == SLASH_FIELDS
    assert form["command"] == "/cluster" and form["text"] == "show  train01"
    assert form["user_id"] == "U0CAROL" and form["channel_name"] == "ml-infra"
    assert form["response_url"].startswith(stack.url + "/sandbox/response/")


async def test_block_actions_payload_is_signed_and_complete() -> None:
    recorder = Recorder()
    server = await recorder_server(recorder)
    async with slack_stack(with_bot=False) as stack:
        client = web_client(stack)
        from tests.support.slack_testbot import CARD_BLOCKS

        posted = await client.chat_postMessage(channel="C0MLINFRA", text="card", blocks=CARD_BLOCKS)
        stack.workspace.bot_url = str(server.make_url("/slack/events"))
        status, reply = await stack.post(
            "/sandbox/api/click",
            {"user": "bob", "channel": "ml-infra", "ts": posted["ts"], "action_id": "reject"},
        )
        assert status == 200 and reply == {"status": 200, "body": ""}
    await server.close()
    [(headers, body)] = recorder.requests
    assert SignatureVerifier(SECRET).is_valid(
        body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    )
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    assert payload["type"] == "block_actions"
    assert payload["user"] == {"id": "U0BOB", "username": "bob", "name": "bob", "team_id": "T0DEMO"}
    assert payload["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": "C0MLINFRA",
        "is_ephemeral": False,
    }
    assert payload["channel"] == {"id": "C0MLINFRA", "name": "ml-infra"}
    assert payload["message"]["ts"] == posted["ts"]
    # Slack gives every block without an id a generated one, and sends it back
    sent = payload["message"]["blocks"]
    assert [{k: v for k, v in b.items() if k != "block_id"} for b in sent] == [
        {k: v for k, v in b.items() if k != "block_id"} for b in CARD_BLOCKS
    ]
    assert all(b.get("block_id") for b in sent)
    assert [b["block_id"] for b in sent if "block_id" in b and b["type"] == "actions"] == [
        "decision"
    ]
    [action] = payload["actions"]
    assert action["action_id"] == "reject" and action["block_id"] == "decision"
    assert action["value"] == "req-1" and action["type"] == "button"
    assert {"response_url", "trigger_id", "api_app_id", "team", "state"} <= set(payload)


async def test_late_ack_is_operation_timeout() -> None:
    recorder = Recorder(delay=1.0)
    server = await recorder_server(recorder)
    async with slack_stack(with_bot=False) as stack:
        stack.workspace.bot_url = str(server.make_url("/slack/events"))
        stack.workspace.ack_deadline = 0.2
        reply = await stack.command("alice", "/cluster list")
        assert reply["status"] is None and reply["error"] == "operation_timeout"
        [message] = await stack.messages()
        assert message["text"] == '/cluster failed with the error "operation_timeout"'
        assert message["ephemeral_to"] == "U0ALICE"
    await server.close()


async def test_refused_request_is_dispatch_failed() -> None:
    recorder = Recorder(status=401)
    server = await recorder_server(recorder)
    async with slack_stack(with_bot=False) as stack:
        stack.workspace.bot_url = str(server.make_url("/slack/events"))
        reply = await stack.command("alice", "/cluster list")
        assert reply["status"] == 401
        [message] = await stack.messages()
        assert message["text"] == '/cluster failed with the error "dispatch_failed"'
    await server.close()


# -- the Web API -------------------------------------------------------------------------------


async def test_auth_test_and_tokens(stack: SlackStack) -> None:
    reply = await web_client(stack).auth_test()
    assert reply["user_id"] == "U0BOT" and reply["bot_id"] == "B0BOT"
    with pytest.raises(SlackApiError) as caught:
        await web_client(stack, token="xoxb-wrong").auth_test()
    assert caught.value.response["error"] == "invalid_auth"
    async with stack.session.post(f"{stack.api_url}auth.test") as raw:
        assert (await raw.json()) == {"ok": False, "error": "not_authed"}
    async with stack.session.post(
        f"{stack.api_url}nothing.here", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as raw:
        assert (await raw.json())["error"] == "unknown_method"


async def test_a_method_needs_its_scope(stack: SlackStack) -> None:
    """The bot token has the manifest's scopes; a method needing another is refused with
    Slack's missing_scope, naming what was needed and what the token has."""
    client = web_client(stack)
    for call, needed in (
        (client.users_info(user="U0ALICE"), "users:read"),
        (client.usergroups_users_list(usergroup="S0APPROVERS"), "usergroups:read"),
        (client.conversations_info(channel="C0MLINFRA"), "channels:read"),
    ):
        with pytest.raises(SlackApiError) as caught:
            await call
        reply = caught.value.response
        assert reply["error"] == "missing_scope" and reply["needed"] == needed
        provided = "channels:history,chat:write,commands,files:read,files:write,groups:history"
        assert reply["provided"] == provided
    stack.workspace.scopes |= {"users:read", "usergroups:read", "channels:read"}
    assert (await client.users_info(user="U0ALICE"))["user"]["name"] == "alice"
    assert (await client.usergroups_users_list(usergroup="S0APPROVERS"))["users"] == ["U0BOB"]
    assert (await client.conversations_info(channel="C0MLINFRA"))["channel"]["id"] == "C0MLINFRA"
    stack.workspace.scopes.discard("chat:write")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="ml-infra", text="hello")
    assert caught.value.response["needed"] == "chat:write"


async def test_post_update_delete_permalink(stack: SlackStack) -> None:
    client = web_client(stack)
    posted = await client.chat_postMessage(channel="ml-infra", text="hello *world*")
    assert posted["channel"] == "C0MLINFRA" and posted["message"]["text"] == "hello *world*"
    reply = await client.chat_postMessage(channel="C0MLINFRA", thread_ts=posted["ts"], text="r1")
    nested = await client.chat_postMessage(channel="C0MLINFRA", thread_ts=reply["ts"], text="r2")
    assert nested["message"]["thread_ts"] == posted["ts"]  # replies to replies join the thread
    updated = await client.chat_update(channel="C0MLINFRA", ts=posted["ts"], text="hello again")
    assert updated["text"] == "hello again"
    link = await client.chat_getPermalink(channel="C0MLINFRA", message_ts=posted["ts"])
    assert link["permalink"].startswith(stack.url)
    ephemeral = await client.chat_postEphemeral(channel="C0MLINFRA", user="U0CAROL", text="psst")
    assert ephemeral["message_ts"]
    await client.chat_delete(channel="C0MLINFRA", ts=reply["ts"])
    messages = await stack.messages(user="bob")
    assert [m["text"] for m in messages] == ["hello again", "r2"]
    assert messages[0]["edited"] is not None
    stack.workspace.scopes |= {"users:read", "channels:read"}  # another app's scopes
    info = await client.users_info(user="U0BOB")
    assert info["user"]["name"] == "bob"
    channel = await client.conversations_info(channel="C0MLINFRA")
    assert channel["channel"]["name"] == "ml-infra"


def button(text: str = "Go", **extra: Any) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": text}, **extra}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


REFUSED_BLOCKS = [
    ([section("x")] * 51, "no more than 50 items"),
    ([{"type": "actions", "elements": [button(action_id=f"a{i}") for i in range(26)]}], "1 to 25"),
    ([{"type": "actions", "elements": [button("x" * 76)]}], "less than 76 characters"),
    ([section("y" * 3001)], "less than 3001 characters"),
    (
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        "no more than 10 items",
    ),
    ([{"type": "actions", "elements": [button(value="v" * 2001)]}], "less than 2001"),
    (
        [
            {
                "type": "actions",
                "elements": [
                    button(
                        confirm={
                            "title": {"type": "plain_text", "text": "t"},
                            "text": {"type": "plain_text", "text": "z" * 301},
                            "confirm": {"type": "plain_text", "text": "ok"},
                            "deny": {"type": "plain_text", "text": "no"},
                        }
                    )
                ],
            }
        ],
        "less than 301 characters",
    ),
    ([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}], "plain_text"),
    ([{"type": "video_party"}], "unsupported block type"),
    ([section("a") | {"block_id": "b"}, section("b") | {"block_id": "b"}], "unique"),
    ([{"type": "actions", "elements": [button(action_id="a"), button(action_id="a")]}], "unique"),
]


@pytest.mark.parametrize(("blocks", "words"), REFUSED_BLOCKS)
async def test_block_kit_limits(stack: SlackStack, blocks: list[Any], words: str) -> None:
    with pytest.raises(SlackApiError) as caught:
        await web_client(stack).chat_postMessage(channel="ml-infra", text="t", blocks=blocks)
    assert caught.value.response["error"] == "invalid_blocks"
    assert any(words in error for error in caught.value.response["errors"])
    assert await stack.messages() == []


async def test_limits_at_the_edge_are_accepted(stack: SlackStack) -> None:
    blocks = [section("y" * 3000)] * 49 + [
        {"type": "actions", "elements": [button("x" * 75, action_id=f"a{i}") for i in range(25)]}
    ]
    posted = await web_client(stack).chat_postMessage(channel="ml-infra", text="t", blocks=blocks)
    assert posted["ok"]


async def test_message_errors(stack: SlackStack) -> None:
    client = web_client(stack)
    calls: list[tuple[Any, dict[str, str], str]] = [
        (client.chat_postMessage, {"channel": "nowhere", "text": "x"}, "channel_not_found"),
        (
            client.chat_update,
            {"channel": "ml-infra", "ts": "1.2", "text": "x"},
            "message_not_found",
        ),
        (
            client.chat_postMessage,
            {"channel": "ml-infra", "thread_ts": "9.9", "text": "x"},
            "thread_not_found",
        ),
        (
            client.chat_postEphemeral,
            {"channel": "ml-infra", "user": "U0NOBODY", "text": "x"},
            "user_not_in_channel",
        ),
    ]
    for method, arguments, error in calls:
        with pytest.raises(SlackApiError) as caught:
            await method(**arguments)
        assert caught.value.response["error"] == error
    # slack_sdk itself warns when text is missing, so this one goes over raw HTTP.
    async with stack.session.post(
        f"{stack.api_url}chat.postMessage",
        json={"channel": "ml-infra"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as raw:
        assert (await raw.json()) == {"ok": False, "error": "no_text"}


async def test_bot_cannot_edit_what_users_wrote(stack: SlackStack) -> None:
    message = stack.workspace.post("C0MLINFRA", "U0ALICE", "mine")
    with pytest.raises(SlackApiError) as caught:
        await web_client(stack).chat_update(channel="C0MLINFRA", ts=message.ts, text="x")
    assert caught.value.response["error"] == "cant_update_message"


async def test_rate_limit_answers_429_with_integer_retry_after(stack: SlackStack) -> None:
    await stack.post(
        "/sandbox/api/config", {"force_ratelimit": {"chat.update": 1}, "retry_after": 2}
    )
    client = web_client(stack)
    posted = await client.chat_postMessage(channel="ml-infra", text="x")
    async with stack.session.post(
        f"{stack.api_url}chat.update",
        json={"channel": "C0MLINFRA", "ts": posted["ts"], "text": "y"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as raw:
        assert raw.status == 429
        assert raw.headers["Retry-After"] == "2"
        assert await raw.json() == {"ok": False, "error": "ratelimited"}
    assert (await client.chat_update(channel="C0MLINFRA", ts=posted["ts"], text="y"))["ok"]


async def test_per_minute_limit(stack: SlackStack) -> None:
    stack.workspace.clock = lambda: 5000.0
    await stack.post("/sandbox/api/config", {"rate_limits": {"chat.postMessage": 2}})
    client = web_client(stack)
    await client.chat_postMessage(channel="ml-infra", text="1")
    await client.chat_postMessage(channel="ml-infra", text="2")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="ml-infra", text="3")
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "60"
    stack.workspace.clock = lambda: 5061.0
    assert (await client.chat_postMessage(channel="ml-infra", text="4"))["ok"]


# -- response URLs -----------------------------------------------------------------------------


async def test_response_url_five_uses_then_refused(stack: SlackStack) -> None:
    url = stack.workspace.response_url(stack.url, "C0MLINFRA", "U0ALICE", "command")
    for n in range(5):
        async with stack.session.post(url, json={"text": f"use {n}"}) as reply:
            assert reply.status == 200
    async with stack.session.post(url, json={"text": "sixth"}) as reply:
        assert reply.status == 404 and (await reply.json())["error"] == "used_url"
    assert len(await stack.messages(user="alice")) == 5


async def test_response_url_expires_after_30_minutes(stack: SlackStack) -> None:
    now = [10_000.0]
    stack.workspace.clock = lambda: now[0]
    url = stack.workspace.response_url(stack.url, "C0MLINFRA", "U0ALICE", "command")
    now[0] += ResponseUrl.LIFETIME + 1
    async with stack.session.post(url, json={"text": "late"}) as reply:
        assert reply.status == 404 and (await reply.json())["error"] == "expired_url"


async def test_response_url_delete_original(stack: SlackStack) -> None:
    posted = stack.workspace.post("C0MLINFRA", "U0BOT", "card")
    url = stack.workspace.response_url(stack.url, "C0MLINFRA", "U0BOB", "action", posted.ts)
    async with stack.session.post(url, json={"delete_original": True}) as reply:
        assert reply.status == 200
    assert await stack.messages() == []


async def test_response_url_in_channel_from_a_button(stack: SlackStack) -> None:
    posted = stack.workspace.post("C0MLINFRA", "U0BOT", "card")
    url = stack.workspace.response_url(stack.url, "C0MLINFRA", "U0BOB", "action", posted.ts)
    async with stack.session.post(url, json={"text": "new", "thread_ts": posted.ts}) as reply:
        assert reply.status == 200
    messages = await stack.messages(user="carol")
    assert messages[1]["text"] == "new" and messages[1]["ephemeral_to"] is None
    assert messages[1]["thread_ts"] == posted.ts


# -- live events -------------------------------------------------------------------------------


async def read_event(stream: aiohttp.ClientResponse) -> dict[str, Any]:
    while True:
        line = (await asyncio.wait_for(stream.content.readline(), 5)).decode().strip()
        if line.startswith("data: "):
            return dict(json.loads(line[6:]))


async def test_events_stream_respects_ephemeral_visibility(stack: SlackStack) -> None:
    client = web_client(stack)
    async with stack.session.get(f"{stack.url}/sandbox/api/events?user=U0ALICE") as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        await stream.content.readline()  # ": connected"
        await client.chat_postEphemeral(channel="ml-infra", user="U0BOB", text="for bob")
        posted = await client.chat_postMessage(channel="ml-infra", text="for all")
        event = await read_event(stream)
        assert event["type"] == "message" and event["message"]["text"] == "for all"
        await client.chat_update(channel="C0MLINFRA", ts=posted["ts"], text="edited")
        event = await read_event(stream)
        assert event["type"] == "message_changed" and event["message"]["edited"] is not None


async def test_an_enterprise_grid_org_marks_payloads_and_users() -> None:
    recorder = Recorder()
    server = await recorder_server(recorder)
    async with slack_stack(with_bot=False) as stack:
        stack.workspace.bot_url = str(server.make_url("/slack/events"))
        async with stack.session.get(f"{stack.url}/sandbox/api/users") as before:
            assert "dave" not in {u["name"] for u in await before.json()}
        async with stack.session.post(
            f"{stack.url}/sandbox/api/config",
            json={"enterprise_id": "E0GRID", "enterprise_name": "Grid Co"},
        ) as configured:
            assert (await configured.json())["enterprise_id"] == "E0GRID"
        await stack.command("dave", "/cluster list")
        client = web_client(stack)
        assert (await client.auth_test())["enterprise_id"] == "E0GRID"
        stack.workspace.scopes.add("users:read")
        dave = (await client.users_info(user="W0DAVE"))["user"]
        assert dave["enterprise_user"]["enterprise_id"] == "E0GRID"
    await server.close()
    [(_, body)] = recorder.requests
    form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    assert set(form) == SLASH_FIELDS | {"enterprise_id", "enterprise_name"}
    assert form["user_id"] == "W0DAVE"
    assert (form["enterprise_id"], form["enterprise_name"]) == ("E0GRID", "Grid Co")
