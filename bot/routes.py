"""The service's HTTP routes: Slack's request URL (signature checked on the raw bytes before
anything parses them), ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.edge import edge_middleware
from bot.logs import TRACE
from bot.slack.shapes import shape_problem
from bot.vertex.errors import CredentialsError

if TYPE_CHECKING:
    from bot.app import ClusterbotService

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


@web.middleware
async def trace_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Tie log lines to the request's Cloud Trace id (``X-Cloud-Trace-Context: ID/SPAN;o=1``)."""
    header = request.headers.get("X-Cloud-Trace-Context", "")
    token = TRACE.set(header.split("/", 1)[0] or None)
    try:
        return await handler(request)
    finally:
        TRACE.reset(token)


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


class Routes:
    def __init__(self, service: ClusterbotService) -> None:
        self.service = service

    def install(self, app: web.Application, path: str = "/slack/events") -> None:
        """``/slack/events`` is served only with a signing secret: unsigned requests never
        reach the listeners (Socket Mode needs no request URL)."""
        service = self.service
        if service.settings.slack_signing_secret is not None and service.bolt is not None:
            app.router.add_post(path, self.slack_events)
        settings = service.settings
        if settings.oidc_audience:
            from bot.release_api import ReleaseApi

            api = ReleaseApi(service, settings.oidc_audience, settings.oidc_certs_url)
            app.router.add_post("/api/v1/release", api.handle)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", service.metrics.handler())

    async def slack_events(self, request: web.Request) -> web.Response:
        service = self.service
        started = time.perf_counter()
        if not service.accepting:
            return web.json_response({"error": "shutting down"}, status=503)
        assert service.bolt is not None  # the route exists only with a Slack app
        body = await request.read()
        secret = service.settings.slack_signing_secret
        refusal = signature_refusal(
            secret.get_secret_value() if secret else None, request.headers, body, time.time()
        )
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
        answer = await service.bolt.async_dispatch(bolt_request)
        if answer.status == 404:  # Bolt's "unhandled request": nothing here takes it
            return refused_signed("no listener takes it (an action or view clusterbot never made)")
        response = await to_aiohttp_response(answer)
        service.metrics.ack_seconds.observe(time.perf_counter() - started)
        return response

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        service = self.service
        database = await service.store.ping()
        scheduler = service.jobs.scheduler.running
        credentials: Any = True
        try:
            async with asyncio.timeout(5):
                await service.vertex.check_credentials()
        except CredentialsError as error:
            credentials = error.user_message
        except TimeoutError:
            credentials = "obtaining a Google Cloud token took more than 5 s"
        ready = database and scheduler and service.accepting and credentials is True
        # Said, not counted against readiness: every replica would leave the load balancer
        # together, and `/cluster` could no longer tell anyone why.
        targets: Any = True
        if database:
            with contextlib.suppress(Exception):  # the database went away meanwhile
                targets = await service.reach_problem() or True
        return web.json_response(
            {
                "database": database,
                "scheduler": scheduler,
                "accepting": service.accepting,
                "credentials": credentials,
                "targets": targets,
            },
            status=200 if ready else 503,
        )


def web_app(service: ClusterbotService, *, lifecycle: bool = True) -> web.Application:
    app = web.Application(middlewares=[edge_middleware, trace_middleware])
    service.install(app, lifecycle=lifecycle)
    return app
