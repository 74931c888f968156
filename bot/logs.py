"""Logging: JSON lines for Cloud Logging, readable lines on a terminal, no secrets in either.

Cloud Logging reads ``severity``, ``message``, ``time`` and, for request logs,
``logging.googleapis.com/trace`` (from the ``X-Cloud-Trace-Context`` header App Engine
sends). Every record passes a filter that replaces the configured secrets and anything
shaped like a token with ``[redacted]``, whichever library logged it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.redact import Redactor

TRACE = contextvars.ContextVar[str | None]("clusterbot_trace", default=None)
SEVERITY = {
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "WARNING": "WARNING",
    "ERROR": "ERROR",
    "CRITICAL": "CRITICAL",
}


class RedactSecrets(logging.Filter):
    """Replace known secret values and token-shaped text in every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.redactor = Redactor(secrets)

    def clean(self, text: str) -> str:
        return self.redactor.clean(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg = self.clean(message)
        record.args = None
        if record.exc_info:
            record.exc_text = self.clean("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        return True


class CloudJson(logging.Formatter):
    """One JSON object a line, with the fields Cloud Logging understands."""

    def __init__(self, project: str | None) -> None:
        super().__init__()
        self.project = project

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": SEVERITY.get(record.levelname, "DEFAULT"),
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        if record.exc_text:
            entry["message"] += "\n" + record.exc_text
        trace = TRACE.get()
        if trace and self.project:
            entry["logging.googleapis.com/trace"] = f"projects/{self.project}/traces/{trace}"
        entry["logging.googleapis.com/sourceLocation"] = {
            "file": record.pathname,
            "line": record.lineno,
            "function": record.funcName,
        }
        return json.dumps(entry, ensure_ascii=False)


class Readable(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.exc_text and record.exc_text not in text:
            text += "\n" + record.exc_text
        return text


def configure(
    level: str = "INFO",
    secrets: Iterable[str] = (),
    *,
    stream: TextIO | None = None,
    json_lines: bool | None = None,
) -> RedactSecrets:
    """Send every logger to ``stream`` (stderr) through the secret filter."""
    stream = stream or sys.stderr
    if json_lines is None:
        json_lines = not stream.isatty()
    handler = logging.StreamHandler(stream)
    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    handler.setFormatter(CloudJson(project) if json_lines else Readable())
    redact = RedactSecrets(secrets)
    handler.addFilter(redact)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(max(logging.WARNING, root.level))
    # Alembic narrates each step at INFO; the store logs the one line that matters.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, root.level))
    return redact


# What asyncpg leaves when a task is cancelled while its connection opens (the pool making a
# connection, or the CancelRequest it sends for a query cut off): the connection's loss is set
# on a future nobody awaits any more, and asyncio reports it as an error when it is collected
# (MagicStack/asyncpg#1211, #1310). Nothing was lost: the task that wanted it was cancelled.
CUT_CONNECT = "unexpected connection_lost() call"


def quiet_cut_connects(loop: asyncio.AbstractEventLoop) -> None:
    """Log that leftover as what it is (INFO), and hand every other report on."""
    before = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, ConnectionError) and str(error) == CUT_CONNECT:
            logging.getLogger("clusterbot.database").info(
                "a database connection cut off as it opened, its task cancelled: nothing lost"
            )
            return
        if before is not None:
            before(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
