"""Idle sweeps of 1,000 and 10,000 clusters over 10 targets at default settings, every
control-plane call 50 ms slow (the simulator in a process of its own).

The bound is what latency alone allows: the list pages of one target go one after another,
and the Slurm queries (the simulator's request log counts them) spread over the default
number of calls at once. The sweep counts only if it reported every cluster.
"""

from __future__ import annotations

import math
import os
import resource
import tempfile
import time
from pathlib import Path

import aiohttp
from pydantic import SecretStr

from benchmarks.harness import Results, cpu_seconds, heading
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from bot.app import ClusterbotService
from bot.settings import Settings
from handlers.policy import Policy

TARGETS = 10
LATENCY_MS = 50
PAGE = 100


async def one(results: Results, clusters: int) -> None:
    targets, fixtures = fleet(TARGETS, clusters)
    per_target = clusters // TARGETS
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-sweep-bench-"))
    with simulator_process(fixtures, page_max=PAGE) as (url, simulator_pid):
        async with aiohttp.ClientSession() as session:
            fault = {"latency_ms": LATENCY_MS}
            await (await session.post(f"{url}/_sim/faults", json=fault)).read()
            settings = Settings(  # defaults, but where the stand-ins are
                targets=targets,
                vertex_api_url=url,
                vertex_static_token=SecretStr("bench"),
                database_url=f"sqlite+aiosqlite:///{folder / 'sweep.db'}",
            )
            service = ClusterbotService(settings, Policy())
            await service.store.migrate()
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            try:
                started = time.perf_counter()
                cpu_before = cpu_seconds(os.getpid()), cpu_seconds(simulator_pid)
                report = await service.core.sweeper.sweep(alerts=False, force=True)
                elapsed = time.perf_counter() - started
                bot_cpu = cpu_seconds(os.getpid()) - cpu_before[0]
                simulator_cpu = cpu_seconds(simulator_pid) - cpu_before[1]
            finally:
                await service.close_connections()
            log = await (await session.get(f"{url}/_sim/requests")).json()
    assert report is not None and len(report.entries) == clusters, "the sweep missed clusters"
    calls = log["requests"]
    slurm = sum(1 for c in calls if c["path"].endswith(":callSlurmRestApi"))
    assert slurm >= clusters, "not every cluster's Slurm was asked"
    concurrency = settings.vertex_concurrency
    bound = (math.ceil(per_target / PAGE) + slurm / concurrency) * LATENCY_MS / 1000
    name = f"sweep of {clusters:,} clusters"
    results.add("sweep", f"{name}: Slurm queries", slurm, "calls")
    results.add("sweep", f"{name}: wall time", elapsed, "s")
    results.add("sweep", f"{name}: latency bound", bound, "s")
    results.add("sweep", f"{name}: wall time / bound", elapsed / bound, "x", at_most=1.3)
    results.add("sweep", f"{name}: CPU of the bot", bot_cpu, "s")
    results.add("sweep", f"{name}: CPU of the simulator", simulator_cpu, "s")
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss_before
    results.add("sweep", f"{name}: peak memory grown", max(0.0, grown), "MB")


async def run(results: Results) -> None:
    heading(
        f"idle sweeps over {TARGETS} targets, {LATENCY_MS} ms a call, default settings "
        "(calls at once: CLUSTERBOT_VERTEX_CONCURRENCY, 32)"
    )
    for clusters in (1_000, 10_000):
        await one(results, clusters)
