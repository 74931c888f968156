"""Logs: JSON lines Cloud Logging understands, and no secret in any line at any level."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.logs import CUT_CONNECT, TRACE, configure, quiet_cut_connects
from tests.support.demo_stack import demo_stack, text_of

STATIC_TOKEN = "ya29.static-simulator-token-0123456789"


async def test_no_secret_is_ever_logged(tmp_path: Path) -> None:
    stream = io.StringIO()
    async with demo_stack(
        tmp_path, vertex_static_token=SecretStr(STATIC_TOKEN), vertex_retry_deadline=0.5
    ) as stack:
        secrets = [
            stack.service.settings.slack_bot_token.get_secret_value(),  # type: ignore[union-attr]
            stack.workspace.signing_secret,
            STATIC_TOKEN,
        ]
        configure("DEBUG", secrets, stream=stream, json_lines=True)
        await stack.reply_to("alice", "/cluster list")
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20)
        await stack.fault(method="GET", status=503, message=f"backend said Bearer {STATIC_TOKEN}")
        await stack.reply_to("carol", "/cluster show cpu01")
        logging.getLogger("clusterbot.test").error("oops with %s", secrets[0])
        try:
            raise RuntimeError(f"failure carrying {secrets[1]}")
        except RuntimeError:
            logging.getLogger("clusterbot.test").exception("an exception")
    output = stream.getvalue()
    assert len(output.splitlines()) > 50  # DEBUG from every library was captured
    for secret in secrets:
        assert secret not in output
    lines = [json.loads(line) for line in output.splitlines()]
    assert all({"severity", "message", "time"} <= set(line) for line in lines)
    assert any(line["severity"] == "ERROR" and "[redacted]" in line["message"] for line in lines)
    assert any("Traceback" in line["message"] for line in lines)


def test_trace_field_for_cloud_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    stream = io.StringIO()
    configure("INFO", [], stream=stream, json_lines=True)
    token = TRACE.set("0123456789abcdef")
    try:
        logging.getLogger("clusterbot").info("in a request")
    finally:
        TRACE.reset(token)
    logging.getLogger("clusterbot").warning("outside")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["logging.googleapis.com/trace"] == "projects/my-project/traces/0123456789abcdef"
    assert first["severity"] == "INFO" and first["message"] == "in a request"
    assert "logging.googleapis.com/trace" not in second and second["severity"] == "WARNING"


def test_readable_lines_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    configure("INFO", ["xoxb-very-secret-token"], stream=stream)
    logging.getLogger("clusterbot").info("token is xoxb-very-secret-token")
    line = stream.getvalue().strip()
    assert not line.startswith("{") and "INFO" in line and "clusterbot: token is [redacted]" in line


def test_a_connect_cut_off_by_a_cancel_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """asyncpg leaves the loss of a connection it was opening in a future nobody reads when
    the task that wanted it is cancelled (a dying replica's sweep child cut off mid-query):
    said as what it is, at INFO; any other unread failure is still an error."""
    import asyncio
    import gc

    async def leave(error: Exception) -> None:
        asyncio.get_running_loop().create_future().set_exception(error)
        gc.collect()  # the unread future is reported as it goes

    loop = asyncio.new_event_loop()
    try:
        quiet_cut_connects(loop)
        with caplog.at_level(logging.INFO):
            loop.run_until_complete(leave(ConnectionError(CUT_CONNECT)))
            loop.run_until_complete(leave(ConnectionError("something else")))
    finally:
        loop.close()
    cut = [r for r in caplog.records if "cut off as it opened" in r.getMessage()]
    assert [r.levelno for r in cut] == [logging.INFO]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "something else" in errors[0].getMessage() + str(errors[0].exc_info)
