"""Slack's request URL (``/slack/events``): the signature is checked on the raw bytes before
anything parses them, a body of a shape Slack never sends is refused, and the rest goes to
Bolt. Socket Mode needs no request URL."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Mapping

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.shapes import shape_problem

log = logging.getLogger(__name__)
# Slack's replay window for a request's timestamp
# (https://api.slack.com/authentication/verifying-requests-from-slack).
SIGNATURE_WINDOW = 300


def signature_refusal(
    secret: str | None, headers: Mapping[str, str], body: bytes, now: float
) -> str | None:
    """Why a request is refused, or None when Slack signed it: ``v0=`` + HMAC-SHA256 of
    ``v0:TIMESTAMP:BODY`` with the signing secret, the timestamp within five minutes."""
    if secret is None:
        return "no signing secret is configured"
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not timestamp.isdigit():
        return "the timestamp is missing or not a number"
    if abs(now - int(timestamp)) > SIGNATURE_WINDOW:
        return "the timestamp is outside the 5-minute window"
    mac = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
    if not hmac.compare_digest("v0=" + mac.hexdigest(), signature):
        return "the signature does not match"
    return None


def bolt_body(text: str) -> str:
    """The body as Bolt must see it. bolt-python's ``parse_body`` takes any form body that
    contains the word "payload" for an interactive payload, and reads nothing from a slash
    command whose text has the word (``/cluster show payload`` would go unanswered). With
    its first letter percent-encoded the word decodes the same, and Bolt parses the form."""
    if "payload" not in text or text.startswith(("{", "payload=")) or "&payload=" in text:
        return text
    return text.replace("payload", "%70ayload")


def refused_signed(problem: str) -> web.Response:
    """A signed request of a shape Slack never sends: 400, with a reference in the log."""
    reference = secrets.token_hex(4)
    log.warning("refused a signed request [ref %s]: %s", reference, problem)
    return web.json_response({"error": "invalid request", "reference": reference}, status=400)


class RequestUrl:
    """The route Slack posts commands, clicks, form submissions and events to."""

    def __init__(
        self,
        bolt: AsyncApp,
        secret: str,
        accepting: Callable[[], bool],
        acked: Callable[[float], None],
    ) -> None:
        self.bolt = bolt
        self.secret = secret
        self.accepting = accepting  # False while the service drains: 503, Slack retries
        self.acked = acked  # seconds from the first byte to the ack

    async def handle(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        if not self.accepting():
            return web.json_response({"error": "shutting down"}, status=503)
        body = await request.read()
        refusal = signature_refusal(self.secret, request.headers, body, time.time())
        if refusal is not None:
            log.warning(
                "refused a request to %s: %s (%d bytes from %s)",
                request.path,
                refusal,
                len(body),
                request.remote,
            )
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("refused a signed request that is not UTF-8 (%d bytes)", len(body))
            return web.json_response({"error": "invalid request"}, status=400)
        problem = shape_problem(text, request.headers.get("Content-Type", ""))
        if problem is not None:  # Slack never sends it: Bolt's matchers would fail on it
            return refused_signed(problem)
        bolt_request = AsyncBoltRequest(
            body=bolt_body(text), query=request.query_string, headers=dict(request.headers)
        )
        answer = await self.bolt.async_dispatch(bolt_request)
        if answer.status == 404:  # Bolt's "unhandled request": nothing here takes it
            return refused_signed("no listener takes it (an action or view clusterbot never made)")
        response = await to_aiohttp_response(answer)
        self.acked(time.perf_counter() - started)
        return response
