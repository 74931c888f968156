"""An idle sweep of 1,000 clusters over 10 targets, every control-plane call 50 ms slow.

The sweep lists each target (one page of 100) and asks each cluster's Slurm for its jobs,
at most CONCURRENCY calls at once. The critical path is one list round trip plus
1,000 x 50 ms / CONCURRENCY for the Slurm queries; the figure printed beside it is the
wall time of the whole sweep, idle records saved in SQLite included.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import aiohttp
from pydantic import SecretStr

from benchmarks.listing import _cluster
from benchmarks.process import simulator_process
from bot.app import ClusterbotService
from bot.settings import Settings
from bot.vertex.names import Target
from handlers.policy import Policy

CLUSTERS = 1000
TARGETS = 10
LATENCY_MS = 50
CONCURRENCY = 32


async def run() -> None:
    targets = [Target(f"bench-project-{n}", "us-central1") for n in range(TARGETS)]
    per_target = CLUSTERS // TARGETS
    fixtures = {"clusters": [_cluster(t, i) for t in targets for i in range(per_target)]}
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-sweep-bench-"))
    with simulator_process(fixtures, page_max=100) as url:
        async with aiohttp.ClientSession() as session:
            await (await session.post(f"{url}/_sim/faults", json={"latency_ms": LATENCY_MS})).read()
            settings = Settings(
                targets=targets,
                vertex_api_url=url,
                vertex_static_token=SecretStr("bench"),
                vertex_concurrency=CONCURRENCY,
                database_url=f"sqlite+aiosqlite:///{folder / 'sweep.db'}",
            )
            service = ClusterbotService(settings, Policy())
            await service.store.migrate()
            try:
                started = time.perf_counter()
                report = await service.core.sweeper.sweep(alerts=False, force=True)
                elapsed = time.perf_counter() - started
                assert report is not None, "the sweep did not run"
            finally:
                await service.vertex.aclose()
                await service.store.close()
            log = await (await session.get(f"{url}/_sim/requests")).json()
    calls = log["requests"]
    lists = sum(1 for c in calls if c["method"] == "GET")
    slurm = sum(1 for c in calls if c["path"].endswith(":callSlurmRestApi"))
    list_pages_per_target = math.ceil(per_target / 100)
    # a quiet cluster takes two Slurm queries in turn (jobs, then nodes), so slurm calls
    # spread over the concurrency bound make the rest of the path
    critical = (list_pages_per_target + slurm / CONCURRENCY) * LATENCY_MS / 1000
    print(
        f"\nidle sweep of {len(report.entries)} clusters over {TARGETS} targets, "
        f"{LATENCY_MS} ms latency a call, concurrency {CONCURRENCY}"
    )
    print(f"  API calls:      {len(calls)} ({lists} list pages, {slurm} Slurm queries)")
    print(f"  wall time:      {elapsed:.2f} s")
    print(f"  critical path:  {critical:.2f} s")
    print(
        f"  ratio:          {elapsed / critical:.2f}x the critical path; "
        f"peak in flight {log['peak_in_flight']}"
    )
