"""One error handler: what a listener raises before its ack reaches Bolt's ``app.error``,
what fails after it reaches the same handling through ``Failures.guard``; either way it is
logged once with a reference and the person sees only the reference."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.redact import Redactor
from bot.slack.failures import Failures
from bot.slack.responder import Responder
from handlers.replies import Reply
from tests.support.text_adapter import text

REFERENCE = re.compile(r"internal error \[ref ([0-9a-f]{8})\]")


class Counted:
    def __init__(self) -> None:
        self.outcomes: list[tuple[str, str]] = []

    def __call__(self, name: str, outcome: str) -> None:
        self.outcomes.append((name, outcome))


def app_failing_in(failures: Failures) -> AsyncApp:
    """A Bolt app whose every listener raises, with the error handler the service uses."""
    app = AsyncApp(
        token="xoxb-test",
        signing_secret="unused",
        request_verification_enabled=False,
        process_before_response=True,
    )

    async def broken(ack: Any, body: dict[str, Any]) -> None:
        raise RuntimeError("a bug in a listener")

    app.command("/cluster")(broken)
    app.view("clusterbot_form")(broken)
    app.error(failures.bolt)
    return app


def logged_reference(caplog: pytest.LogCaptureFixture) -> str:
    [record] = [r for r in caplog.records if r.levelname == "ERROR"]
    found = REFERENCE.search(record.getMessage())
    assert found is not None and record.exc_info is not None  # with its traceback
    return found.group(1)


async def test_a_command_that_fails_before_its_ack_is_answered_with_a_reference(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted = Counted()
    app = app_failing_in(Failures(Responder(Redactor([])), counted))
    body = urlencode({"command": "/cluster", "text": "list", "user_id": "U0ALICE"})
    response = await app.async_dispatch(AsyncBoltRequest(body=body, headers={}))
    assert response.status == 200
    answer = json.loads(response.body)
    reference = logged_reference(caplog)
    assert answer["response_type"] == "ephemeral" and reference in json.dumps(answer["blocks"])
    assert "a bug in a listener" not in response.body  # the person sees only the reference
    assert counted.outcomes == [("list", "internal_error")]


async def test_a_form_that_fails_stays_open_and_says_so_at_its_last_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_failing_in(Failures(Responder(Redactor([])), Counted()))
    view = {
        "id": "V1",
        "type": "modal",
        "callback_id": "clusterbot_form",
        "blocks": [{"type": "input", "block_id": "pool"}, {"type": "input", "block_id": "min"}],
    }
    payload = {"type": "view_submission", "user": {"id": "U0ALICE"}, "view": view}
    body = urlencode({"payload": json.dumps(payload)})
    response = await app.async_dispatch(AsyncBoltRequest(body=body, headers={}))
    assert json.loads(response.body) == {
        "response_action": "errors",
        "errors": {"min": "An internal error occurred; it has been logged."},
    }
    logged_reference(caplog)


async def test_work_after_the_ack_fails_into_the_same_handling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted = Counted()
    failures = Failures(Responder(Redactor([])), counted)
    told: list[Reply] = []

    async def tell(reply: Reply) -> None:
        told.append(reply)

    async def work() -> int:
        raise KeyError("user")

    assert await failures.guard(work(), "/cluster list", tell=tell, command="list") is None
    reference = logged_reference(caplog)
    [reply] = told
    assert f"An internal error occurred (reference `{reference}`)" in text(reply)
    assert counted.outcomes == [("list", "internal_error")]

    async def fine() -> int:
        return 7

    assert await failures.guard(fine(), "/cluster list", tell=tell) == 7 and len(told) == 1


def test_the_listeners_have_no_catch_all_of_their_own() -> None:
    """An ``except Exception`` in a listener either passes the error on or is not there."""
    root = Path(__file__).resolve().parent.parent / "bot" / "slack"
    for name in ("listeners.py", "modals.py"):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if not isinstance(node, ast.ExceptHandler):
                continue
            caught = "" if node.type is None else ast.unparse(node.type)
            if caught in ("Exception", "BaseException", ""):
                assert isinstance(node.body[-1], ast.Raise), f"{name}:{node.lineno}"
