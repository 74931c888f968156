"""`clusterbot serve` under real load: 1,000 operations in flight, 10,000 clusters to sweep,
and slash commands arriving at 20 and 100 a second, against Slack's real rate tiers.

Everything runs in processes of its own: the control-plane simulator (10,000 clusters over
10 targets, every call 50 ms slow), the Slack stand-in enforcing Slack's tiers (chat.update
50 a minute, chat.postMessage about 1 a second per channel, chat.postEphemeral 100 a
minute), the reply sink, the bare Bolt baseline, and serve. The 1,000 changes are made
through the simulator and recorded in serve's database as a running serve leaves them
(request, card, thread message, operation), then serve is started and takes them over.

Phase one, the tracker alone between sweeps: serve's CPU sampled each second from /proc
(p90), its memory, how often each operation is polled against its backoff, and the 429s the
stand-in answered. Then 20 of the operations end, and each must get its final message.
Phase two, while serve sweeps 10,000 clusters: /cluster help at 20 and at 100 a second,
Poisson arrivals (open loop), in blocks interleaved with the bare app at the same rate; p99
ack against the bare app's, and serve's event-loop lag from /metrics. Both run their
listener before answering (``process_before_response``), so neither waits out Bolt's 10 ms
ack polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import secrets
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from benchmarks.ack import command_body
from benchmarks.harness import (
    Results,
    call,
    cold_cost_ratio,
    cpu_seconds,
    heading,
    percentile,
    processes,
    python,
    rss_mb,
    serve_and_bare,
    serve_env,
    slack_and_sink,
    wait_ready,
)
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from bot.sandbox.slack.delivery import signed_headers
from bot.store import Store
from handlers.changes.resize import plan_resize
from handlers.changes.tracking import FOLLOW, follow_key
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.entities import ApprovalRequest, RequestState, TrackedOperation
from handlers.owed.model import Owed
from tests.support.ports import free_port

T = TypeVar("T")

TARGETS = 10
CLUSTERS = 10_000
OPERATIONS = 1_000
ENDING = 20  # operations that end during the run, each owed a final message
LATENCY_MS = 50
WINDOW = 60.0  # phase one: seconds of steady state
RATE = 20.0  # commands a second, by default
RATES = (20.0, 100.0)  # phase two: commands a second, each in its blocks
BLOCK = 6.0  # phase two: seconds per block, serve and bare in turn
BLOCKS = 10  # 1,200 acks of each at 20/s: a p99 that is not the sixth slowest of 600
SWEEPING = 0.8  # share of a serve block's samples that must find a sweep running
CHANNEL = "C0MLINFRA"
TIERS = {"chat.update": 50, "chat.postMessage": 60, "chat.postEphemeral": 100}
BACKOFF = (1.0, 1.5, 20.0)  # first interval, growth, longest (handlers/changes/tracking.py)


def polls_allowed(seconds: float) -> int:
    """Polls one operation may take in ``seconds``, one per backoff step (each step may be
    shortened by up to a fifth, handlers/changes/tracking.py ``spread``)."""
    first, growth, longest = BACKOFF
    steps, waited, interval = 1, 0.0, first
    while waited + 0.8 * interval <= seconds:
        waited += 0.8 * interval
        steps += 1
        interval = min(longest, interval * growth)
    return steps


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as reply:
        return await reply.json()


async def start_changes(
    session: aiohttp.ClientSession, vertex: str, names: list[str]
) -> dict[str, tuple[Cluster, str]]:
    """Resize each cluster's gpu pool 2 -> 3 through the simulator: its operation runs."""
    started: dict[str, tuple[Cluster, str]] = {}
    bound = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with bound:
            headers = {"Authorization": "Bearer bench"}
            url = f"{vertex}/v1beta1/{name}"
            async with session.get(url, headers=headers) as reply:
                cluster = Cluster.model_validate(await reply.json())
            body = cluster.to_api()
            for pool in body["nodePools"]:
                if pool["id"] == "gpu":
                    pool["scalingSpec"] = {"minNodeCount": 3, "maxNodeCount": 3}
            async with session.patch(
                url, params={"updateMask": "node_pools"}, json=body, headers=headers
            ) as reply:
                operation = await reply.json()
            started[name] = (cluster, operation["name"])

    await asyncio.gather(*(one(n) for n in names))
    return started


async def record_changes(
    session: aiohttp.ClientSession,
    box: str,
    token: str,
    database: str,
    started: dict[str, tuple[Cluster, str]],
) -> list[str]:
    """As a running serve leaves them: a card and its thread message in Slack, the request
    running and its operation tracked. Returns the request ids."""
    store = Store.from_url(database)
    await store.migrate()
    prices = PriceBook.with_overrides()
    headers = {"Authorization": f"Bearer {token}"}
    ids = []
    now = time.time()
    for name, (cluster, operation) in started.items():
        async with session.post(
            f"{box}/api/chat.postMessage",
            json={"channel": CHANNEL, "text": f"Resize request: {name}"},
            headers=headers,
        ) as reply:
            card = (await reply.json())["ts"]
        async with session.post(
            f"{box}/api/chat.postMessage",
            json={"channel": CHANNEL, "text": "approved", "thread_ts": card},
            headers=headers,
        ) as reply:
            thread = (await reply.json())["ts"]
        request = ApprovalRequest(
            id="r-" + secrets.token_hex(5),
            plan=plan_resize(cluster, "gpu", 3, 3, prices),
            requester="U0ALICE",
            channel=CHANNEL,
            created_at=now,
            expires_at=now + 3600,
            state=RequestState.RUNNING,
            card_message=card,
            decided_by="U0BOB",
            decided_at=now,
            operation=operation,
            progress_message=thread,
        )
        await store.add_request(request)
        followed = TrackedOperation(
            name=operation,
            request_id=request.id,
            cluster=name,
            channel=CHANNEL,
            thread=card,
            started_at=now,
            next_poll_at=now,
            progress_message=thread,
        )
        # its following owed with it, as the move to running owes it
        follow = Owed(follow_key(request.id), FOLLOW, {"operation": operation}, now, now)
        await store.add_operation(followed, owe=[follow])
        ids.append(request.id)
    await store.close()
    return ids


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+-]+)$", text, flags=re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def open_loop(
    session: aiohttp.ClientSession,
    url: str,
    secret: str,
    sink: str,
    seconds: float,
    rate: float = RATE,
) -> list[float]:
    """/cluster help at ``rate`` a second, Poisson arrivals: each sent when due, whatever
    the answers before it."""
    timings: list[float] = []
    pending: list[asyncio.Task[None]] = []

    async def one() -> None:
        body = command_body("help", f"{sink}/r/{uuid.uuid4().hex}")
        headers = signed_headers(secret, body, "application/x-www-form-urlencoded")
        started = time.perf_counter()
        async with session.post(url, data=body, headers=headers) as reply:
            await reply.read()
            assert reply.status == 200, reply.status
        timings.append(time.perf_counter() - started)

    end = time.monotonic() + seconds
    rng = random.Random(7)
    while time.monotonic() < end:
        pending.append(asyncio.get_running_loop().create_task(one()))
        await asyncio.sleep(rng.expovariate(rate))
    await asyncio.gather(*pending)
    return timings


async def run(results: Results) -> None:
    heading(
        f"serve at scale: {OPERATIONS:,} operations in flight, {CLUSTERS:,} clusters, Slack's "
        f"tiers enforced, commands at {' and '.join(f'{r:g}' for r in RATES)}/s"
    )
    targets, fixtures = fleet(TARGETS, CLUSTERS)
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-scale-bench-"))
    database = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    box_port, sink_port, serve_port, bare_port = (free_port() for _ in range(4))
    with (
        simulator_process(fixtures, extra=("--update-seconds", "3600")) as (vertex, _sim_pid),
        slack_and_sink(box_port, sink_port) as (box, sink),
    ):
        config = call(f"{box}/sandbox/api/config")
        names = [
            f"{t.parent}/modelDevelopmentClusters/c{i:04d}" for t in targets for i in range(100)
        ]
        async with aiohttp.ClientSession() as session:
            # the changes that stay in flight, then the few that end within the run
            started = await start_changes(session, vertex, names[: OPERATIONS - ENDING])
            await post(session, f"{vertex}/_sim/config", {"durations": {"update": 120}})
            ending = await start_changes(session, vertex, names[OPERATIONS - ENDING : OPERATIONS])
            ids = await record_changes(
                session, box, config["bot_token"], database, {**started, **ending}
            )
            ending_ids = set(ids[-ENDING:])
            await post(session, f"{vertex}/_sim/faults", {"latency_ms": LATENCY_MS})
            await post(session, f"{box}/sandbox/api/config", {"rate_limits": TIERS})
            env = serve_env(
                box,
                vertex=vertex,
                targets=targets,
                database=database,  # the sweep at start only
                PORT=str(serve_port),
                CLUSTERBOT_REPLICA_ID="bench",
            )
            serve_url = f"http://127.0.0.1:{serve_port}"
            with processes((python("-m", "bot", "serve"), env)) as (serve,):
                wait_ready(f"{serve_url}/healthz", serve)
                await tracker_alone(results, session, vertex, box, serve_url, serve.pid)
                await finals(results, box, database, ending_ids)
            # a new serve takes the operations over, and sweeps 10,000 clusters again and again
            with serve_and_bare({**env, "CLUSTERBOT_SWEEP_INTERVAL": "1"}, serve_port, bare_port):
                await commands_while_sweeping(
                    results, session, sink, serve_url, bare_port, config["signing_secret"]
                )


async def until(count: Callable[[], Awaitable[int]], wanted: int, limit: float = 300) -> None:
    """Poll ``count`` until it reaches ``wanted`` (lasting state, not a sleep of a guess)."""
    deadline = time.monotonic() + limit
    while (have := await count()) < wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"waited {limit:g} s and have {have} of {wanted}")
        await asyncio.sleep(0.5)


async def sweeps_done(session: aiohttp.ClientSession, serve_url: str) -> int:
    async with session.get(f"{serve_url}/metrics") as reply:
        return int(metric(await reply.text(), "clusterbot_sweep_seconds_count"))


def operations_polled(log: list[dict[str, Any]]) -> dict[str, int]:
    """Each operation in the simulator's request log, and how often it was polled."""
    polls: dict[str, int] = {}
    for entry in log:
        if "/operations/" in entry["path"]:
            polls[entry["path"]] = polls.get(entry["path"], 0) + 1
    return polls


def polls_per(log: list[dict[str, Any]], seconds: float) -> list[int]:
    """Operation polls in the simulator's request log, counted in spans of ``seconds``."""
    times = [
        datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
        for e in log
        if "/operations/" in e["path"]
    ]
    if not times:
        return []
    counts = [0] * (int((max(times) - min(times)) / seconds) + 1)
    for at in times:
        counts[int((at - min(times)) / seconds)] += 1
    return counts


async def tracker_alone(
    results: Results,
    session: aiohttp.ClientSession,
    vertex: str,
    box: str,
    serve_url: str,
    pid: int,
) -> None:
    """Phase one: after the sweep at start, only the tracker works."""
    await until(lambda: sweeps_done(session, serve_url), 1)
    async with session.delete(f"{vertex}/_sim/requests"):
        pass
    samples: list[float] = []
    rss: list[float] = []
    began = time.monotonic()
    last = cpu_seconds(pid)
    while time.monotonic() - began < WINDOW:
        await asyncio.sleep(1.0)
        now = cpu_seconds(pid)
        samples.append(now - last)
        last = now
        rss.append(rss_mb(pid))
    log = call(f"{vertex}/_sim/requests?method=GET")["requests"]
    polls = operations_polled(log)
    assert len(polls) >= OPERATIONS - ENDING, f"only {len(polls)} operations were polled"
    results.add("scale", "operations polled in the window", len(polls), "ops")
    results.add(
        "scale",
        "most polls of one operation / its backoff steps",
        max(polls.values()) / polls_allowed(WINDOW),
        "x",
        at_most=1.0,
    )
    results.add(
        "scale",
        "CPU of serve, p90 of 1 s samples",
        percentile(samples, 0.9) * 100,
        "%",
        at_most=5.0,
    )
    results.add("scale", "CPU of serve, median of 1 s samples", percentile(samples, 0.5) * 100, "%")
    if os.environ.get("BENCH_SHOW_SAMPLES"):
        print("  samples:", " ".join(f"{x * 100:.1f}" for x in samples))
        print("  polls per 5 s:", " ".join(str(n) for n in polls_per(log, 5.0)))
    results.add("scale", "memory of serve (largest RSS)", max(rss), "MB", at_most=200.0)
    results.add(
        "scale",
        "this machine: CPU of work done once a second / back to back",
        cold_cost_ratio(),
        "x",
        note="the same work is charged this much more when it runs once a second",
    )


async def finals(results: Results, box: str, database: str, ending: set[str]) -> None:
    """The operations that end get their final message, within Slack's tiers."""
    store = Store.from_url(database)
    deadline = time.monotonic() + 300
    try:
        while True:
            done = {r.id: r for r in await store.requests_in(["succeeded"]) if r.id in ending}
            messages = {
                m["ts"]: m
                for m in call(f"{box}/sandbox/api/messages?channel={CHANNEL}")["messages"]
            }
            shown = [
                r
                for r in done.values()
                if "done, finished in"
                in str(messages.get(r.progress_message or "", {}).get("blocks"))
            ]
            if len(shown) == len(ending) or time.monotonic() > deadline:
                break
            await asyncio.sleep(2)
    finally:
        await store.close()
    figure = results.add(
        "scale",
        f"ended operations whose final message is shown (of {len(ending)})",
        len(shown),
        "msgs",
        goal=f"= {len(ending)}",
    )
    figure.met = len(shown) == len(ending)
    config = call(f"{box}/sandbox/api/config")
    results.add(
        "scale",
        "429s answered by the Slack stand-in",
        config["ratelimited"],
        "",
        at_most=0,
        note=str(config["ratelimited_by_method"]),
    )


async def block_pair(
    session: aiohttp.ClientSession,
    urls: tuple[str, str],
    secret: str,
    sink: str,
    rate: float,
    meanwhile: Callable[[asyncio.Event], Awaitable[T]],
    seconds: float = BLOCK,
) -> tuple[list[float], list[float], T]:
    """A block of /cluster help to serve (``urls[0]``) while ``meanwhile`` runs beside it,
    told by the event when the block is over, then a block to the bare app (``urls[1]``) at
    the same rate: both blocks' ack times, and what ``meanwhile`` found."""
    stop = asyncio.Event()
    beside = asyncio.ensure_future(meanwhile(stop))
    serve = await open_loop(session, urls[0], secret, sink, seconds, rate)
    stop.set()
    found = await beside
    bare = await open_loop(session, urls[1], secret, sink, seconds, rate)
    return serve, bare, found


def sweeping(
    session: aiohttp.ClientSession, serve_url: str
) -> Callable[[asyncio.Event], Awaitable[list[bool]]]:
    """Whether serve was sweeping, every 2 s until told to stop."""

    async def samples(stop: asyncio.Event) -> list[bool]:
        found: list[bool] = []
        while not stop.is_set():
            async with session.get(f"{serve_url}/metrics") as reply:
                found.append(metric(await reply.text(), "clusterbot_sweeping") >= 1)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)
        return found

    return samples


async def commands_while_sweeping(
    results: Results,
    session: aiohttp.ClientSession,
    sink: str,
    serve_url: str,
    bare_port: int,
    secret: str,
) -> None:
    """Phase two: /cluster help at each of RATES a second while serve sweeps 10,000 clusters
    (one sweep after another) and follows the operations, in blocks interleaved with the bare
    app at the same rate (serve, bare, at one rate and then the next, over again). A pair of
    blocks counts only if a sweep was running at ``SWEEPING`` of the samples taken every
    2 s during serve's block (``clusterbot_sweeping``; a scrape costs serve a little)."""
    timings: dict[tuple[float, str], list[float]] = {}
    counted = dict.fromkeys(RATES, 0)
    urls = (f"{serve_url}/slack/events", f"http://127.0.0.1:{bare_port}/slack/events")
    for _ in range(BLOCKS):
        for rate in RATES:
            watch = sweeping(session, serve_url)
            serve, bare, samples = await block_pair(session, urls, secret, sink, rate, watch)
            if sum(samples) >= SWEEPING * len(samples):
                counted[rate] += 1
                timings.setdefault((rate, "serve"), []).extend(serve)
                timings.setdefault((rate, "bare"), []).extend(bare)
    for rate in RATES:
        assert counted[rate], f"the sweep had finished before the commands at {rate:g}/s came"
        serve_p99 = percentile(timings[rate, "serve"], 0.99)
        bare_p99 = percentile(timings[rate, "bare"], 0.99)
        topic = f"open loop at {rate:g}/s"
        results.add(
            "scale", f"{topic}: block pairs during the sweep (of {BLOCKS})", counted[rate], ""
        )
        for name, who in (("serve", "serve"), ("bare Bolt", "bare")):
            median = percentile(timings[rate, who], 0.5) * 1000
            results.add("scale", f"{topic}: {name} p50 ack", median, "ms")
        results.add("scale", f"{topic}: serve p99 ack", serve_p99 * 1000, "ms")
        results.add("scale", f"{topic}: bare Bolt p99 ack", bare_p99 * 1000, "ms")
        ratio = serve_p99 / bare_p99
        results.add("scale", f"{topic}: p99 serve while sweeping / bare", ratio, "x", at_most=1.5)
    async with session.get(f"{serve_url}/metrics") as reply:
        text = await reply.text()
    results.add(
        "scale",
        "event-loop lag of serve, largest",
        metric(text, "clusterbot_event_loop_lag_max_seconds") * 1000,
        "ms",
        at_most=50.0,
    )
