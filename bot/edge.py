"""The HTTP edge of ``clusterbot serve``: time limits on slow or silent clients, and one
warning line for traffic that is not HTTP.

aiohttp's server closes a connection left idle after a response (``keepalive_timeout``, 3630 s
by default; 75 s here, nginx's default), and has no limit on how long a request's head or
body may take to arrive: a client sending a byte every few seconds holds a connection, and a
handler waiting for a body, for ever (the "slowloris" pattern). So:

- a connection must send a complete request head within ``HEADER_TIMEOUT`` of its first
  byte (or of opening), else it is closed (``Deadline``, around aiohttp's protocol);
- a request's body must arrive within ``BODY_TIMEOUT`` once its head is in, else it is
  answered 408 (``edge_middleware``).

Malformed HTTP from anyone (a scanner, TLS sent to a plain port) is logged by aiohttp as an
ERROR with a traceback; it is one WARNING line here (``MalformedHttp``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(__name__)

KEEPALIVE_TIMEOUT = 75.0
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 10.0

_OPEN: dict[int, Deadline] = {}  # each connection's deadline, by its transport
_WATCHERS: set[asyncio.Task[None]] = set()  # kept referenced while they run


class Deadline(asyncio.Protocol):
    """aiohttp's protocol for one connection, closed when a request head is too slow. The
    time a head started is noted (``since``); one watcher for all connections closes those
    past the limit (``watch``), rather than a timer set and cancelled for every request."""

    def __init__(self, inner: asyncio.Protocol, timeout: float = HEADER_TIMEOUT) -> None:
        self.inner = inner
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        self.since: float | None = None  # when the head now awaited began to be awaited
        self.busy = False  # a request's head is in; its handler runs

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _OPEN[id(transport)] = self
        self.inner.connection_made(transport)
        self.since = time.monotonic()

    def data_received(self, data: bytes) -> None:
        if not self.busy and self.since is None:
            self.since = time.monotonic()  # the first byte of a new request
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            _OPEN.pop(id(self.transport), None)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def head_received(self) -> None:
        self.since = None
        self.busy = True

    def answered(self) -> None:
        self.busy = False  # idle now: aiohttp's keep-alive timeout holds until the next byte

    def expired(self, now: float) -> bool:
        return not self.busy and self.since is not None and now - self.since > self.timeout

    def close(self) -> None:
        if self.transport is not None:
            peer = self.transport.get_extra_info("peername")
            log.warning("closed a connection from %s: no request head in %g s", peer, self.timeout)
            self.transport.abort()


async def watch(server: asyncio.Server, every: float) -> None:
    """Close the connections whose request head is late, while the server serves."""
    while server.is_serving():
        await asyncio.sleep(every)
        now = time.monotonic()
        for deadline in [d for d in _OPEN.values() if d.expired(now)]:
            deadline.close()


@web.middleware
async def edge_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    deadline = _OPEN.get(id(request.transport)) if request.transport is not None else None
    if deadline is not None:
        deadline.head_received()
    try:
        # a multipart body is read as a stream by its handler: read here it would be gone
        if request.can_read_body and not request.content_type.startswith("multipart/"):
            try:
                if request.content.is_eof():  # all of it came with the head, as Slack's do
                    await request.read()  # kept by aiohttp: the handler reads it again
                else:
                    async with asyncio.timeout(BODY_TIMEOUT):
                        await request.read()
            except TimeoutError:
                log.warning("answered 408 to %s: its body did not arrive in time", request.remote)
                return web.json_response(
                    {"error": "the request body did not arrive in time"},
                    status=408,
                    headers={"Connection": "close"},
                )
        return await handler(request)
    finally:
        if deadline is not None:
            deadline.answered()


class MalformedHttp(logging.Filter):
    """aiohttp's "Error handling request" for input that is not HTTP: one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "refused malformed HTTP: %s (%s)"
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.args = (" ".join(str(error.message).split())[:200], peer)  # one line
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_malformed_http() -> None:
    logging.getLogger("aiohttp.server").addFilter(MalformedHttp())


async def listen(
    runner: web.AppRunner, host: str, port: int, header_timeout: float = HEADER_TIMEOUT
) -> asyncio.Server:
    """Serve ``runner``'s app on ``host:port``, each connection under a ``Deadline``. The
    runner must be made with ``keepalive_timeout=KEEPALIVE_TIMEOUT`` and set up."""
    server: Any = runner.server
    assert server is not None, "set the runner up first"
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: Deadline(server(), header_timeout), host, port, reuse_address=True
    )
    watcher = loop.create_task(watch(listener, min(1.0, header_timeout / 4)))
    _WATCHERS.add(watcher)
    watcher.add_done_callback(_WATCHERS.discard)
    return listener
