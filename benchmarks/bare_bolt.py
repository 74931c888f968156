"""A bare Bolt AsyncApp that only acks /cluster, with the same signature check: the baseline.
``GET /count`` says how many times its listener ran, so the benchmark can check it did.

It runs its listener before answering, as ``serve`` does (``process_before_response``), so
that neither waits out Bolt's default ack polling (a 10 ms sleep) and the comparison is of the
work each does, not of a sleep."""

from __future__ import annotations

import os
import sys
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient


def main() -> None:
    port = int(sys.argv[1])
    app = AsyncApp(
        client=AsyncWebClient(
            token=os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["CLUSTERBOT_SLACK_API_URL"]
        ),
        signing_secret=os.environ["SLACK_SIGNING_SECRET"],
        process_before_response=True,
    )
    ran = {"count": 0}

    @app.command("/cluster")
    async def cluster(ack: Any) -> None:
        ran["count"] += 1
        await ack()

    async def count(request: web.Request) -> web.Response:
        return web.json_response(ran)

    server = app.web_app(path="/slack/events")
    server.router.add_get("/count", count)
    web.run_app(server, host="127.0.0.1", port=port, print=None, access_log=None)


main()
