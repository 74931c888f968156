"""The composition root: builds every object fully, in one place, and owns startup, recovery
and shutdown.

Shutdown (SIGTERM) stops taking work (``/slack/events`` answers 503 while the listening socket
stays open), lets work in flight finish for a while, cancels what is left and hands every
lease back, so another replica (or this one, restarted) takes the work up at once.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.jobs import PeriodicJobs, crash_hook
from bot.metrics import BotMetrics
from bot.redact import Redactor
from bot.routes import Routes
from bot.settings import Settings
from bot.slack.budget import Budget, Pacer
from bot.slack.failures import Failures
from bot.slack.home_tab import REFRESH_SECONDS, HomeTab
from bot.slack.listeners import Background, SlackEdge
from bot.slack.messenger import LogMessenger, SlackMessenger, web_client
from bot.slack.modals import Modals
from bot.slack.people import SLACK_PEOPLE
from bot.slack.responder import Responder
from bot.slack.roles import Roles
from bot.store import IdleRecords, Store
from bot.sweep_process import SweepProcess, SweepSummary, shareable
from bot.vertex.auth import token_source
from bot.vertex.client import VertexClient
from bot.vertex.retry import RetryPolicy
from bot.vertex.slurm import SlurmReader
from handlers.changes.execution import LEASE
from handlers.forms import Forms
from handlers.home import Home
from handlers.idle.report import SweepReport
from handlers.intake import Intake
from handlers.policy import Policy
from handlers.services import Options, Ports, build

log = logging.getLogger(__name__)
EXPIRY_SECONDS = 15.0
GAUGE_EVERY = 5  # ticks between counts of the operations in flight when none ended
RECOVER_EVERY = 3  # ticks between looks for changes whose replica died


def secret_values(settings: Settings) -> list[str]:
    return settings.secret_values()


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
        self._ticks = 0
        self.accepting = True
        crash = crash_hook(settings.debug_crash_at)
        self.redactor = Redactor(secret_values(settings))
        self.metrics = BotMetrics()
        self.store = Store.from_url(settings.database_url)
        static = settings.vertex_static_token
        tokens = token_source(static.get_secret_value() if static is not None else None)
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
        budget = Budget()  # one Slack budget: what the messenger spends, a 429 pauses
        self.slack = web_client(bot_token or "", settings.slack_api_url, budget)
        self.messenger: SlackMessenger | LogMessenger = (
            SlackMessenger(self.slack, self.redactor, Pacer(budget))
            if bot_token
            else LogMessenger()
        )
        self.records = IdleRecords(self.store)
        self.roles = Roles(policy, self.slack)
        ports = Ports(
            requests=self.store,
            operations=self.store,
            leases=self.store,
            reports=self.store,
            records=self.records,
            control_plane=self.vertex,
            activity=SlurmReader(
                vertex=self.vertex, pinned=settings.slurm_api_version, book=self.store
            ),
            messenger=self.messenger,
            roles=self.roles,
            people=SLACK_PEOPLE,
            clock=clock,
            releases=self.store,
            submissions=self.store,
        )
        options = Options(
            owner=self.owner,
            targets=settings.targets,
            alert_channel=settings.alert_channel if bot_token else None,
            sweep_interval=settings.sweep_interval,
            concurrency=settings.vertex_concurrency,
            lease=lease,
            crash=crash,
            release_grace=settings.release_grace_seconds,
            poll_stagger=tick_seconds / 4,  # a tick's polls spread over a quarter of it
        )
        self.core = build(ports, policy, options)
        self.http: aiohttp.ClientSession | None = None
        self._lag_watch: asyncio.Task[None] | None = None
        self.background = Background()
        self.responder = Responder(self.redactor)
        home = Home(self.core.reports, self.store, policy)
        self.home_tab = HomeTab(
            client=self.slack,
            home=home,
            roles=self.roles,
            redactor=self.redactor,
            spawn=self.background.spawn,
        )
        self.bolt = self._slack_app(working_after) if bot_token else None
        self.jobs = PeriodicJobs()
        self.sweeps: SweepProcess | None = None
        if settings.sweep_process and shareable(settings.database_url):
            self.sweeps = SweepProcess(settings, policy, self.owner, self.core.sweeper.lock)
            self.core.reports.sweep_elsewhere = self._sweep_elsewhere

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
            # the listeners ack and hand over at once: Bolt need not run them in a task of
            # its own and poll for the ack every 10 ms (its default)
            process_before_response=True,
            logger=bolt_log,
        )
        extra = {} if working_after is None else {"working_after": working_after}
        failures = Failures(self.responder, self.metrics.command)
        app.error(failures.bolt)  # what a listener raises before its ack
        forms = Forms(self.core.directory, self.core.approvals.prices)
        modals = Modals(
            app=app,
            client=self.slack,
            dispatcher=self.core.dispatcher,
            forms=forms,
            background=self.background,
            responder=self.responder,
            intake=self.intake,
            failures=failures,
            home_channel=self.settings.alert_channel,
        )
        # Bolt tries listeners in the order they were added, each matcher at the cost of
        # building its arguments: the slash command, most of what arrives, is tried first.
        SlackEdge(
            app,
            self.core.dispatcher,
            self.background,
            self.responder,
            failures=failures,
            on_command=self.metrics.command,
            open_form=modals.open,
            open_form_clicked=modals.open_clicked,
            **extra,
        ).register()
        modals.register()
        self.home_tab.register(app)
        return app

    # -- lifecycle -----------------------------------------------------------------------------

    def http_session(self) -> aiohttp.ClientSession:
        """The shared session (opened on first use outside ``start``, as in tests)."""
        self.open_http()
        assert self.http is not None
        return self.http

    def open_http(self) -> None:
        """One pooled HTTP session for every call to Slack (Web API and response_url
        replies), opened in the running loop: a connection is reused, not opened per call."""
        if self.http is None or self.http.closed:
            self.http = aiohttp.ClientSession()
            self.slack.session = self.http
            self.responder.session = self.http

    async def start(self) -> None:
        self.open_http()
        await self.store.migrate()
        # A replica keeps its id across restarts: the cards it was posting when it stopped
        # will never be confirmed, and whatever it held before is free again now.
        abandoned = await self.core.approvals.abandon_own_drafts()
        if abandoned:
            log.info("ended %d requests whose cards were cut off by a stop", abandoned)
        settled = await self.intake.recover(starting=True)
        if settled:
            log.info("finished %d form submissions cut off by a stop", settled)
        await self.store.release_leases(self.owner)
        self.jobs.add("tracker", self._tick, self.tick_seconds)
        # an orphan is found only once its owner's lease ran out (15 s): looking every few
        # ticks adds little to that, and saves a query a second
        self.jobs.add("recovery", self._recover, self.tick_seconds * RECOVER_EVERY)
        self.jobs.add("heartbeat", self._heartbeat, max(0.5, self.lease / 3))
        self.jobs.add("expiry", self._expire, self.expiry_seconds)
        self.jobs.add("idle-sweep", self._scheduled_sweep, self.settings.sweep_interval)
        self.jobs.add("releases", self._releases, self.settings.release_check_seconds)
        if self.bolt is not None:
            self.jobs.add("home-tabs", self._home_tabs, REFRESH_SECONDS)
        self.jobs.start()
        self._lag_watch = asyncio.get_running_loop().create_task(self._watch_lag())
        # Everything built so far lives as long as the process: keep it out of the cycle
        # collector's passes, which otherwise walk it again and again.
        gc.freeze()
        in_flight = await self.store.count_in_flight()
        log.info("clusterbot started (%s); %d changes to follow", self.owner, in_flight)

    async def stop(self) -> None:
        """Stop taking work, let work in flight finish, and hand every lease back."""
        if self._stopped:
            return
        self._stopped = True
        self.accepting = False
        if self._lag_watch is not None:
            self._lag_watch.cancel()
        await self.jobs.stop(self.settings.drain_seconds)
        await self.core.tracker.settle(self.settings.drain_seconds)
        cancelled = await self.background.drain(self.settings.drain_seconds)
        if cancelled:
            log.info("handed back %d unfinished tasks to be recovered", cancelled)
        await self.store.release_leases(self.owner)
        await self.close_connections()
        log.info("clusterbot stopped")

    async def close_connections(self) -> None:
        """Close the HTTP sessions and the database pool (also after a failed start)."""
        await self.responder.close()
        if self.http is not None:
            await self.http.close()
        await self.vertex.aclose()
        await self.store.close()

    async def _watch_lag(self, every: float = 0.25) -> None:
        """How late a timer fires is how long other work held the loop: a measure of how
        promptly Slack's requests are acked."""
        loop = asyncio.get_running_loop()
        while not self._stopped:
            asked = loop.time()
            await asyncio.sleep(every)
            self.metrics.lag(max(0.0, loop.time() - asked - every))

    async def _tick(self) -> None:
        if not self.accepting:
            return
        tracker = self.core.tracker
        ended_before = tracker.ended
        await tracker.poll_due()
        self._ticks += 1
        # the count changes when an operation ends or a change starts one: counted after a
        # tick that ended one, and every few ticks for the rest (not after every tick that
        # polled: with many changes in flight, that is every tick)
        if tracker.ended != ended_before or self._ticks % GAUGE_EVERY == 0:
            self.metrics.operations_in_flight.set(await self.store.count_in_flight())

    async def _recover(self) -> None:
        if self.accepting:
            await self.core.executor.recover_orphans()

    async def _heartbeat(self) -> None:
        await self.store.renew_leases(self.owner, self.clock(), self.lease)

    async def _releases(self) -> None:
        if self.accepting and self.core.releases is not None:
            await self.core.releases.check_all()

    async def _home_tabs(self) -> None:
        if self.accepting:
            await self.home_tab.refresh()

    async def _expire(self) -> None:
        if self.accepting:
            await self.core.approvals.expire_due()
            await self.intake.recover()

    @property
    def intake(self) -> Intake:
        assert self.core.intake is not None  # built with the store's submissions
        return self.core.intake

    async def sweep(self, *, force: bool = False) -> SweepReport | None:
        """One idle sweep here (unless another replica has it), counted in the metrics."""
        with self.metrics.sweeping.track_inprogress():
            report = await self.core.sweeper.sweep(force=force)
        if report is not None:
            self._count_sweep(SweepSummary.of(report))
        return report

    async def _sweep_elsewhere(self, force: bool) -> bool:
        """One idle sweep in a child process; whether it swept."""
        assert self.sweeps is not None
        with self.metrics.sweeping.track_inprogress():
            summary = await self.sweeps.sweep(force=force)
        if summary is not None:
            self._count_sweep(summary)
        return summary is not None

    def _count_sweep(self, summary: SweepSummary) -> None:
        self.metrics.idle_clusters.set(summary.idle)
        self.metrics.idle_cost.set(summary.idle_cost)
        self.metrics.sweep_seconds.observe(summary.seconds)
        self.metrics.unreadable_targets.set(len(summary.unreadable))
        for target in summary.unreadable:
            self.metrics.target_failures.labels(target=target).inc()
        if summary.unreadable:
            log.warning(
                "idle sweep: %d of %d targets could not be read (%s); %d clusters, %d alerts",
                len(summary.unreadable),
                summary.targets,
                ", ".join(sorted(summary.unreadable)),
                summary.clusters,
                summary.alerts,
            )
            return
        log.info(
            "idle sweep: %d clusters, %d alerts, %.1f s",
            summary.clusters,
            summary.alerts,
            summary.seconds,
        )

    async def reach_problem(self) -> str | None:
        """Whether no target has been readable for a whole sweep interval, in words."""
        reach = await self.core.sweeper.reach()
        if reach is None:
            return None
        return reach.problem(self.clock(), self.settings.sweep_interval)

    async def _scheduled_sweep(self) -> None:
        if not self.accepting:
            return
        if self.sweeps is not None:
            await self._sweep_elsewhere(False)
        else:
            await self.sweep()

    async def _lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.stop()

    def install(
        self, app: web.Application, path: str = "/slack/events", *, lifecycle: bool = True
    ) -> None:
        """Add the service's routes to ``app`` (``bot.routes``); with ``lifecycle``, start and
        stop it with the app (``serve`` drives start and stop itself, to drain first)."""
        Routes(self).install(app, path)
        if lifecycle:
            app.cleanup_ctx.append(self._lifecycle)
