"""A bare Bolt AsyncApp that only acks /cluster, with the same signature check: the baseline."""

from __future__ import annotations

import os
import sys

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
    )

    @app.command("/cluster")
    async def cluster(ack):  # type: ignore[no-untyped-def]
        await ack()

    web.run_app(app.web_app(path="/slack/events"), host="127.0.0.1", port=port, print=None)


main()
