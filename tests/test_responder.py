"""Replies through a response_url: one pooled session, and Slack's rules for the URL (5
uses in 30 minutes) kept by the bot itself."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.redact import Redactor
from bot.slack.responder import Responder
from handlers.replies import Reply, Text
from tests.conftest import ManualClock


async def test_a_response_url_gets_five_replies_in_thirty_minutes(clock: ManualClock) -> None:
    received: list[tuple[str, int]] = []

    async def hook(request: web.Request) -> web.Response:
        await request.json()
        peer = request.transport.get_extra_info("peername") if request.transport else None
        received.append((request.path, peer[1] if peer else 0))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hook/{name}", hook)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    responder = Responder(Redactor(), clock=clock)
    try:
        for _ in range(7):
            await responder.send(str(server.make_url("/hook/a")), Reply("x").add(Text("x")))
        await responder.send(str(server.make_url("/hook/b")), Reply("y").add(Text("y")))
        clock.advance(30 * 60)
        await responder.send(str(server.make_url("/hook/b")), Reply("z").add(Text("z")))
    finally:
        await responder.close()
        await server.close()
    paths = [path for path, _ in received]
    assert paths == ["/hook/a"] * 5 + ["/hook/b"]  # the 6th and 7th, and the late one, not sent
    assert len({port for _, port in received}) == 1  # one connection, reused
