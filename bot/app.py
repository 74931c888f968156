"""The composition root: builds every service, the Bolt app, the web routes and the scheduler,
and owns startup and clean shutdown (work in flight is finished or left in the store)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from bot.logs import trace_middleware
from bot.metrics import BotMetrics
from bot.settings import Settings
from bot.slack.listeners import Background, Roles, SlackEdge
from bot.slack.messenger import LogMessenger, SlackMessenger, web_client
from bot.store import Store
from bot.vertex.auth import GoogleCredentialsToken, StaticToken, TokenSource
from bot.vertex.client import VertexClient
from bot.vertex.retry import RetryPolicy
from handlers.bot import ClusterBot
from handlers.changes import ChangeService
from handlers.clusters import ClusterDirectory
from handlers.costs import PriceBook
from handlers.idle import Status
from handlers.policy import Policy
from handlers.sweep import IdleSweeper, SweepReport
from handlers.tracking import Tracker

log = logging.getLogger(__name__)
EXPIRY_SECONDS = 15.0


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
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.clock = clock
        self.owner = owner or f"{socket.gethostname()}-{id(self):x}"
        self.tick_seconds = tick_seconds
        self.expiry_seconds = expiry_seconds
        self._stopped = False
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
            SlackMessenger(self.slack) if bot_token else LogMessenger()
        )
        prices = PriceBook.with_overrides(policy.prices)
        self.directory = ClusterDirectory(self.vertex, settings.targets)
        self.tracker = Tracker(self.store, self.vertex, self.messenger, clock, self.owner)
        self.changes = ChangeService(
            self.store,
            self.vertex,
            self.directory,
            policy,
            prices,
            self.messenger,
            self.tracker,
            clock,
        )
        self.tracker.on_finish = self.changes.finish
        self.sweeper = IdleSweeper(
            self.store,
            self.vertex,
            self.directory,
            self.changes,
            policy.idle,
            prices,
            self.messenger,
            settings.alert_channel,
            clock,
            slurm_version=settings.slurm_api_version,
            concurrency=settings.vertex_concurrency,
        )
        self.bot = ClusterBot(
            self.directory, self.changes, self.store, prices, clock, sweep=self.sweep
        )
        self.background = Background()
        self.bolt = self._slack_app(policy) if bot_token else None
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.accepting = True
        self._tick_lock = asyncio.Lock()

    def _slack_app(self, policy: Policy) -> AsyncApp:
        """The Bolt app and its listeners; only with a bot token (a cron sweep needs neither)."""
        secret = self.settings.slack_signing_secret
        bolt_log = logging.getLogger("clusterbot.bolt")
        # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client's (the same) wins.
        bolt_log.addFilter(lambda record: "will be unused" not in record.getMessage())
        app = AsyncApp(
            client=self.slack,
            signing_secret=secret.get_secret_value() if secret else None,
            process_before_response=False,
            logger=bolt_log,
        )
        SlackEdge(
            app,
            self.bot,
            self.changes,
            policy,
            Roles(policy, self.slack),
            self.background,
            sweeper=self.sweeper,
            on_command=self.metrics.command,
        ).register()
        return app

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self.store.migrate()
        now = datetime.now(UTC)
        jobs = (
            ("tracker", self._tick, self.tick_seconds),
            ("expiry", self._expire, self.expiry_seconds),
            ("idle-sweep", self._scheduled_sweep, self.settings.sweep_interval),
        )
        for job_id, job, seconds in jobs:
            # one run at a time; a run missed while busy is folded into the next
            self.scheduler.add_job(
                job,
                "interval",
                seconds=seconds,
                id=job_id,
                max_instances=1,
                coalesce=True,
                next_run_time=now,
            )
        self.scheduler.start()
        resumed = len(await self.store.active_operations())
        log.info("clusterbot started (%s); %d operations to follow", self.owner, resumed)

    async def stop(self) -> None:
        """Stop taking work, let running work finish, and hand leases back for other replicas."""
        if self._stopped:
            return
        self._stopped = True
        self.accepting = False
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        async with self._tick_lock:  # a tick in progress finishes first
            pass
        async with self.sweeper.lock:  # a sweep in progress finishes first
            pass
        await self.background.drain()
        await self.store.release_operations(self.owner)
        await self.vertex.aclose()
        await self.store.close()
        log.info("clusterbot stopped")

    async def _tick(self) -> None:
        async with self._tick_lock:
            if not self.accepting:
                return
            try:
                await self.tracker.poll_due()
                active = await self.store.active_operations()
                self.metrics.operations_in_flight = float(len(active))
            except Exception:  # a failing tick is logged; the next one runs
                log.exception("tracking tick failed")

    async def sweep(self) -> SweepReport:
        """One idle sweep, counted in the metrics."""
        report = await self.sweeper.sweep()
        idle = [e for e in report.entries if e.verdict.status in (Status.IDLE, Status.SNOOZED)]
        self.metrics.idle_clusters = float(len(idle))
        self.metrics.idle_cost = sum(e.cost_hour or 0.0 for e in idle)
        self.metrics.sweep_seconds.observe(report.finished - report.started)
        return report

    async def _scheduled_sweep(self) -> None:
        if not self.accepting:
            return
        try:
            report = await self.sweep()
            log.info(
                "idle sweep: %d clusters, %d alerts, %.1f s",
                len(report.entries),
                report.alerts,
                report.finished - report.started,
            )
        except Exception:  # a failing sweep is logged; the next one runs
            log.exception("idle sweep failed")

    async def _expire(self) -> None:
        async with self._tick_lock:  # shutdown waits for it, like a tick
            if not self.accepting:
                return
            try:
                await self.changes.expire_due()
            except Exception:
                log.exception("expiry sweep failed")

    # -- HTTP ----------------------------------------------------------------------------------

    async def slack_events(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        if not self.accepting:
            return web.json_response({"error": "shutting down"}, status=503)
        assert self.bolt is not None  # the route exists only with a Slack app
        response = await to_aiohttp_response(
            await self.bolt.async_dispatch(await to_bolt_request(request))
        )
        self.metrics.ack_seconds.observe(time.perf_counter() - started)
        return response

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        database = await self.store.ping()
        scheduler = self.scheduler.running
        ready = database and scheduler and self.accepting
        return web.json_response(
            {"database": database, "scheduler": scheduler, "accepting": self.accepting},
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

    def install(self, app: web.Application, path: str = "/slack/events") -> None:
        """Add the service's routes to ``app``, and start and stop it with the app.

        ``/slack/events`` is served only with a signing secret: unsigned requests never reach
        the listeners (Socket Mode needs no request URL)."""
        if self.settings.slack_signing_secret is not None and self.bolt is not None:
            app.router.add_post(path, self.slack_events)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_text)
        app.cleanup_ctx.append(self._lifecycle)


def web_app(service: ClusterbotService) -> web.Application:
    app = web.Application(middlewares=[trace_middleware])
    service.install(app)
    return app
