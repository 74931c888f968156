"""Where the bots' response_url replies go, in a process of its own: it counts them, so a
benchmark can check that every command was answered. ``GET /count`` says how many, ``GET
/times`` when the first reply to each URL arrived."""

from __future__ import annotations

import sys
import time

from aiohttp import web


def main() -> None:
    received = {"count": 0}
    arrived: dict[str, float] = {}  # reply name -> when it arrived (wall clock)

    kept: dict[str, str] = {}  # replies to URLs named k_..., kept whole for a check

    async def reply(request: web.Request) -> web.Response:
        text = await request.text()
        received["count"] += 1
        name = request.match_info["name"]
        arrived.setdefault(name, time.time())
        if name.startswith("k_"):
            kept[name] = text
        return web.json_response({"ok": True})

    async def body(request: web.Request) -> web.Response:
        return web.Response(text=kept.get(request.match_info["name"], ""))

    async def count(request: web.Request) -> web.Response:
        return web.json_response(received)

    async def times(request: web.Request) -> web.Response:
        return web.json_response(arrived)

    app = web.Application()
    app.router.add_post("/r/{name}", reply)
    app.router.add_get("/count", count)
    app.router.add_get("/times", times)
    app.router.add_get("/kept/{name}", body)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


main()
