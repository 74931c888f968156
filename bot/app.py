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
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from bot.jobs import PeriodicJobs, crash_hook
from bot.metrics import BotMetrics
from bot.platform import chat_platform
from bot.provision import provisions
from bot.redact import Redactor
from bot.report_process import ReportProcess
from bot.routes import Readiness, Routes
from bot.settings import Settings
from bot.store import IdleRecords, Store, StoreKeeper
from bot.sweep_process import SweepProcess, SweepSummary, shareable
from bot.vertex.auth import token_source
from bot.vertex.client import VertexClient
from bot.vertex.monitoring import GpuMetrics
from bot.vertex.retry import RetryPolicy
from bot.vertex.slurm import SWEEP_DEADLINE, SlurmReader
from handlers.capability import Options, Ports
from handlers.changes.capability import RELEASES
from handlers.home import Home
from handlers.intake import Intake
from handlers.owed.engine import LEASE
from handlers.policy import Policy
from handlers.services import build
from handlers.spend.asked import LEDGER_KEEPS
from handlers.sweep.report import SweepReport

log = logging.getLogger(__name__)
EXPIRY_SECONDS = 15.0
GAUGE_EVERY = 5  # ticks between counts of the operations in flight when none ended
HOUSEKEEPING = 3600.0  # seconds between sweeps of what is done and old
OWED_KEPT = 7 * 24 * 3600.0  # an owed item ended this long ago is forgotten
SETTLED = 2 * 24 * 3600.0  # the ledger and savings of this long ago on are settled hourly


def send_windows(settings: Settings) -> tuple[float, float]:
    """How long a change, and a Slurm node update (through the proxy, whose deadline is
    shorter), sent now may still be applied: the client's retry deadline, the last try's own
    timeout (the server's too: ``X-Server-Timeout``), and a margin for clocks."""
    last = settings.vertex_request_timeout + 10.0
    return settings.vertex_retry_deadline + last, SWEEP_DEADLINE + last


class ClusterbotService:
    """Builds the adapters, the core on them, and the chat platform's adapter on the core;
    owns the lifecycle and the periodic jobs."""

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
        crash = crash_hook(
            settings.debug_crash_at, settings.debug_pause_at, settings.debug_pause_file
        )
        self.redactor = Redactor(settings.secret_values())
        self.metrics = BotMetrics()
        self.store = Store.from_url(settings.database_url)
        static = settings.vertex_static_token
        tokens = token_source(static.get_secret_value() if static is not None else None)
        self.vertex = VertexClient(
            tokens,
            base_url=settings.vertex_api_url,
            concurrency=settings.vertex_concurrency,
            retry=RetryPolicy(deadline=settings.vertex_retry_deadline),
            request_timeout=settings.vertex_request_timeout,
            observer=self.metrics.call,
        )
        self.chat = chat_platform(settings, policy, self.redactor)
        self.records = IdleRecords(self.store)
        slurm = SlurmReader(vertex=self.vertex, pinned=settings.slurm_api_version, book=self.store)
        ports = Ports(
            requests=self.store,
            operations=self.store,
            leases=self.store,
            reports=self.store,
            records=self.records,
            keeper=StoreKeeper(self.store),
            control_plane=self.vertex,
            activity=slurm,
            nodes=slurm,
            gpus=GpuMetrics(self.vertex, settings.monitoring_api_url, book=self.store),
            messenger=self.chat.messenger,
            roles=self.chat.roles,
            people=self.chat.people,
            clock=clock,
            owed=self.store,
            submissions=self.store,
            # the capabilities' ports: the store gives each whose Protocol it meets
            provided=provisions(self.store, settings.digest_cron, settings.digest_timezone),
        )
        change_window, node_window = send_windows(settings)
        options = Options(
            owner=self.owner,
            targets=settings.targets,
            alert_channel=self.chat.alert_channel,
            sweep_interval=settings.sweep_interval,
            concurrency=settings.vertex_concurrency,
            writes_per_minute=settings.vertex_writes_per_minute,
            lease=lease,
            crash=crash,
            release_grace=settings.release_grace_seconds,
            # a tick's polls over 3/4 of it: packed in 1/4, they kept the loop half busy then
            poll_stagger=tick_seconds * 3 / 4,
            send_window=change_window,
            node_window=node_window,
            post_window=settings.slack_timeout + 5.0,
            # a tick returns before the next is due (one running skips it): spread and this
            patience=tick_seconds / 5,
            checks={
                "releases": settings.release_check_seconds,
                "schedules": settings.schedule_check_seconds,
            },
        )
        self.core = build(ports, policy, options)
        self.http: aiohttp.ClientSession | None = None
        self._lag_watch: asyncio.Task[None] | None = None
        home = Home(self.core.reports, self.store, policy, self.core.home)
        self.chat.attach(self.core, home, self.metrics.command, working_after=working_after)
        self.jobs = PeriodicJobs()
        self.sweeps: SweepProcess | None = None
        self.reports: ReportProcess | None = None
        shared = shareable(settings.database_url)  # another process can open the database
        if settings.sweep_process and shared:
            lock, free = self.core.sweeper.lock, self.store.free_lease
            self.sweeps = SweepProcess(settings, policy, self.owner, lock=lock, free=free)
            self.core.reports.sweep_elsewhere = self._sweep_elsewhere
        # the report's child reads the wall clock: a service on another makes its reports here
        spend = self.core.capabilities.get("spend")
        if settings.report_process and shared and clock is time.time and spend is not None:
            self.reports = spend.elsewhere = ReportProcess(settings, policy)

    # -- lifecycle -----------------------------------------------------------------------------

    def http_session(self) -> aiohttp.ClientSession:
        """The shared session (opened on first use outside ``start``, as in tests)."""
        self.open_http()
        assert self.http is not None
        return self.http

    def open_http(self) -> None:
        """One pooled session for every call to Slack, opened in the running loop."""
        if self.http is None or self.http.closed:
            self.http = aiohttp.ClientSession()
            self.chat.use(self.http)

    async def start(self) -> None:
        self.open_http()
        await self.store.migrate()
        # A replica keeps its id across restarts: its drafts with no card owed (an older
        # release's) are ended, and whatever it held before is free again now.
        abandoned = await self.core.approvals.abandon_own_drafts()
        if abandoned:
            log.info("ended %d requests whose cards were cut off by a stop", abandoned)
        settled = await self.intake.recover(starting=True)
        if settled:
            log.info("finished %d form submissions cut off by a stop", settled)
        await self.store.release_leases(self.owner)
        # what is owed and free (a change's poll among it): due now, left by a replica that
        # died, or due again
        self.jobs.add("owed", self._owed, self.tick_seconds)
        self.jobs.add("heartbeat", self._heartbeat, max(0.5, self.lease / 3))
        self.jobs.add("expiry", self._expire, self.expiry_seconds)
        self.jobs.add("housekeeping", self._housekeeping, HOUSEKEEPING)
        self.jobs.add("idle-sweep", self._scheduled_sweep, self.settings.sweep_interval)
        for job in self.core.jobs:  # every capability's periodic work
            self.jobs.add(job.name, self._while_accepting(job.run), job.seconds)
        self.chat.schedule(self.jobs, self.is_accepting)
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
        # people's work in flight first: it may still owe (a card) to the engine
        cancelled = await self.chat.drain(self.settings.drain_seconds)
        if cancelled:
            log.info("handed back %d unfinished tasks to be recovered", cancelled)
        handed = await self.core.engine.stop(self.settings.drain_seconds)
        if handed:
            log.info("handed back %d owed items to be taken up at once", handed)
        await self.store.release_leases(self.owner)
        await self.close_connections()
        log.info("clusterbot stopped")

    async def close_connections(self) -> None:
        """Close the HTTP sessions and the database pool (also after a failed start)."""
        await self.chat.close()
        if self.http is not None:
            await self.http.close()
        await self.vertex.aclose()
        if self.reports is not None:
            await self.reports.close()
        await self.store.close()

    async def _watch_lag(self, every: float = 0.25) -> None:
        """How late a timer fires: how long other work held the loop (and the acks)."""
        loop = asyncio.get_running_loop()
        while not self._stopped:
            asked = loop.time()
            await asyncio.sleep(every)
            self.metrics.lag(max(0.0, loop.time() - asked - every))

    async def _owed(self) -> None:
        if not self.accepting:
            return
        tracker = self.core.tracker
        ended_before = tracker.ended
        await self.core.engine.run_due()
        self._ticks += 1
        # the count changes when an operation ends or a change starts one: counted after a
        # tick that ended one, and every few ticks for the rest (not after every tick that
        # polled: with many changes in flight, that is every tick)
        if tracker.ended != ended_before or self._ticks % GAUGE_EVERY == 0:
            self.metrics.operations_in_flight.set(await self.store.count_in_flight())

    async def _heartbeat(self) -> None:
        """Renew the leases of the work running here, and only that: what died here lapses,
        and any replica takes it up."""
        await self.core.engine.renew()
        await self.store.renew_leases(self.owner, self.clock(), self.lease)

    def _while_accepting(
        self, run: Callable[[], Awaitable[object]]
    ) -> Callable[[], Awaitable[None]]:
        """A capability's job, run only while this replica takes work (not while draining)."""

        async def job() -> None:
            if self.accepting:
                await run()

        return job

    async def _housekeeping(self) -> None:
        """What is done and old goes: owed items ended a week ago, and ledger runs older than
        a report reads; the last two days' ledger and savings are settled."""
        now = self.clock()
        await self.store.forget_owed(now - OWED_KEPT)
        await self.store.forget_spend(now - LEDGER_KEEPS)
        # what a replica of an earlier release wrote without its roll-ups, mended
        await self.store.settle_spend(now - SETTLED)
        await self.store.settle_savings(now - SETTLED)

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
        self.metrics.unhealthy_nodes.clear()  # a node back in service leaves no series
        for cluster, what, count in summary.unhealthy:
            self.metrics.unhealthy_nodes.labels(cluster=cluster, reason=what).set(count)
        for change, count in summary.episodes.items():
            self.metrics.health_episodes.labels(change=change).inc(count)
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

    def is_accepting(self) -> bool:
        return self.accepting

    async def _lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        await self.start()
        yield
        await self.stop()

    def install(
        self, app: web.Application, path: str = "/slack/events", *, lifecycle: bool = True
    ) -> None:
        """Add the service's routes to ``app``: its own (``bot/routes.py``), the chat
        platform's request URL at ``path``, and with an OIDC audience the pipeline hook; with
        ``lifecycle``, start and stop it with the app (``serve`` drives start and stop itself,
        to drain first)."""
        accepting = self.is_accepting
        readiness = Readiness(
            database=self.store.ping,
            scheduler=lambda: self.jobs.scheduler.running,
            accepting=accepting,
            credentials=self.vertex.check_credentials,
            targets=self.reach_problem,
        )
        Routes(readiness, self.metrics.handler()).install(app)
        self.chat.install(app, path, accepting, self.metrics.ack_seconds.observe)
        settings = self.settings
        releases = self.core.of(RELEASES)
        if settings.oidc_audience and releases is not None:
            from bot.release_api import ReleaseApi

            hook = ReleaseApi(
                releases,
                accepting,
                self.http_session,
                audience=settings.oidc_audience,
                certs_url=settings.oidc_certs_url,
            )
            app.router.add_post("/api/v1/release", hook.handle)
        if lifecycle:
            app.cleanup_ctx.append(self._lifecycle)
