"""`clusterbot serve`: HTTP mode on HOST:PORT, or Socket Mode when SLACK_APP_TOKEN is set.

In Socket Mode the HTTP server still runs, for /healthz, /readyz and /metrics. SIGTERM
drains before the listening socket closes: Slack gets 503 (and retries elsewhere), not a
refused connection, while work in flight finishes or is handed back.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from urllib.parse import urlparse

from aiohttp import web

from bot.app import ClusterbotService
from bot.edge import KEEPALIVE_TIMEOUT, edge_middleware, listen, quiet_malformed_http
from bot.logs import quiet_cut_connects
from bot.memory import collect_rarely
from bot.routes import trace_middleware
from bot.settings import Settings
from handlers.policy import Policy

log = logging.getLogger(__name__)


def web_app(service: ClusterbotService, *, lifecycle: bool = True) -> web.Application:
    """The service's HTTP application: its routes, the chat platform's and the hook's."""
    app = web.Application(middlewares=[edge_middleware, trace_middleware])
    service.install(app, lifecycle=lifecycle)
    return app


def describe_start_failure(error: BaseException, settings: Settings) -> str:
    """Why the service could not start, in one line (secrets are removed by the log filter)."""
    parsed = urlparse(settings.database_url)
    where = f"{parsed.scheme}://{parsed.hostname or ''}{parsed.path}"
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    kind = type(error).__name__
    if (
        isinstance(error, OSError)
        or "sqlalchemy" in type(error).__module__
        or "asyncpg" in type(error).__module__
    ):
        return f"clusterbot could not start: the database {where} is unreachable ({kind}: {first})"
    return f"clusterbot could not start: {kind}: {first}"


async def serve(settings: Settings, policy: Policy) -> int:
    service = ClusterbotService(settings, policy)
    runner = web.AppRunner(
        web_app(service, lifecycle=False),
        handle_signals=False,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
    )
    quiet_malformed_http()
    quiet_cut_connects(asyncio.get_running_loop())
    listener: asyncio.Server | None = None
    try:
        await service.start()
        await runner.setup()
        listener = await listen(runner, settings.host, settings.port)
    except Exception as error:
        log.error(describe_start_failure(error, settings))
        await runner.cleanup()
        await service.close_connections()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        # asked again while draining: the signal's default action ends the process at once,
        # and what it held is taken up by a replica when its leases lapse
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stopping)
    await service.chat.connect(settings.host, settings.port)  # Socket Mode, where it has one
    await stop.wait()
    log.info("shutting down: no new work, finishing what is in flight (asked again: at once)")
    await service.chat.disconnect()
    await service.stop()  # /slack/events answers 503 meanwhile
    assert listener is not None  # set when the start succeeded
    listener.close()
    await runner.cleanup()
    return 0


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# How long a thread may hold the GIL while another waits for it (Python's default is 5 ms).
# The database driver's worker thread runs Python between its queries; with the default, a
# Slack request that arrives meanwhile waits up to 5 ms for the event loop's thread to run.
SWITCH_INTERVAL = 0.0005


def run_service(settings: Settings, policy: Policy) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL)
    collect_rarely()
    return asyncio.run(serve(settings, policy))
