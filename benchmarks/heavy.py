"""Heavy reports from viewers while everyone else's commands arrive: ``/cluster cost since
9999w`` and 100 year-long reports (cost over 400 days by cluster, label and pool, the audit)
from 25 viewers at once, against a ledger of 400 days of runs, while ``/cluster list``
arrives at 20 a second, Poisson, from other people. Each command's answer is read back (the
ack's body, or the last reply at its response_url) and sorted: answered, refused "busy" (a
heavy one that could not start within a minute), or an internal error. Serve's memory is
read before, at its peak, and once every answer is in.

Goals: every ``list`` answered as usual (none busy, none an error), 0 internal errors in
all, the p99 ack of ``list`` within 200 ms (the goal the other load benchmarks hold), and
memory back within 50 MB of where it started."""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

import aiohttp

from benchmarks.harness import (
    Results,
    heading,
    percentile,
    processes,
    python,
    rss_mb,
    serve_env,
    slack_and_sink,
    wait_ready,
)
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from bot.sandbox.slack.delivery import signed_headers
from bot.store import Store
from handlers.spend.runs import SpendRun
from tests.support.ports import free_port

DAYS = 400
CLUSTERS = 40
POOLS = ("a4", "cpu")
RUNS_A_DAY = 6
RATE = 20.0  # list commands a second
SECONDS = 45.0
QUIET = 20.0  # seconds of list alone, before
HEAVY = 100
VIEWERS = 25
HEAVY_TEXTS = ("cost since 400d", "cost since 52w by label", "cost since 400d by pool", "audit")
INTERNAL = "internal error"
BUSY = "busy"


async def seed(database: str, now: float) -> int:
    """The ledger as a year of sweeps leaves it: each pool's runs, a few a day."""
    store = Store.from_url(database)
    await store.migrate()
    rows: list[SpendRun] = []
    step = 86400 / RUNS_A_DAY
    start = now - DAYS * 86400
    for n in range(CLUSTERS):
        for pool in POOLS:
            for k in range(DAYS * RUNS_A_DAY):
                began = start + k * step
                rows.append(
                    SpendRun(
                        cluster=f"bench-{n:03d}",
                        pool=pool,
                        start=began,
                        end=began + step,
                        nodes=1 + (k % 4),
                        node_hour=12.5 if pool == "a4" else 0.4,
                        idle=k % 3 == 0,
                        target="bench-project-0/us-central1",
                        labels=(("team", f"team-{n % 5}"),),
                    )
                )
    for at in range(0, len(rows), 5000):
        await store.record_spend(rows[at : at + 5000])
    await store.close()
    return len(rows)


def body(text: str, user: str, reply_to: str) -> str:
    return urlencode(
        {
            "command": "/cluster",
            "text": text,
            "user_id": user,
            "user_name": user.lower(),
            "channel_id": "C0MLINFRA",
            "channel_name": "ml-infra",
            "team_id": "T0DEMO",
            "api_app_id": "A0CLUSTERBOT",
            "response_url": reply_to,
            "trigger_id": "1.2.3",
            "token": "x",
        }
    )


class Sent:
    def __init__(self, session: aiohttp.ClientSession, url: str, secret: str, sink: str):
        self.session, self.url, self.secret, self.sink = session, url, secret, sink
        self.acks: dict[str, tuple[str, float, str]] = {}  # name -> (kind, seconds, ack body)

    async def one(self, kind: str, text: str, user: str) -> None:
        name = f"k_{kind}_{uuid.uuid4().hex}"
        payload = body(text, user, f"{self.sink}/r/{name}")
        headers = signed_headers(self.secret, payload, "application/x-www-form-urlencoded")
        started = time.perf_counter()
        async with self.session.post(self.url, data=payload, headers=headers) as reply:
            answer = (await reply.read()).decode()
            status = reply.status
        elapsed = time.perf_counter() - started
        self.acks[name] = (kind, elapsed, answer if status == 200 else f"HTTP {status}")


async def answers(sent: Sent, sink: str) -> dict[str, str]:
    """Each command's answer: its ack's text, else the last reply at its response_url."""
    found: dict[str, str] = {}
    async with aiohttp.ClientSession() as session:
        for name, (_kind, _seconds, ack) in sent.acks.items():
            text = ""
            if ack.strip():
                text = ack if ack.startswith("HTTP") else json.loads(ack).get("text") or ack
            if not text or text.startswith("Working on it"):
                async with session.get(f"{sink}/kept/{name}") as reply:
                    kept = await reply.text()
                text = json.loads(kept).get("text", "") if kept else ""
            found[name] = text
    return found


def settled(found: dict[str, str]) -> bool:
    return all(t and not t.startswith("Working on it") for t in found.values())


async def _answered(sent: Sent, sink: str, limit: float = 300.0) -> dict[str, str]:
    """Lasting state: every command sent so far has its answer (or the limit passed)."""
    deadline = time.monotonic() + limit
    while True:
        found = await answers(sent, sink)
        if settled(found) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


async def _lists(sent: Sent, kind: str, seconds: float) -> list[str]:
    """``list`` at ``RATE`` a second, Poisson, from 200 people, for ``seconds``; their names."""
    rng = random.Random(11)
    tasks, n = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tasks.append(asyncio.create_task(sent.one(kind, "list", f"U0L{n % 200:03d}")))
        n += 1
        await asyncio.sleep(rng.expovariate(RATE))
    await asyncio.gather(*tasks)
    return [name for name, (k, _s, _a) in sent.acks.items() if k == kind]


async def run(results: Results) -> None:
    heading(
        f"heavy reports from viewers: cost since 9999w and {HEAVY} year-long reports over "
        f"{DAYS} days of a {CLUSTERS}-cluster ledger, while list arrives at {RATE:g}/s"
    )
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-heavy-bench-"))
    database = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    rows = await seed(database, time.time())
    targets, fixtures = fleet(1, 10)
    box_port, sink_port, serve_port = free_port(), free_port(), free_port()
    serve_url = f"http://127.0.0.1:{serve_port}"
    with (
        simulator_process(fixtures) as (vertex, _pid),
        slack_and_sink(box_port, sink_port) as (box, sink),
    ):
        env = serve_env(box, vertex=vertex, targets=targets, database=database)
        with processes((python("-m", "bot", "serve"), {**env, "PORT": str(serve_port)})) as (
            serve,
        ):
            wait_ready(f"{serve_url}/healthz", serve)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                sent = Sent(session, f"{serve_url}/slack/events", env["SLACK_SIGNING_SECRET"], sink)
                for _ in range(20):  # warm: the first commands load what every one uses
                    await sent.one("warm", "list", "U0WARM")
                await sent.one("warm", "cost since 7d", "U0WARM")  # matplotlib loaded
                await _answered(sent, sink)
                # the same list load alone, first: what the p99 is without heavy reports
                alone = await _lists(sent, "alone", QUIET)
                await _answered(sent, sink)
                before = rss_mb(serve.pid)
                peak = [before]

                async def watch() -> None:
                    while True:
                        peak.append(rss_mb(serve.pid))
                        await asyncio.sleep(0.2)

                watcher = asyncio.create_task(watch())
                heavy = [asyncio.create_task(sent.one("heavy", "cost since 9999w", "U0V00"))]
                for n in range(HEAVY):
                    text = HEAVY_TEXTS[n % len(HEAVY_TEXTS)]
                    user = f"U0V{n % VIEWERS:02d}"
                    heavy.append(asyncio.create_task(sent.one("heavy", text, user)))
                light = await _lists(sent, "list", SECONDS)
                await asyncio.gather(*heavy)
                found = await _answered(sent, sink)
                await asyncio.sleep(5)  # what the last reports held is let go
                watcher.cancel()
                after = rss_mb(serve.pid)
    kinds = {name: kind for name, (kind, _s, _a) in sent.acks.items()}
    of = {k: [n for n, kind in kinds.items() if kind == k] for k in ("heavy", "list")}
    unanswered = [n for n, text in found.items() if not text or text.startswith("Working on")]
    errors = [n for n, text in found.items() if INTERNAL in text or text.startswith("HTTP")]
    busy = {k: sum(BUSY in found[n] for n in names) for k, names in of.items()}
    answered = {k: len(names) - busy[k] for k, names in of.items()}
    acks = [sent.acks[n][1] for n in of["list"]]
    quiet = [sent.acks[n][1] for n in alone]
    assert len(light) == len(of["list"])
    assert len(of["heavy"]) == HEAVY + 1, "every heavy report was sent"
    assert rows == CLUSTERS * len(POOLS) * DAYS * RUNS_A_DAY
    results.add("heavy", "ledger rows read by each year-long report", rows, "rows")
    results.add("heavy", "heavy reports sent", len(of["heavy"]), "cmds")
    results.add("heavy", "heavy reports answered", answered["heavy"], "cmds")
    results.add("heavy", "heavy reports refused busy", busy["heavy"], "cmds")
    results.add("heavy", "list commands sent", len(of["list"]), "cmds")
    results.add(
        "heavy",
        "list commands not answered as usual",
        len(of["list"]) - answered["list"] + sum(n in of["list"] for n in unanswered + errors),
        "cmds",
        at_most=0,
    )
    results.add("heavy", "internal errors or HTTP errors", len(errors), "cmds", at_most=0)
    results.add("heavy", "answers never arrived", len(unanswered), "cmds", at_most=0)
    results.add("heavy", "list p99 ack, alone", percentile(quiet, 0.99) * 1000, "ms")
    results.add(
        "heavy", "list p99 ack, beside them", percentile(acks, 0.99) * 1000, "ms", at_most=200
    )
    results.add("heavy", "serve memory before", before, "MB")
    results.add("heavy", "serve memory at its peak", max(peak), "MB")
    results.add("heavy", "serve memory after, over before", after - before, "MB", at_most=50)
