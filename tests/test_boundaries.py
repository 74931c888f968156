"""The trust boundaries, end to end over loopback: a cluster outside CLUSTERBOT_TARGETS is
refused before any control-plane call, whichever way it is named (a command's full name, a
button's value); a form's file is read from Slack alone, with the token sent nowhere else and
no more read than the script limit."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from bot.slack.files import FileRefused, SlackFiles
from tests.support.demo_stack import CPU01, SIDE01, TRAIN01, Stack, demo_stack, text_of
from tests.test_forms import choose, modal, pick, submit
from tests.test_slack_payloads import Hooks, answered, hooks, payload

__all__ = ["hooks"]  # the fixture, used by name

REFUSED = f"{SIDE01} is not in a project and region clusterbot manages"


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def outside_calls(stack: Stack) -> list[str]:
    return [r["path"] for r in await stack.requests() if "other-project" in r["path"]]


async def test_the_simulator_has_the_cluster_so_only_the_bot_can_refuse(stack: Stack) -> None:
    assert SIDE01 in stack.simulator.clusters


@pytest.mark.parametrize(
    "text",
    [
        f"/cluster show {SIDE01}",
        f"/cluster jobs {SIDE01}",
        f"/cluster resize {SIDE01} cpu 0",
        f"/cluster delete {SIDE01}",
        f"/cluster slurm {SIDE01}",
        f"/cluster slurm {SIDE01} set PriorityWeightAge=100",
        f"/cluster fairshare {SIDE01}",
    ],
)
async def test_a_full_name_outside_the_targets_is_refused_in_one_line(
    stack: Stack, text: str
) -> None:
    await stack.session.delete(f"{stack.url}/vertex/_sim/requests")
    reply = await stack.reply_to("alice", text)
    said = text_of(reply)
    assert REFUSED in said and "Usage" not in said, said
    assert await outside_calls(stack) == []
    assert await stack.service.store.requests_in(["draft", "pending"]) == []


@pytest.mark.parametrize(
    ("action_id", "value"),
    [
        ("idle_scale_to_zero", SIDE01),
        ("idle_delete", SIDE01),
        ("idle_snooze", f"3600|{SIDE01}"),
        ("idle_keep", SIDE01),
        ("idle_unsnooze", SIDE01),
    ],
)
async def test_a_button_naming_a_cluster_outside_the_targets_is_refused(
    stack: Stack, hooks: Hooks, action_id: str, value: str
) -> None:
    body = payload("block_actions.json")
    body["user"] = {"id": "U0ALICE", "username": "alice", "team_id": "T0DEMO"}
    body["actions"][0].update(action_id=action_id, value=value)
    body["response_url"] = hooks.url("click")
    status, _ = await stack.deliver(urlencode({"payload": json.dumps(body)}))
    assert status == 200
    [reply] = await answered(stack, hooks)
    assert REFUSED in text_of(reply) and reply["replace_original"] is False
    assert await outside_calls(stack) == []
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
    records = await stack.service.records.all()
    assert all(cluster != SIDE01 for cluster, _ in records), "nothing is kept about it"


# -- files from Slack only ---------------------------------------------------------------------


class Recorder:
    """A server on loopback that is not Slack: it records every request and its token."""

    def __init__(self, answer: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.answer = answer
        self.server: TestServer | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path, request.headers.get("Authorization")))
        return await self.answer(request)

    @property
    def origin(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}"


@asynccontextmanager
async def recorder(
    answer: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[Recorder]:
    found = Recorder(answer)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", found.handle)
    found.server = TestServer(app, host="127.0.0.1")
    await found.server.start_server()
    try:
        yield found
    finally:
        await found.server.close()


async def secret_page(request: web.Request) -> web.Response:
    return web.Response(text="internal: metadata token abc\n")


async def script_form_with_a_file(stack: Stack) -> tuple[Any, dict[str, Any]]:
    """The prolog form with a file given: the view in the stand-in, and the file as the
    signed payload will carry it (a test edits it as a forger would)."""
    await stack.command("alice", "/cluster slurm train01 prolog add")
    form = await modal(stack, "alice", "file")
    await pick(stack, "alice", form, "form_file", {"name": "p.sh", "content": "echo hi\n"})
    view = stack.workspace.views.top("U0ALICE")
    [file] = view.values["file"]["form_file"]["files"]
    return view, file


async def test_a_file_on_another_host_is_refused_without_sending_the_token(stack: Stack) -> None:
    async with recorder(secret_page) as other:
        view, file = await script_form_with_a_file(stack)
        file["url_private"] = f"{other.origin}/latest/meta-data"
        answer = await submit(stack, "alice", {"id": view.id}, {})
        assert "p.sh is not a file clusterbot can read from Slack" in answer["errors"]["file"]
        assert other.seen == []
    assert not any("internal" in text_of(m) for m in await stack.messages())
    assert await stack.service.store.requests_in(["draft", "pending"]) == []


async def test_a_file_larger_than_it_says_is_read_only_up_to_the_limit(stack: Stack) -> None:
    view, file = await script_form_with_a_file(stack)
    stack.workspace.views.files[file["id"]].content = b"echo hi\n" * 40_000  # 320 KB
    file["size"] = 40
    answer = await submit(stack, "alice", {"id": view.id}, {})
    assert "p.sh is over 64 KiB" in answer["errors"]["file"]


async def test_the_file_reader_stops_an_endless_body_and_follows_no_redirect() -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        reply = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await reply.prepare(request)
        for _ in range(100_000):  # 6.4 GB, if nobody stopped reading
            await reply.write(b"x" * 65_536)
        return reply

    async def moved(request: web.Request) -> web.StreamResponse:
        if request.path == "/moved":
            raise web.HTTPFound("/elsewhere")
        return await endless(request)

    async with recorder(moved) as host, aiohttp.ClientSession() as session:
        files = SlackFiles("xoxb-secret", f"{host.origin}/api/")
        with pytest.raises(FileRefused, match="over 64 KiB"):
            await files.text(session, {"name": "big.sh", "url_private": f"{host.origin}/big"})
        with pytest.raises(FileRefused, match=r"could not be read \(HTTP 302\)"):
            await files.text(session, {"name": "m.sh", "url_private": f"{host.origin}/moved"})
        assert [path for path, _ in host.seen] == ["/big", "/moved"]  # not /elsewhere
        for url in ("http://files.slack.com/x", "https://files.slack.com.evil.test/x", "ftp://x"):
            with pytest.raises(FileRefused, match="not a file clusterbot can read"):
                await files.text(session, {"name": "x", "url_private": url})
    assert SlackFiles("t", "https://slack.com/api/").origins == {("https", "files.slack.com")}


# -- signed, but not the shape Slack sends -----------------------------------------------------


def form(payload: object) -> str:
    return urlencode({"payload": json.dumps(payload)})


USER = {"id": "U0ALICE"}
MALFORMED = {
    "truncated JSON": "payload=" + '{"type": "block_actions", "user": {"id": "U0ALICE"',
    "actions: []": form({"type": "block_actions", "user": USER, "actions": []}),
    "no user": form({"type": "block_actions", "actions": [{"action_id": "approve", "value": "r"}]}),
    "an action without id": form({"type": "block_actions", "user": USER, "actions": [{}]}),
    "actions not a list": form({"type": "block_actions", "user": USER, "actions": "approve"}),
    "a view without view": form({"type": "view_submission", "user": USER}),
    "a view without user": form(
        {"type": "view_submission", "view": {"id": "V1", "callback_id": "clusterbot_form"}}
    ),
    "a view's state not an object": form(
        {
            "type": "view_submission",
            "user": USER,
            "view": {"id": "V1", "type": "modal", "callback_id": "clusterbot_form", "state": "x"},
        }
    ),
    "a view nobody opened": form(
        {
            "type": "view_submission",
            "user": USER,
            "view": {"id": "V1", "type": "modal", "callback_id": "theirs"},
        }
    ),
    "a button nobody made": form(
        {
            "type": "block_actions",
            "user": USER,
            "trigger_id": "1.2.3",
            "actions": [{"action_id": "launch_missiles"}],
        }
    ),
    "a click without a trigger": form(
        {"type": "block_actions", "user": USER, "actions": [{"action_id": "open_form_resize"}]}
    ),
    "a payload that is a list": urlencode({"payload": "[]"}),
    "a command without a user": urlencode({"command": "/cluster", "text": "list"}),
}


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_a_signed_body_of_the_wrong_shape_is_refused_with_a_reference(
    stack: Stack, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, text = await stack.deliver(body)
    assert status == 400, text
    reference = json.loads(text)["reference"]
    assert any(reference in r.getMessage() for r in caplog.records)
    await stack.wait_for(lambda: _settled(stack))
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.records


async def _settled(stack: Stack) -> bool:
    return not stack.service.chat.background.tasks


@pytest.mark.parametrize(
    "event",
    [
        {"type": "event_callback", "team_id": "T0DEMO", "event": "x"},
        {"type": "event_callback", "team_id": "T0DEMO", "event": {"type": "app_home_opened"}},
    ],
)
async def test_a_signed_event_of_the_wrong_shape_is_refused(stack: Stack, event: object) -> None:
    body = json.dumps(event)
    stamp = str(int(time.time()))
    signature = SignatureVerifier(stack.workspace.signing_secret).generate_signature(
        timestamp=stamp, body=body
    )
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature or "",
    }
    async with stack.session.post(f"{stack.url}/slack/events", data=body, headers=headers) as reply:
        assert reply.status == 400 and "reference" in await reply.json()


async def test_a_form_naming_a_cluster_outside_the_targets_is_refused_at_its_field(
    stack: Stack,
) -> None:
    await stack.command("alice", "/cluster delete")
    form = await modal(stack, "alice")
    await choose(stack, "alice", form, CPU01)
    form = await modal(stack, "alice", "confirm")
    view = stack.workspace.views.top("U0ALICE")
    view.values["cluster"]["form_cluster"]["selected_option"]["value"] = SIDE01  # forged
    await stack.session.delete(f"{stack.url}/vertex/_sim/requests")
    answer = await submit(stack, "alice", {"id": view.id}, {"confirm": {"form_confirm": "side01"}})
    assert REFUSED in " ".join(answer["errors"].values()), answer
    assert await outside_calls(stack) == []
    assert await stack.service.store.requests_in(["draft", "pending"]) == []


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "plain_text_input", "value": 3},
        {"type": "plain_text_input", "value": {"x": []}},
        {"type": "static_select", "selected_option": "a4"},
        {"type": "static_select", "selected_option": {"value": 4}},
    ],
)
async def test_a_form_whose_values_are_not_text_gets_field_errors_not_an_internal_error(
    stack: Stack, entry: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    meta = {"kind": "resize", "channel": "C0MLINFRA", "cluster": TRAIN01}
    values = {"pool": {"form_pool": entry}, "min:a4": {"form_min": entry}}
    body = form(
        {
            "type": "view_submission",
            "user": {"id": "U0ALICE"},
            "trigger_id": "1.2.3",
            "view": {
                "id": "V0FORGED",
                "hash": "h",
                "type": "modal",
                "callback_id": "clusterbot_form",
                "private_metadata": json.dumps(meta),
                "state": {"values": values},
            },
        }
    )
    status, text = await stack.deliver(body)
    assert status == 200 and json.loads(text)["response_action"] == "errors", text
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.records
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
