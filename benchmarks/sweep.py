"""Idle sweeps of 1,000 and 10,000 clusters over 10 targets at default settings, every
control-plane call 50 ms slow (the simulator in a process of its own): a quiet fleet, whose
every cluster needs its nodes and its queue read, and one 80 % busy, where a cluster's nodes
alone show it busy and healthy, and its GPUs (at 85 %, from Cloud Monitoring) read in one
call. Each sweep's Slurm queries are held against the fewest its clusters' nodes allow.

The bound is what latency alone allows: the list pages of one target go one after another,
and the Slurm queries and GPU metric reads (the simulator's request log counts them) spread
over the default number of calls at once. The sweep counts only if it reported every
cluster. The same queries sent by a bare client, their starts spread as the sweep spreads
its own, show what the simulator and this machine allow.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from benchmarks.harness import Results, cpu_seconds, heading
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from bot.app import ClusterbotService
from bot.memory import collect_rarely
from bot.settings import Settings
from handlers.domain.names import Target
from handlers.policy import Policy
from handlers.sweep.demand import OUT_OF_SERVICE, WORKING_NODE_STATES

TARGETS = 10
LATENCY_MS = 50
PAGE = 100
RAW_UP_TO = 1_000  # the raw pass of 10,000 would add 35 s for the same ratio


async def sweeping_service(
    session: aiohttp.ClientSession,
    url: str,
    targets: list[Target],
    database: Path,
    latency_ms: float = LATENCY_MS,
) -> ClusterbotService:
    """A service at default settings on the simulator at ``url``, every call ``latency_ms``
    slow, with its database migrated: sweeps are run on it directly."""
    fault = {"latency_ms": latency_ms}
    await (await session.post(f"{url}/_sim/faults", json=fault)).read()
    settings = Settings(  # defaults, but where the stand-ins are
        targets=targets,
        vertex_api_url=url,
        monitoring_api_url=url,
        vertex_static_token=SecretStr("bench"),
        database_url=f"sqlite+aiosqlite:///{database}",
    )
    service = ClusterbotService(settings, Policy())
    await service.store.migrate()
    return service


async def one(results: Results, clusters: int, busy_share: float) -> None:
    """One sweep of ``clusters``, ``busy_share`` of them with a running job (the rest idle)."""
    targets, fixtures = fleet(TARGETS, clusters)
    every = fixtures["clusters"]
    busy = every[: round(len(every) * busy_share)]
    document: dict[str, Any] = {**fixtures, "jobs": {str(c["name"]): {"running": 1} for c in busy}}
    # the Ops Agent on every GPU node, its GPUs at work: one GPU metric read a busy cluster
    document["metrics"] = {
        str(c["name"]): {f"{str(c['name']).rsplit('/', 1)[-1]}-gpu-{n}": 85 for n in range(2)}
        for c in busy
    }
    per_target = clusters // TARGETS
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-sweep-bench-"))
    with simulator_process(document, page_max=PAGE) as (url, simulator_pid):
        async with aiohttp.ClientSession() as session:
            service = await sweeping_service(session, url, targets, folder / "sweep.db")
            settings = service.settings
            # a sweep after the first: each cluster's data parser is known from the database
            for cluster in fixtures["clusters"]:
                await service.store.keep_slurm_version(str(cluster["name"]), "v0.0.42", 0.0)
            # and each busy cluster's GPU metric (bot/vertex/monitoring.py's book: NVML's)
            learned = {str(c["name"]): [2, time.time()] for c in busy}
            book = json.dumps({"chosen": learned, "turn": {}})
            await service.store.save_report(time.time(), book, kind="gpu-metrics")
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            # the cycle collector as the sweep's child process runs it (bot/sweep_child.py)
            thresholds = gc.get_threshold()
            collect_rarely()
            gc.freeze()
            try:
                started = time.perf_counter()
                cpu_before = cpu_seconds(os.getpid()), cpu_seconds(simulator_pid)
                report = await service.core.sweeper.sweep(alerts=False, force=True)
                elapsed = time.perf_counter() - started
                bot_cpu = cpu_seconds(os.getpid()) - cpu_before[0]
                simulator_cpu = cpu_seconds(simulator_pid) - cpu_before[1]
            finally:
                gc.unfreeze()
                gc.set_threshold(*thresholds)
                await service.close_connections()
            log = await (await session.get(f"{url}/_sim/requests")).json()
            concurrency = settings.vertex_concurrency
            queries = [c for c in log["requests"] if c["path"].endswith(":callSlurmRestApi")]
            gpu_reads = sum(1 for c in log["requests"] if c["path"].endswith("/timeSeries"))
            if clusters <= RAW_UP_TO:
                raw, fewest = await raw_queries(session, url, queries, concurrency)
    assert report is not None and len(report.entries) == clusters, "the sweep missed clusters"
    slurm = len(queries)
    assert slurm >= clusters, "not every cluster's Slurm was asked"
    assert gpu_reads == len(busy), f"{gpu_reads} GPU metric reads for {len(busy)} busy clusters"
    bound = (math.ceil(per_target / PAGE) + (slurm + gpu_reads) / concurrency) * LATENCY_MS / 1000
    name = f"sweep of {clusters:,} clusters, {busy_share:.0%} busy"
    results.add("sweep", f"{name}: Slurm queries", slurm, "calls")
    results.add("sweep", f"{name}: Slurm queries per cluster", slurm / clusters, "calls")
    results.add("sweep", f"{name}: GPU metric reads per cluster", gpu_reads / clusters, "calls")
    if clusters <= RAW_UP_TO:
        # the fewest its clusters' nodes allow: no more is asked than idleness and health need
        results.add(
            "sweep", f"{name}: Slurm queries / the fewest", slurm / fewest, "x", at_most=1.0
        )
    results.add("sweep", f"{name}: wall time", elapsed, "s")
    results.add("sweep", f"{name}: latency bound", bound, "s")
    results.add("sweep", f"{name}: wall time / bound", elapsed / bound, "x", at_most=1.3)
    if clusters <= RAW_UP_TO:
        # what the simulator itself allows: the same queries, as many at once, nothing read
        results.add("sweep", f"{name}: its Slurm queries sent raw / bound", raw, "x")
    results.add("sweep", f"{name}: CPU of the bot", bot_cpu, "s")
    results.add("sweep", f"{name}: CPU of the simulator", simulator_cpu, "s")
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss_before
    results.add("sweep", f"{name}: peak memory grown", max(0.0, grown), "MB")


def asked_of(queries: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each cluster's Slurm paths, in the order the sweep sent them."""
    asked: dict[str, list[str]] = {}
    for query in queries:
        cluster = query["path"].removeprefix("/v1beta1/").removesuffix(":callSlurmRestApi")
        asked.setdefault(cluster, []).append(query["body"]["path"])
    return asked


def needs_queue(nodes_body: bytes) -> bool:
    """Whether a cluster's queue must be read besides its nodes (sinfo(1) NODE STATE CODES):
    no node works or completes a job, so a pending job may be demand; or a node is out of
    service, and the jobs it holds up are its health."""
    reply = json.loads(json.loads(nodes_body)["body"])
    states = [set(node["state"]) for node in reply["nodes"]]
    working = WORKING_NODE_STATES | {"COMPLETING"}
    return not any(s & working for s in states) or any(s & set(OUT_OF_SERVICE) for s in states)


async def raw_queries(
    session: aiohttp.ClientSession, url: str, queries: list[dict[str, Any]], concurrency: int
) -> tuple[float, int]:
    """The sweep's Slurm queries sent again straight from a bare client, ``concurrency`` at
    once, each cluster's in turn as the sweep sends them (its nodes, then, where they need
    it, its jobs), their starts at least three quarters of the bound's pace apart as the
    sweep spreads its own (``handlers.pacing.Spread``): the wall time over its bound, and
    the fewest queries the clusters' nodes allow (each one's nodes, and its jobs where
    ``needs_queue``)."""
    gap = 0.75 * LATENCY_MS / 1000 / concurrency
    next_start = 0.0
    asked = asked_of(queries)
    shapes = {tuple(p.rsplit("/", 2)[-2] for p in paths) for paths in asked.values()}
    assert shapes <= {("nodes",), ("nodes", "jobs")}, (
        f"Slurm asked other than nodes, jobs: {shapes}"
    )
    waiting = list(asked.items())
    sent = fewest = 0

    async def worker() -> None:
        nonlocal sent, fewest, next_start
        while waiting:
            cluster, paths = waiting.pop()
            for path in paths:
                now = time.perf_counter()
                next_start = max(now, next_start) + gap
                await asyncio.sleep(next_start - gap - now)
                body = {"method": "HTTP_METHOD_GET", "path": path}
                headers = {"Authorization": "Bearer bench"}
                target = f"{url}/v1beta1/{cluster}:callSlurmRestApi"
                async with session.post(target, json=body, headers=headers) as reply:
                    read = await reply.read()
                    assert reply.status == 200, reply.status
                sent += 1
                if path.endswith("/nodes/"):
                    fewest += 1 + needs_queue(read)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    assert sent == len(queries), "the raw pass did not send every query"
    return elapsed / ((sent / concurrency) * LATENCY_MS / 1000), fewest


async def run(results: Results) -> None:
    heading(
        f"idle sweeps over {TARGETS} targets, {LATENCY_MS} ms a call, default settings "
        "(calls at once: CLUSTERBOT_VERTEX_CONCURRENCY, 32)"
    )
    for clusters, busy_share in ((1_000, 0.0), (1_000, 0.8), (10_000, 0.8)):
        await one(results, clusters, busy_share)
