"""``/cluster cost since 90d`` and the weekly digest over 1,000 clusters x 90 days of ledger,
against the raw SQL sum over the same rows, on SQLite and on PostgreSQL.

The ledger is what 90 days of sweeps leave of a fleet where half the clusters sleep on an
off-hours schedule: each GPU pool's runs day and night, each login pool's a week at a time,
and every night's off and on as a succeeded request (the savings). The service is the real
one, built on the database; its spend report and digest are called as the command (asked in
a channel, so with its chart's series) and the digest job call them (charts are drawn and
posted elsewhere).

Each round, interleaved: the raw sum of the report's period, the report, the raw sum of the
digest's fortnight, the digest, and the savings read as every report read them before they
were kept as rows (every succeeded request's plan). A figure counts only when the report's
total agrees with the raw sum. On PostgreSQL the tables are vacuumed and analysed once the
ledger is written, as its autovacuum does within a minute of such a load; what the service
built is kept out of the cycle collector's passes, as its start does. Peak memory is
Python's own allocation (``tracemalloc``) during one report and one digest, measured in a pass
of its own.

Then ``clusterbot serve`` runs on the same database and is sent ``/cluster help`` at 20 a
second while the report is asked in the channel again and again (drawn and shared, as people
get it), in blocks interleaved with a bare Bolt app at the same rate, with the reports still
asked of serve and with none: the ack p99 of the commands sent meanwhile."""

from __future__ import annotations

import asyncio
import gc
import re
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import sqlalchemy as sa
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import create_async_engine

from benchmarks.ack import command_body
from benchmarks.harness import (
    Results,
    call,
    heading,
    percentile,
    serve_and_bare,
    serve_env,
    slack_and_sink,
)
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from benchmarks.scale import open_loop
from bot.app import ClusterbotService
from bot.sandbox.slack.delivery import signed_headers
from bot.settings import Settings
from bot.store import Store, schema
from bot.store.store import _request_row
from handlers.costs import money
from handlers.domain.names import Target
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.policy import Policy
from handlers.replies import Reply, Text, plain
from handlers.spend.asked import Cost
from handlers.spend.runs import SpendRun
from handlers.spend.savings import savings
from tests.support.ports import free_port
from tests.support.postgres import postgres_available
from tests.test_spend import succeeded

CLUSTERS = 1_000
DAYS = 90
DAY = 86400.0
ROUNDS = 3
ACK_RATE = 20.0  # /cluster help a second while reports run
ACK_BLOCK = 8.0  # seconds a block, serve (reports running) and the bare app in turn
ACK_BLOCKS = 6
GPU_HOUR, LOGIN_HOUR = 88.0, 0.4
POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432"
BENCH_DB = "clusterbot_bench_cost"
TARGET = Target("bench-project-0", "us-central1")


def cluster_name(n: int) -> str:
    return f"{TARGET.parent}/modelDevelopmentClusters/c{n:04d}"


def night(request_id: str, before: float, after: float, at: float, cluster: str) -> Any:
    """A scheduled night's change, succeeded, as the store keeps it."""
    return succeeded(request_id, Origin.SCHEDULE, before, after, at, cluster)


def ledger(now: float) -> tuple[list[SpendRun], list[ApprovalRequest]]:
    """The runs and the nights' requests of DAYS days up to ``now`` (a UTC midnight)."""
    start = now - DAYS * DAY
    runs: list[SpendRun] = []
    nights: list[ApprovalRequest] = []
    for n in range(CLUSTERS):
        name, scheduled = cluster_name(n), n % 2 == 0
        labels = (("team", f"team-{n % 8}"),)
        for day in range(DAYS):
            morning, evening = start + day * DAY + 8 * 3600, start + day * DAY + 20 * 3600
            pieces = [(start + day * DAY, morning, 2), (morning, evening, 8)]
            pieces.append((evening, start + (day + 1) * DAY, 0 if scheduled else 2))
            for began, ended, nodes in pieces:
                if nodes:
                    run = SpendRun(name, "gpu", began, ended, nodes, GPU_HOUR, nodes == 2,
                                   TARGET.parent, labels)  # fmt: skip
                    runs.append(run)
            if scheduled:
                nights.append(night(f"off-{n}-{day}", 2 * GPU_HOUR, 0.0, evening, name))
                nights.append(night(f"on-{n}-{day}", 0.0, 2 * GPU_HOUR, morning + DAY, name))
        for week in range(0, DAYS, 7):
            began = start + week * DAY
            ended = min(began + 7 * DAY, now)
            runs.append(SpendRun(name, "login", began, ended, 1, LOGIN_HOUR, False, TARGET.parent,
                                 labels))  # fmt: skip
    return runs, nights


async def seed(store: Store, now: float) -> tuple[int, int]:
    runs, nights = ledger(now)
    runs.sort(key=lambda run: (run.end, run.cluster))  # as sweeps close them, in time
    for at in range(0, len(runs), 5000):
        await store.record_spend(runs[at : at + 5000])
    async with store.engine.begin() as connection:
        for at in range(0, len(nights), 5000):
            rows = [_request_row(r) for r in nights[at : at + 5000]]
            await connection.execute(schema.requests.insert(), rows)
    return len(runs), len(nights)


async def raw_sum(store: Store, since: float, until: float) -> float:
    """What the ledger's rows of [since, until) cost, summed by the database alone."""
    t = schema.spend_runs
    start = sa.case((t.c.start > since, t.c.start), else_=since)
    end = sa.case((t.c.end < until, t.c.end), else_=until)
    query = sa.select(sa.func.sum(t.c.nodes * t.c.node_hour * (end - start) / 3600.0)).where(
        t.c.end > since, t.c.start < until, t.c.node_hour.is_not(None)
    )
    async with store.engine.connect() as connection:
        return float(await connection.scalar(query) or 0.0)


async def settled(store: Store) -> None:
    """PostgreSQL's tables as its autovacuum keeps them: the rows the seeding replaced
    (roll-ups summed again batch after batch) swept, and the planner's statistics taken."""
    if store.engine.dialect.name != "postgresql":
        return
    async with store.engine.connect() as connection:
        connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(sa.text("VACUUM ANALYZE"))


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await work()
    return time.perf_counter() - started, result


async def peak_mb(work: Callable[[], Awaitable[Any]]) -> float:
    tracemalloc.start()
    try:
        await work()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


async def fresh_postgres(name: str = BENCH_DB) -> str:
    """An empty database ``name`` on the local PostgreSQL: its URL."""
    admin = create_async_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT")
    async with admin.connect() as connection:
        await connection.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        await connection.execute(sa.text(f"CREATE DATABASE {name}"))
    await admin.dispose()
    return f"{POSTGRES}/{name}"


async def one(results: Results, database: str, url: str) -> None:
    settings = Settings(
        targets=[TARGET],
        vertex_api_url="http://127.0.0.1:9",  # nothing here calls the control plane
        vertex_static_token=SecretStr("bench"),
        database_url=url,
        alert_channel="C0BENCH",  # the digest is built where there is a channel for it
        slack_bot_token=SecretStr("xoxb-bench"),  # nothing is posted: the digest is built
        slack_signing_secret=SecretStr("bench"),
        report_process=False,  # the report's own work, as its process does it, timed here
    )
    service = ClusterbotService(settings, Policy())
    try:
        await service.store.migrate()
        now = time.time() // DAY * DAY
        runs, nights = await seed(service.store, now)
        report = service.core.capabilities["spend"]
        digest = service.core.capabilities["digest"]
        since = now - DAYS * DAY
        # the report and the digest read the clock: the seeded ledger ends at this midnight
        report.clock = digest.clock = lambda: now
        # asked in a channel, as people ask: the chart's series are summed too (nothing is
        # posted or drawn: the picture is drawn off the event loop, elsewhere)
        report.messenger = None

        async def command() -> Reply:
            reply: Reply = await report.cost(Cost(since=DAYS * DAY), "C0BENCH")
            return reply

        first, _ = await timed(command)  # keeps the rows
        await settled(service.store)
        # the digest's week is the database's sum of the same rows, and so is the week before
        reply, week, _chart = await digest.build(now)
        summed = money(await raw_sum(service.store, now - 7 * DAY, now), per_hour=False)
        assert money(week.cost, per_hour=False) == summed, (week.cost, summed)
        before = money(await raw_sum(service.store, now - 14 * DAY, now - 7 * DAY), per_hour=False)
        text = " ".join(plain(part.spans) for part in reply.parts if isinstance(part, Text))
        assert f"last week's {before}" in text, (text, before)
        # what the service built lives as long as it: its start keeps that out of the cycle
        # collector's passes (bot/app.py), and so does this one
        gc.collect()
        gc.freeze()
        took: dict[str, list[float]] = {}
        for _ in range(ROUNDS):
            for name, work in (
                ("raw sum, 90 days", lambda: raw_sum(service.store, since, now)),
                ("cost since 90d", command),
                ("raw sum, 14 days", lambda: raw_sum(service.store, now - 14 * DAY, now)),
                ("digest", lambda: digest.build(now)),
                ("savings read from every request (before)", lambda: every_request(service)),
            ):
                seconds, result = await timed(work)
                took.setdefault(name, []).append(seconds)
                if name == "raw sum, 90 days":
                    raw = result
                if name == "cost since 90d":  # the report's total is the database's sum
                    said = money(raw, per_hour=False)
                    assert result.summary.endswith(f": {said}"), (result.summary, said)
        memory_report = await peak_mb(command)
        memory_digest = await peak_mb(lambda: digest.build(now))
    finally:
        gc.unfreeze()
        await service.close_connections()
    median = {name: statistics.median(values) for name, values in took.items()}
    topic = f"{database}, {runs:,} runs, {nights:,} succeeded nights"
    results.add("cost", f"{topic}: first report after the upgrade (keeps the rows)", first, "s")
    for name, seconds in median.items():
        results.add("cost", f"{topic}: {name} (median)", seconds, "s")
    ratio = median["cost since 90d"] / median["raw sum, 90 days"]
    results.add("cost", f"{topic}: cost since 90d / raw sum", ratio, "x", at_most=2.0)
    ratio = median["digest"] / median["raw sum, 14 days"]
    results.add("cost", f"{topic}: digest / raw sum of its fortnight", ratio, "x", at_most=2.0)
    results.add("cost", f"{topic}: cost since 90d, peak memory", memory_report, "MB", at_most=250)
    results.add("cost", f"{topic}: digest, peak memory", memory_digest, "MB", at_most=250)


async def reports_asked(
    session: aiohttp.ClientSession, url: str, secret: str, sink: str, stop: asyncio.Event
) -> int:
    """``/cluster cost since 90d`` in the channel, one after another until ``stop``: each the
    next once the last one's reply has arrived at its response URL with the report's total.
    How many were answered."""
    answered = 0
    while not stop.is_set():
        name = f"k_{uuid.uuid4().hex}"
        body = command_body("cost since 90d", f"{sink}/r/{name}")
        headers = signed_headers(secret, body, "application/x-www-form-urlencoded")
        async with session.post(url, data=body, headers=headers) as reply:
            assert reply.status == 200, reply.status
        deadline = time.monotonic() + 120
        while True:  # a slow report is first "Working on it…", then replaced by the report
            async with session.get(f"{sink}/kept/{name}") as kept:
                text = await kept.text()
            if re.search(r"cost of all clusters, last 90d: ~?\$[0-9]", text):
                break
            assert time.monotonic() < deadline, f"no report in 2 minutes: {text[:300]}"
            await asyncio.sleep(0.05)
        answered += 1
    return answered


async def acks_meanwhile(results: Results, database: str, url: str) -> None:
    """``/cluster help`` at ``ACK_RATE`` a second to ``clusterbot serve`` on the seeded
    ledger while the cost report is asked of it again and again (``reports_asked``), and to
    the bare Bolt app at the same rate, in interleaved blocks: serve's, the bare app's with
    the reports still asked of serve (the machine as loaded: the goal's comparison, as the
    scale benchmark's bare blocks run beside serve's sweeps), and the bare app's with none;
    after a round of the three that warms up and is not counted."""
    targets, fixtures = fleet(1, 10)
    box_port, sink_port, serve_port, bare_port = (free_port() for _ in range(4))
    with (
        simulator_process(fixtures) as (vertex, _pid),
        slack_and_sink(box_port, sink_port) as (box, sink),
    ):
        secret = call(f"{box}/sandbox/api/config")["signing_secret"]
        env = serve_env(box, vertex=vertex, targets=targets, database=url)
        timings: dict[str, list[float]] = {"serve": [], "beside": [], "quiet": []}
        answered = 0
        with serve_and_bare(env, serve_port, bare_port):
            serve_url = f"http://127.0.0.1:{serve_port}/slack/events"
            bare_url = f"http://127.0.0.1:{bare_port}/slack/events"
            async with aiohttp.ClientSession() as session:

                def blocks(url: str) -> Awaitable[list[float]]:
                    return open_loop(session, url, secret, sink, ACK_BLOCK, ACK_RATE)

                # a round first whose figures are not kept: serve's start (its first hourly
                # settling of the ledger) and the reports' process starting
                for kept in [False] + [True] * ACK_BLOCKS:
                    stop = asyncio.Event()
                    asked = asyncio.ensure_future(
                        reports_asked(session, serve_url, secret, sink, stop)
                    )
                    found = [await blocks(serve_url), await blocks(bare_url)]
                    stop.set()
                    made = await asked
                    answered += made if kept else 0
                    found.append(await blocks(bare_url))
                    for who, acks in zip(timings, found, strict=True):
                        timings[who] += acks if kept else []
    topic = f"{database}, /cluster help at {ACK_RATE:g}/s"
    assert answered >= ACK_BLOCKS, f"only {answered} reports were answered"
    results.add("cost", f"{topic}: cost reports answered meanwhile", answered, "")
    serve, beside, quiet = (percentile(timings[who], 0.99) for who in timings)
    results.add("cost", f"{topic}: serve p99 ack while reports run", serve * 1000, "ms")
    results.add("cost", f"{topic}: bare Bolt p99 ack, reports run beside", beside * 1000, "ms")
    results.add("cost", f"{topic}: bare Bolt p99 ack, nothing beside", quiet * 1000, "ms")
    results.add("cost", f"{topic}: p99 serve while reports run / bare, nothing beside",
                serve / quiet, "x")  # fmt: skip
    ratio = serve / beside  # held to the goal of acks while a sweep runs
    results.add("cost", f"{topic}: p99 serve while reports run / bare beside", ratio, "x",
                at_most=1.5)  # fmt: skip


async def every_request(service: ClusterbotService) -> int:
    requests = await service.store.requests_in([str(RequestState.SUCCEEDED)])
    return len(savings(requests))


async def run(results: Results) -> None:
    heading(
        f"/cluster cost since 90d and the digest over {CLUSTERS:,} clusters x {DAYS} days, "
        "against the raw SQL sum of the same rows"
    )
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'cost.db'}"
        await one(results, "SQLite", url)
        await acks_meanwhile(results, "SQLite", url)
    if await postgres_available():
        url = await fresh_postgres()
        await one(results, "PostgreSQL", url)
        await acks_meanwhile(results, "PostgreSQL", url)
