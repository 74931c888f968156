"""The service's own HTTP routes: ``/healthz``, ``/readyz`` and ``/metrics``. The Slack
adapter adds its request URL (``bot/slack/request_url.py``) and, with an OIDC audience, the
composition root adds the pipeline hook (``bot/release_api.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.logs import TRACE
from handlers.domain.errors import CredentialsError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def trace_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Tie log lines to the request's Cloud Trace id (``X-Cloud-Trace-Context: ID/SPAN;o=1``)."""
    header = request.headers.get("X-Cloud-Trace-Context", "")
    token = TRACE.set(header.split("/", 1)[0] or None)
    try:
        return await handler(request)
    finally:
        TRACE.reset(token)


@dataclass(frozen=True)
class Readiness:
    """What ``/readyz`` asks, each a call: the routes hold no service."""

    database: Callable[[], Awaitable[bool]]  # the database answers a query
    scheduler: Callable[[], bool]  # the periodic jobs run
    accepting: Callable[[], bool]  # False while the service drains
    credentials: Callable[[], Awaitable[None]]  # raises CredentialsError
    targets: Callable[[], Awaitable[str | None]]  # why no target was read, in words


class Routes:
    def __init__(self, readiness: Readiness, metrics: Handler) -> None:
        self.readiness = readiness
        self.metrics = metrics

    def install(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        ask = self.readiness
        database = await ask.database()
        scheduler = ask.scheduler()
        accepting = ask.accepting()
        credentials: Any = True
        try:
            async with asyncio.timeout(5):
                await ask.credentials()
        except CredentialsError as error:
            credentials = error.user_message
        except TimeoutError:
            credentials = "obtaining a Google Cloud token took more than 5 s"
        ready = database and scheduler and accepting and credentials is True
        # Said, not counted against readiness: every replica would leave the load balancer
        # together, and `/cluster` could no longer tell anyone why.
        targets: Any = True
        if database:
            with contextlib.suppress(Exception):  # the database went away meanwhile
                targets = await ask.targets() or True
        return web.json_response(
            {
                "database": database,
                "scheduler": scheduler,
                "accepting": accepting,
                "credentials": credentials,
                "targets": targets,
            },
            status=200 if ready else 503,
        )
