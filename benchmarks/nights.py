"""A fleet's night: 1,000 clusters on one off-hours schedule, through `clusterbot serve`.

The simulator holds 1,000 clusters in one project and region, each with a GPU pool at 2
nodes, and refuses changes past a request quota of ``QUOTA`` a minute (as Vertex AI does,
``bot/sandbox/controlplane/quota.py``); every call is ``LATENCY_MS`` slow and a resize runs
``UPDATE_SECONDS``. The Slack stand-in enforces Slack's tiers. The 1,000 schedules are stored
as approved ones are (each with its card in the channel, whose thread tells its nights), all
going off at the same minute and on again ``ON_AFTER`` later, and serve is told the quota
(``CLUSTERBOT_VERTEX_WRITES_PER_MINUTE``).

It counts before it reports: every pool at zero and back at 2 in the simulator, exactly one
PATCH per cluster each way, no change refused for the quota, and the channel's messages (in
the channel itself: the roll-ups; and in the schedules' threads) and 429s at the stand-in.
The bound is what the quota allows: the last of N changes can go
``ceil(N / QUOTA) - 1`` minutes after the first, and its resize then runs ``UPDATE_SECONDS``;
a night's first look comes at most one schedule check after its time.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cost import fresh_postgres
from benchmarks.harness import (
    Results,
    call,
    heading,
    processes,
    python,
    serve_env,
    slack_and_sink,
    wait_ready,
)
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from bot.store import Store
from handlers.schedules.model import Phase, Schedule, ScheduleState
from handlers.schedules.times import Weekly
from tests.support.ports import free_port
from tests.support.postgres import postgres_available

CLUSTERS = 1_000
QUOTA = 600  # changes a minute per project and region: Vertex AI's default request quota
LATENCY_MS = 50
UPDATE_SECONDS = 30
CHECK_SECONDS = 30  # serve's default look at the schedules
ON_AFTER = 5  # minutes from off to on
CHANNEL = "C0MLINFRA"
TIERS = {"chat.update": 50, "chat.postMessage": 60, "chat.postEphemeral": 100}
DAILY = frozenset(range(7))


def bound(clusters: int) -> float:
    """Seconds from a night's time until its last pool can have reached its size."""
    return (math.ceil(clusters / QUOTA) - 1) * 60 + UPDATE_SECONDS + CHECK_SECONDS


async def schedule_cards(session: aiohttp.ClientSession, box: str, names: list[str]) -> list[str]:
    """Each schedule's card, as its approval left it in the channel (posted before Slack's
    tiers are set): the thread where its nights are told."""
    token = call(f"{box}/sandbox/api/config")["bot_token"]
    headers = {"Authorization": f"Bearer {token}"}
    cards = []
    for name in names:
        text = f"Schedule request: {name}, approved"
        async with session.post(
            f"{box}/api/chat.postMessage", json={"channel": CHANNEL, "text": text}, headers=headers
        ) as reply:
            cards.append(str((await reply.json())["ts"]))
    return cards


async def store_schedules(database: str, names: list[str], cards: list[str], off_at: float) -> None:
    """Each cluster's schedule, in force as its approval leaves it: off at ``off_at``'s
    minute every day (UTC), on ``ON_AFTER`` minutes later, its card's thread its own."""
    off = time.gmtime(off_at)
    on = time.gmtime(off_at + ON_AFTER * 60)
    store = Store.from_url(database)
    await store.migrate()
    for index, name in enumerate(names):
        await store.add_schedule(
            Schedule(
                id=f"sch-{index:04d}",
                cluster=name,
                pool=None,
                off=Weekly(DAILY, off.tm_hour, off.tm_min),
                on=Weekly(DAILY, on.tm_hour, on.tm_min),
                zone="UTC",
                requested_by="U0ALICE",
                channel=CHANNEL,
                created_at=time.time(),
                request_id=f"r-{index}",
                thread=cards[index],
                state=ScheduleState.ACTIVE,
                approved_by="policy",
                next_off=off_at,
            )
        )
    await store.close()


async def sizes(session: aiohttp.ClientSession, vertex: str) -> Counter[int]:
    """How many clusters have their GPU pool at each size (min = max)."""
    async with session.get(f"{vertex}/_sim/clusters") as reply:
        clusters: dict[str, Any] = await reply.json()
    counted: Counter[int] = Counter()
    for cluster in clusters.values():
        for pool in cluster.get("nodePools", []):
            if pool["id"] == "gpu":
                scaling = pool.get("scalingSpec") or {}
                counted[int(scaling.get("maxNodeCount") or 0)] += 1
    return counted


async def until_all(
    session: aiohttp.ClientSession,
    vertex: str,
    store: Store,
    night: tuple[int, Phase],
    since: float,
    limit: float,
) -> float:
    """Seconds from ``since`` until every GPU pool is at the night's size in the simulator
    and every schedule in its phase (its change succeeded and the schedule knows it)."""
    size, phase = night
    while True:
        counted = await sizes(session, vertex)
        phases = Counter(s.phase for s in await store.schedules())
        if counted[size] == CLUSTERS and phases[phase] == CLUSTERS:
            return time.time() - since
        if time.time() - since > limit:
            raise RuntimeError(f"after {limit:.0f} s: pools {counted}, schedules {phases}")
        await asyncio.sleep(1.0)


async def run(results: Results) -> None:
    heading(
        f"a fleet's night: {CLUSTERS:,} clusters on one schedule, a quota of {QUOTA} changes "
        f"a minute, {LATENCY_MS} ms a call, resizes of {UPDATE_SECONDS} s, Slack's tiers"
    )
    targets, fixtures = fleet(1, CLUSTERS)
    names = [str(c["name"]) for c in fixtures["clusters"]]
    if await postgres_available():  # what a fleet's replicas share
        database, kind = await fresh_postgres("clusterbot_bench_nights"), "PostgreSQL"
    else:
        folder = Path(tempfile.mkdtemp(prefix="clusterbot-nights-bench-"))
        database, kind = f"sqlite+aiosqlite:///{folder / 'bench.db'}", "SQLite"
    print(f"  on {kind}", flush=True)
    box_port, sink_port, serve_port = free_port(), free_port(), free_port()
    extra = ("--update-seconds", str(UPDATE_SECONDS))
    with (
        simulator_process(fixtures, extra=extra) as (vertex, _pid),
        slack_and_sink(box_port, sink_port) as (box, _sink),
    ):
        async with aiohttp.ClientSession() as session:
            cards = await schedule_cards(session, box, names)
        call(f"{vertex}/_sim/quota", {"writes_per_minute": QUOTA})
        call(f"{vertex}/_sim/faults", {"latency_ms": LATENCY_MS})
        call(f"{box}/sandbox/api/config", {"rate_limits": TIERS})
        # off at the next minute that leaves serve time to start: the calendar's minute
        off_at = (int(time.time() + 75) // 60 + 1) * 60.0
        await store_schedules(database, names, cards, off_at)
        env = serve_env(
            box,
            vertex=vertex,
            targets=targets,
            database=database,
            PORT=str(serve_port),
            CLUSTERBOT_REPLICA_ID="bench",
            CLUSTERBOT_ALERT_CHANNEL=CHANNEL,
            CLUSTERBOT_VERTEX_WRITES_PER_MINUTE=str(QUOTA),
            CLUSTERBOT_SCHEDULE_CHECK_SECONDS=str(CHECK_SECONDS),
        )
        with processes((python("-m", "bot", "serve"), env)) as (serve,):
            wait_ready(f"http://127.0.0.1:{serve_port}/healthz", serve)
            store = Store.from_url(database)
            limit = ON_AFTER * 60 - 10  # asleep before the on, or the wake is tomorrow's
            try:
                async with aiohttp.ClientSession() as session:
                    await asyncio.sleep(max(0.0, off_at - time.time()))
                    asleep = await until_all(
                        session, vertex, store, (0, Phase.ASLEEP), off_at, limit
                    )
                    on_at = off_at + ON_AFTER * 60
                    await asyncio.sleep(max(0.0, on_at - time.time()))
                    awake = await until_all(session, vertex, store, (2, Phase.AWAKE), on_at, limit)
                    await report(results, session, vertex, box, asleep, awake, off_at)
            finally:
                await store.close()


async def report(
    results: Results,
    session: aiohttp.ClientSession,
    vertex: str,
    box: str,
    asleep: float,
    awake: float,
    off_at: float,
) -> None:
    async with session.get(f"{vertex}/_sim/requests?method=PATCH") as reply:
        patches = (await reply.json())["requests"]
    per_cluster = Counter(p["path"].rsplit("/", 1)[-1] for p in patches)
    refused = call(f"{vertex}/_sim/quota")["refused"]
    if len(per_cluster) != CLUSTERS or set(per_cluster.values()) != {2} or refused:
        raise RuntimeError(
            f"{len(patches)} PATCHes over {len(per_cluster)} clusters, "
            f"{refused} refused for the quota: not one each way"
        )
    slack = call(f"{box}/sandbox/api/config")
    async with session.get(f"{box}/sandbox/api/messages?channel={CHANNEL}") as reply:
        messages = (await reply.json())["messages"]
    since = [m for m in messages if float(m["ts"]) >= off_at - 60]
    times = sorted(float(m["ts"]) for m in since)
    busiest = max((sum(1 for t in times if s <= t < s + 60) for s in times), default=0)
    top = [m for m in since if not m.get("thread_ts")]
    rollups = sum(1 for m in top if str(m.get("text", "")).startswith("Schedules: "))
    limit = bound(CLUSTERS)
    add = results.add
    add("nights", "all asleep after the off time", asleep, "s", note=f"bound {limit:.0f} s")
    add("nights", "asleep: time / the quota's bound", asleep / limit, "x", at_most=1.3)
    add("nights", "all awake after the on time", awake, "s", note=f"bound {limit:.0f} s")
    add("nights", "awake: time / the quota's bound", awake / limit, "x", at_most=1.3)
    add("nights", "PATCHes, one per cluster each way", len(patches), "")
    add("nights", "changes refused for the quota", refused, "", at_most=0)
    add("nights", "messages posted, threads included", len(times), "")
    add("nights", "messages in the channel itself", len(top), "", note=f"{rollups} roll-ups")
    add("nights", "most messages in one minute", busiest, "", at_most=60)
    add("nights", "Slack 429s", slack["ratelimited"], "", at_most=0)
