"""The HTTP edge (``bot/edge.py``) over real sockets on loopback: a client that trickles its
request head is cut off at the header timeout, a silent one too, a body that does not arrive
is answered 408, and malformed HTTP is one warning line, while well-behaved requests on other
connections are answered meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from bot import edge
from tests.support.ports import free_port

HEADER_TIMEOUT = 1.0


async def echo(request: web.Request) -> web.Response:
    return web.Response(text=(await request.read()).decode())


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(edge, "BODY_TIMEOUT", 1.0)
    app = web.Application(middlewares=[edge.edge_middleware])
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, keepalive_timeout=edge.KEEPALIVE_TIMEOUT)
    await runner.setup()
    port = free_port()
    listener = await edge.listen(runner, "127.0.0.1", port, header_timeout=HEADER_TIMEOUT)
    try:
        yield port
    finally:
        listener.close()
        await runner.cleanup()


async def closed_after(reader: asyncio.StreamReader, limit: float) -> float:
    """Seconds until the server closed the connection (read returns b"" or fails)."""
    began = time.monotonic()
    try:
        async with asyncio.timeout(limit):
            while await reader.read(1024):
                pass
    except ConnectionError:
        pass
    return time.monotonic() - began


async def test_a_trickled_request_head_is_cut_off_and_others_are_answered(served: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"

    async def trickle() -> None:
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.5)

    sending = asyncio.ensure_future(trickle())
    try:
        url = f"http://127.0.0.1:{served}/echo"  # meanwhile, a client that behaves
        async with aiohttp.ClientSession() as session, session.post(url, data=b"ok") as reply:
            assert reply.status == 200 and await reply.text() == "ok"
        took = await closed_after(reader, 5 * HEADER_TIMEOUT)
        assert took < 2 * HEADER_TIMEOUT  # one byte every 0.5 s: closed at the header timeout
    finally:
        sending.cancel()
        writer.close()


async def test_a_silent_connection_is_closed(served: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    assert await closed_after(reader, 5 * HEADER_TIMEOUT) < 2 * HEADER_TIMEOUT
    writer.close()


async def test_a_body_that_does_not_arrive_is_answered_408(served: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly this")
    await writer.drain()
    async with asyncio.timeout(5):
        status = await reader.readline()
    assert status.startswith(b"HTTP/1.1 408"), status
    writer.close()


async def test_a_kept_alive_connection_takes_a_second_request(served: int) -> None:
    async with aiohttp.ClientSession() as session:
        for word in ("one", "two"):  # one pooled connection, idle between them
            async with session.post(f"http://127.0.0.1:{served}/echo", data=word) as reply:
                assert await reply.text() == word
            await asyncio.sleep(HEADER_TIMEOUT * 1.5)  # idle is keep-alive's, not the head's


async def test_malformed_http_is_one_warning_line(
    served: int, caplog: pytest.LogCaptureFixture
) -> None:
    edge.quiet_malformed_http()
    caplog.set_level(logging.DEBUG, logger="aiohttp.server")
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(5):
        status = await reader.readline()
    assert b" 400 " in status, status
    writer.close()
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert [r.levelname for r in records] == ["WARNING"], records
    said = records[0].getMessage()
    assert records[0].exc_info is None and "refused malformed HTTP" in said and "\n" not in said
