"""The composition root: builds every object fully, in one place, and owns startup, recovery
and shutdown.

Shutdown (SIGTERM) stops taking work (``/slack/events`` answers 503 while the listening socket
stays open), lets work in flight finish for a while, cancels what is left and hands every
lease back, so another replica (or this one, restarted) takes the work up at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.logs import trace_middleware
from bot.metrics import BotMetrics
from bot.redact import Redactor
from bot.settings import Settings
from bot.slack.listeners import Background, Responder, Roles, SlackEdge
from bot.slack.messenger import LogMessenger, SlackMessenger, web_client
from bot.store import IdleRecords, Store
from bot.vertex.auth import GoogleCredentialsToken, StaticToken, TokenSource
from bot.vertex.client import VertexClient
from bot.vertex.errors import CredentialsError
from bot.vertex.retry import RetryPolicy
from bot.vertex.slurm import SlurmReader
from handlers.alerts import AlertBoard, IdleAlerts
from handlers.approvals import Approvals
from handlers.clusters import ClusterDirectory
from handlers.costs import PriceBook
from handlers.dispatch import Core, Dispatcher
from handlers.execution import LEASE, Executor
from handlers.idle import Status
from handlers.idle_clicks import IdleClicks
from handlers.ledger import RequestLedger
from handlers.policy import Policy
from handlers.ports import CrashPoint, no_crash
from handlers.reports import Reports
from handlers.sweep import ActivityObserver, Sweeper, SweepReport
from handlers.tracking import Tracker

log = logging.getLogger(__name__)
EXPIRY_SECONDS = 15.0
SIGNATURE_WINDOW = 300  # seconds: Slack's replay window for a request's timestamp
CRASH_EXIT = 86


def crash_hook(point: str | None) -> CrashPoint:
    """A debug hook that ends the process at a named step of a change (crash-point tests)."""
    if not point:
        return no_crash

    def crash(step: str) -> None:
        if step == point:
            logging.getLogger("clusterbot.crash").warning("exiting at %s", step)
            os._exit(CRASH_EXIT)

    return crash


def secret_values(settings: Settings) -> list[str]:
    values = [
        s.get_secret_value()
        for s in (
            settings.slack_bot_token,
            settings.slack_signing_secret,
            settings.slack_app_token,
            settings.vertex_static_token,
        )
        if s is not None
    ]
    from urllib.parse import urlparse

    password = urlparse(settings.database_url).password
    return [v for v in [*values, password or ""] if v]


class Jobs:
    """Periodic work under APScheduler, each run a task of our own: a failure is logged and
    the next run goes on, and shutdown waits for runs in flight instead of cancelling them."""

    def __init__(self) -> None:
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.running: set[asyncio.Task[None]] = set()

    def add(self, name: str, job: Callable[[], Awaitable[Any]], seconds: float) -> None:
        async def run() -> None:
            task = asyncio.get_running_loop().create_task(self._guarded(name, job))
            self.running.add(task)
            task.add_done_callback(self.running.discard)
            await asyncio.shield(task)

        # one run at a time; a run missed while busy is folded into the next
        self.scheduler.add_job(
            run,
            "interval",
            seconds=seconds,
            id=name,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )

    @staticmethod
    async def _guarded(name: str, job: Callable[[], Awaitable[Any]]) -> None:
        try:
            await job()
        except Exception:  # a failing run is logged; the next one runs
            log.exception("%s failed; the next run goes on", name)

    def start(self) -> None:
        self.scheduler.start()

    async def stop(self, limit: float) -> None:
        if self.scheduler.running:
            self.scheduler.pause()
        if self.running:
            await asyncio.wait(set(self.running), timeout=limit)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)


class ClusterbotService:
    def __init__(
        self,
        settings: Settings,
        policy: Policy,
        *,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
        tick_seconds: float = 1.0,
        expiry_seconds: float = EXPIRY_SECONDS,
        lease: float = LEASE,
        working_after: float | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.clock = clock
        self.owner = owner or settings.replica_id or f"{socket.gethostname()}:{settings.port}"
        self.tick_seconds = tick_seconds
        self.expiry_seconds = expiry_seconds
        self.lease = lease
        self._stopped = False
        self.accepting = True
        crash = crash_hook(settings.debug_crash_at)
        self.redactor = Redactor(secret_values(settings))
        self.metrics = BotMetrics()
        self.store = Store.from_url(settings.database_url)
        tokens: TokenSource
        if settings.vertex_static_token is not None:
            tokens = StaticToken(settings.vertex_static_token.get_secret_value())
        else:
            tokens = GoogleCredentialsToken()
        self.vertex = VertexClient(
            tokens,
            base_url=settings.vertex_api_url,
            concurrency=settings.vertex_concurrency,
            retry=RetryPolicy(deadline=settings.vertex_retry_deadline),
            observer=self.metrics.call,
        )
        bot_token = (
            settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
        )
        self.slack = web_client(bot_token or "", settings.slack_api_url)
        self.messenger: SlackMessenger | LogMessenger = (
            SlackMessenger(self.slack, self.redactor) if bot_token else LogMessenger()
        )
        prices = PriceBook.with_overrides(policy.prices)
        self.directory = ClusterDirectory(self.vertex, settings.targets)
        self.records = IdleRecords(self.store)
        alerting = bot_token is not None and settings.alert_channel is not None
        self.board = AlertBoard(
            self.records,
            self.messenger if alerting else None,
            settings.alert_channel,
            policy.idle,
            clock,
        )
        ledger = RequestLedger(
            self.store, self.messenger, clock, on_ended=[self.board.remedy_ended]
        )
        self.executor = Executor(
            self.store, self.vertex, ledger, clock, self.owner, crash=crash, lease=lease
        )
        self.changes = Approvals(
            self.store,
            self.directory,
            policy,
            prices,
            self.messenger,
            ledger,
            self.executor,
            clock,
            self.owner,
            crash=crash,
        )
        self.tracker = Tracker(
            self.store,
            self.store,
            self.vertex,
            self.messenger,
            ledger,
            clock,
            self.owner,
            crash=crash,
            lease=lease,
        )
        alerts = IdleAlerts(self.board, self.changes, self.vertex, prices, clock)
        self.clicks = IdleClicks(self.board, self.changes, self.vertex, prices, clock)
        observer = ActivityObserver(
            SlurmReader(self.vertex, settings.slurm_api_version), clock, settings.vertex_concurrency
        )
        self.sweeper = Sweeper(
            self.directory,
            observer,
            self.records,
            self.store,
            self.store,
            self.store,
            alerts,
            self.messenger if alerting else None,
            policy.idle,
            prices,
            clock,
            self.owner,
            interval=settings.sweep_interval,
        )
        self.reports = Reports(self.directory, self.store, self.store, prices, clock, self.sweeper)
        self.background = Background()
        self.responder = Responder(self.redactor)
        self.roles = Roles(policy, self.slack)
        self.dispatcher = Dispatcher(
            Core(self.reports, self.changes), policy, self.roles, self.clicks
        )
        self.bolt = self._slack_app(working_after) if bot_token else None
        self.jobs = Jobs()

    def _slack_app(self, working_after: float | None) -> AsyncApp:
        """The Bolt app and its listeners; only with a bot token (a cron sweep needs neither).
        Requests are verified before they reach Bolt (``slack_events``)."""
        bolt_log = logging.getLogger("clusterbot.bolt")
        # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client's (the same) wins.
        bolt_log.addFilter(lambda record: "will be unused" not in record.getMessage())
        app = AsyncApp(
            client=self.slack,
            signing_secret="unused: verified before dispatch",
            request_verification_enabled=False,
            process_before_response=False,
            logger=bolt_log,
        )
        extra = {} if working_after is None else {"working_after": working_after}
        SlackEdge(
            app,
            self.dispatcher,
            self.background,
            self.responder,
            on_command=self.metrics.command,
            **extra,
        ).register()
        return app

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.store.migrate()
        # A replica keeps its id across restarts: whatever it held before is free again now.
        await self.store.release_leases(self.owner)
        self.jobs.add("tracker", self._tick, self.tick_seconds)
        self.jobs.add("recovery", self._recover, self.tick_seconds)
        self.jobs.add("heartbeat", self._heartbeat, max(0.5, self.lease / 3))
        self.jobs.add("expiry", self._expire, self.expiry_seconds)
        self.jobs.add("idle-sweep", self._scheduled_sweep, self.settings.sweep_interval)
        self.jobs.start()
        in_flight = await self.store.count_in_flight()
        log.info("clusterbot started (%s); %d changes to follow", self.owner, in_flight)

    async def stop(self) -> None:
        """Stop taking work, let work in flight finish, and hand every lease back."""
        if self._stopped:
            return
        self._stopped = True
        self.accepting = False
        await self.jobs.stop(self.settings.drain_seconds)
        cancelled = await self.background.drain(self.settings.drain_seconds)
        if cancelled:
            log.info("handed back %d unfinished tasks to be recovered", cancelled)
        await self.store.release_leases(self.owner)
        await self.responder.close()
        await self.vertex.aclose()
        await self.store.close()
        log.info("clusterbot stopped")

    async def _tick(self) -> None:
        if not self.accepting:
            return
        await self.tracker.poll_due()
        self.metrics.operations_in_flight = float(await self.store.count_in_flight())

    async def _recover(self) -> None:
        if self.accepting:
            await self.executor.recover_orphans()

    async def _heartbeat(self) -> None:
        await self.store.renew_leases(self.owner, self.clock(), self.lease)

    async def _expire(self) -> None:
        if self.accepting:
            await self.changes.expire_due()

    async def sweep(self, *, force: bool = False) -> SweepReport | None:
        """One idle sweep (unless another replica has it), counted in the metrics."""
        report = await self.sweeper.sweep(force=force)
        if report is not None:
            idle = [e for e in report.entries if e.status == Status.IDLE]
            self.metrics.idle_clusters = float(len(idle))
            self.metrics.idle_cost = sum(e.cost_hour or 0.0 for e in idle)
            self.metrics.sweep_seconds.observe(report.finished - report.started)
            log.info(
                "idle sweep: %d clusters, %d alerts, %.1f s",
                len(report.entries),
                report.alerts,
                report.finished - report.started,
            )
        return report

    async def _scheduled_sweep(self) -> None:
        if self.accepting:
            await self.sweep()

    # -- HTTP ----------------------------------------------------------------------------------

    def _verify(self, request: web.Request, body: bytes) -> str | None:
        """Why a request is refused, or None when Slack signed it. Checked on the raw bytes,
        before anything parses them."""
        secret = self.settings.slack_signing_secret
        if secret is None:
            return "no signing secret is configured"
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not timestamp.isdigit():
            return "the timestamp is missing or not a number"
        if abs(time.time() - int(timestamp)) > SIGNATURE_WINDOW:
            return "the timestamp is outside the 5-minute window"
        expected = (
            "v0="
            + hmac.new(
                secret.get_secret_value().encode(),
                b"v0:" + timestamp.encode() + b":" + body,
                hashlib.sha256,
            ).hexdigest()
        )
        if not hmac.compare_digest(expected, signature):
            return "the signature does not match"
        return None

    async def slack_events(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        if not self.accepting:
            return web.json_response({"error": "shutting down"}, status=503)
        assert self.bolt is not None  # the route exists only with a Slack app
        body = await request.read()
        refusal = self._verify(request, body)
        if refusal is not None:
            log.warning(
                "refused a request to %s: %s (%d bytes from %s)",
                request.path,
                refusal,
                len(body),
                request.remote,
            )
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("refused a signed request that is not UTF-8 (%d bytes)", len(body))
            return web.json_response({"error": "invalid request"}, status=400)
        bolt_request = AsyncBoltRequest(
            body=text, query=request.query_string, headers=dict(request.headers)
        )
        response = await to_aiohttp_response(await self.bolt.async_dispatch(bolt_request))
        self.metrics.ack_seconds.observe(time.perf_counter() - started)
        return response

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        database = await self.store.ping()
        scheduler = self.jobs.scheduler.running
        credentials: Any = True
        try:
            async with asyncio.timeout(5):
                await self.vertex.check_credentials()
        except CredentialsError as error:
            credentials = error.user_message
        except TimeoutError:
            credentials = "obtaining a Google Cloud token took more than 5 s"
        ready = database and scheduler and self.accepting and credentials is True
        return web.json_response(
            {
                "database": database,
                "scheduler": scheduler,
                "accepting": self.accepting,
                "credentials": credentials,
            },
            status=200 if ready else 503,
        )

    async def metrics_text(self, request: web.Request) -> web.Response:
        return web.Response(
            text=self.metrics.registry.render(), content_type="text/plain", charset="utf-8"
        )

    async def _lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.stop()

    def install(
        self, app: web.Application, path: str = "/slack/events", *, lifecycle: bool = True
    ) -> None:
        """Add the service's routes to ``app`` (and, with ``lifecycle``, start and stop it
        with the app; ``serve`` drives start and stop itself, to drain before closing).

        ``/slack/events`` is served only with a signing secret: unsigned requests never reach
        the listeners (Socket Mode needs no request URL)."""
        if self.settings.slack_signing_secret is not None and self.bolt is not None:
            app.router.add_post(path, self.slack_events)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_text)
        if lifecycle:
            app.cleanup_ctx.append(self._lifecycle)


def web_app(service: ClusterbotService, *, lifecycle: bool = True) -> web.Application:
    app = web.Application(middlewares=[trace_middleware])
    service.install(app, lifecycle=lifecycle)
    return app
