"""`clusterbot demo` and `clusterbot sandbox`: the local stand-ins, with or without the bot.

The fake Slack (its page at ``/``, Web API at ``/api/``), the control-plane simulator (at
``/vertex``) and, in the demo, the bot (at ``/slack/events``) talk to each other over real
HTTP on loopback, exactly as they would across the internet.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import SecretStr

from bot.app import ClusterbotService
from bot.demo_history import seed_week
from bot.edge import KEEPALIVE_TIMEOUT, edge_middleware, listen
from bot.routes import trace_middleware
from bot.sandbox.controlplane import DEMO_FIXTURES, Durations, SimulatorState, mount
from bot.sandbox.slack import Workspace, install
from bot.settings import Settings
from handlers.domain.names import Target
from handlers.owed.engine import LEASE
from handlers.policy import Policy
from handlers.spend.capability import DIGEST
from handlers.sweep.alert import IDLE_PAYING

DEMO_TOKEN = "xoxb-clusterbot-demo"
SEED_WAIT = 15.0  # seconds a stop waits for the week of spend to be written
DIGEST_WAIT = 120.0  # seconds the demo's digest waits for the first idle alert
DEMO_POLICY = {
    "default_role": "viewer",
    "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"], "viewer": ["U0CAROL"]},
    "approval": {"self_approval": False, "expiry_minutes": 60},
    # fast, for a demo: cpu01 is alerted on within about a minute of starting
    "idle": {"idle_after_minutes": 0.5, "cooldown_hours": 1},
}


def stand_ins(
    origin: str, *, durations: Durations | None = None, bot_url: str | None = None
) -> tuple[web.Application, Workspace, SimulatorState]:
    """An app serving the Slack stand-in and the simulator (under /vertex), and their state."""
    simulator = SimulatorState(durations=durations or Durations(create=20, update=12, delete=15))
    simulator.load_fixture_file(DEMO_FIXTURES)
    workspace = Workspace(
        signing_secret=secrets.token_hex(16), bot_token=DEMO_TOKEN, bot_url=bot_url
    )
    app = web.Application(middlewares=[edge_middleware, trace_middleware])
    install(app, workspace)
    mount(app, "/vertex", simulator)
    return app, workspace, simulator


def build_demo(
    host: str,
    port: int,
    *,
    data_dir: Path | None = None,
    durations: Durations | None = None,
    tick_seconds: float = 1.0,
    policy: Policy | None = None,
    settings_overrides: dict[str, Any] | None = None,
    expiry_seconds: float = 15.0,
    working_after: float | None = None,
    lease: float | None = None,
) -> tuple[web.Application, ClusterbotService, Workspace, SimulatorState]:
    origin = f"http://{host}:{port}"
    folder = data_dir or Path(tempfile.mkdtemp(prefix="clusterbot-demo-"))
    app, workspace, simulator = stand_ins(
        origin, durations=durations, bot_url=f"{origin}/slack/events"
    )
    values: dict[str, Any] = {
        "slack_bot_token": SecretStr(DEMO_TOKEN),
        "slack_signing_secret": SecretStr(workspace.signing_secret),
        "targets": [Target("demo-project", "us-central1"), Target("demo-project", "europe-west4")],
        "database_url": f"sqlite+aiosqlite:///{folder / 'clusterbot.db'}",
        "vertex_api_url": f"{origin}/vertex",
        "monitoring_api_url": f"{origin}/vertex",
        "vertex_static_token": SecretStr("demo"),
        "slack_api_url": f"{origin}/api/",
        # the whole stack in one process: its few clusters are swept, and its reports made,
        # on its own event loop
        "sweep_process": False,
        "report_process": False,
        "alert_channel": "C0MLINFRA",
        "sweep_interval": 10,
        # the demo posts its week's digest itself, once its first idle alert is up
        "digest_cron": "off",
        "host": host,
        "port": port,
    }
    settings = Settings(**{**values, **(settings_overrides or {})})
    service = ClusterbotService(
        settings,
        policy or Policy.model_validate(DEMO_POLICY),
        tick_seconds=tick_seconds,
        expiry_seconds=expiry_seconds,
        working_after=working_after,
        lease=lease if lease is not None else LEASE,
    )
    service.install(app)
    return app, service, workspace, simulator


def run_demo(host: str, port: int, data_dir: Path | None = None) -> None:
    folder = data_dir or Path(tempfile.mkdtemp(prefix="clusterbot-demo-"))
    try:
        app, service, _workspace, _simulator = build_demo(host, port, data_dir=folder)
        url = f"http://{host}:{port}/"
        print(f"clusterbot demo on {url}", flush=True)
        print(
            "  open it, pick a user (alice operator, bob approver, carol viewer) and type",
            flush=True,
        )
        print("  /cluster help   /cluster list   /cluster resize train01 a4 3", flush=True)
        print("  control-plane simulator: " + url + "vertex/_sim/requests", flush=True)
        asyncio.run(_until_stopped(app, service, host, port))
    finally:
        if data_dir is None:  # the demo's own temporary data goes with it
            shutil.rmtree(folder, ignore_errors=True)


async def _seed(service: ClusterbotService, stopping: asyncio.Event) -> None:
    """A week of history; then, once the first idle cluster is alerted (about a minute), the
    week's digest from it, so that its biggest opportunity has its button."""
    log = logging.getLogger(__name__)
    try:
        written = await seed_week(service)
        log.info("the demo's ledger holds a week of spend (%d runs)", written)
        digest = service.core.of(DIGEST)
        if not written or digest is None:
            return
        deadline = time.monotonic() + DIGEST_WAIT
        while time.monotonic() < deadline and not await _alerted(service):
            try:
                await asyncio.wait_for(stopping.wait(), 2.0)
                return  # stopping: no digest
            except TimeoutError:
                pass
        await digest.fire(time.time())
    except Exception:  # the demo runs on without its history: say why
        log.exception("the demo's week of history was not written")


async def _alerted(service: ClusterbotService) -> bool:
    latest = await service.core.sweeper.latest()
    return latest is not None and any(e.status in IDLE_PAYING for e in latest.entries)


async def _until_stopped(
    app: web.Application, service: ClusterbotService, host: str, port: int
) -> None:
    """Serve until Ctrl-C or SIGTERM; then stop the bot first, while the stand-ins it talks
    to over loopback still answer, and only then close the port."""
    runner = web.AppRunner(app, handle_signals=False, keepalive_timeout=KEEPALIVE_TIMEOUT)
    await runner.setup()
    listener = await listen(runner, host, port)  # the same edge as serve's
    # a week of spend for /cluster cost, once the simulator it lists answers on the port
    stopping = asyncio.Event()
    seeding = asyncio.ensure_future(_seed(service, stopping))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        stopping.set()
        # let the seeding end on its own (a second or two): cut off inside a database call,
        # it could leave the pool a connection that closing the store then waits on
        if not (await asyncio.wait({seeding}, timeout=SEED_WAIT))[0]:
            seeding.cancel()
            await asyncio.wait({seeding})
        await service.stop()
    finally:
        listener.close()
        await runner.cleanup()


def run_sandbox(host: str, port: int) -> None:
    origin = f"http://{host}:{port}"
    app, _workspace, _simulator = stand_ins(origin)
    print(f"clusterbot sandbox on {origin}/ (Slack stand-in; simulator at {origin}/vertex)")
    print(f"  attach replicas: GET {origin}/sandbox/api/config for the token and signing secret,")
    print(
        f'  then POST {origin}/sandbox/api/config {{"bot_url": ["http://HOST:PORT/slack/events"]}}'
    )
    print(
        f"  replicas use CLUSTERBOT_SLACK_API_URL={origin}/api/ and "
        f"CLUSTERBOT_VERTEX_API_URL={origin}/vertex",
        flush=True,
    )
    web.run_app(app, host=host, port=port, print=None)
