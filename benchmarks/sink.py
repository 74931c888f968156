"""Where the bots' response_url replies go, in a process of its own: it counts them, so a
benchmark can check that every command was answered. ``GET /count`` says how many."""

from __future__ import annotations

import sys

from aiohttp import web


def main() -> None:
    received = {"count": 0}

    async def reply(request: web.Request) -> web.Response:
        await request.read()
        received["count"] += 1
        return web.json_response({"ok": True})

    async def count(request: web.Request) -> web.Response:
        return web.json_response(received)

    app = web.Application()
    app.router.add_post("/r/{name}", reply)
    app.router.add_get("/count", count)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


main()
