"""`clusterbot serve`: HTTP mode on PORT, or Socket Mode when SLACK_APP_TOKEN is set.

In Socket Mode the HTTP server still runs, for /healthz, /readyz and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from bot.app import ClusterbotService, web_app
from bot.settings import Settings
from handlers.policy import Policy

log = logging.getLogger(__name__)


async def serve(settings: Settings, policy: Policy) -> None:
    service = ClusterbotService(settings, policy)
    runner = web.AppRunner(web_app(service), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host="0.0.0.0", port=settings.port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    socket_mode = None
    if settings.slack_app_token is not None:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert service.bolt is not None  # serve requires SLACK_BOT_TOKEN
        socket_mode = AsyncSocketModeHandler(
            service.bolt, settings.slack_app_token.get_secret_value()
        )
        await socket_mode.connect_async()  # type: ignore[no-untyped-call]
        log.info("connected to Slack in Socket Mode; health on port %d", settings.port)
    else:
        log.info("listening for Slack on port %d at /slack/events", settings.port)
    await stop.wait()
    log.info("shutting down: no new work, finishing what is in flight")
    if socket_mode is not None:
        await socket_mode.close_async()  # type: ignore[no-untyped-call]
    await runner.cleanup()


def run_service(settings: Settings, policy: Policy) -> None:
    asyncio.run(serve(settings, policy))
