"""Listing many clusters across many targets through the simulator with injected latency.

Prints the wall time against the critical path: with N list pages spread over T targets and a
bound of C concurrent requests, pages of one target are sequential, so the best possible time
is max(pages per target, total pages / C) x latency.
"""

from __future__ import annotations

import math
import time

import aiohttp

from benchmarks.process import simulator_process
from bot.sandbox.controlplane.wire import camelize
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.names import Target

CLUSTERS = 1000
TARGETS = 10
LATENCY_MS = 50
PAGE = 25
CONCURRENCY = 10


def _cluster(target: Target, index: int) -> dict[str, object]:
    return camelize(
        {
            "name": f"{target.parent}/modelDevelopmentClusters/c{index:04d}",
            "node_pools": [
                {
                    "id": "gpu",
                    "machine_spec": {"machine_type": "a3-ultragpu-8g"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2},
                },
                {
                    "id": "login",
                    "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                },
            ],
            "orchestrator_spec": {
                "slurm_spec": {"login_node_pool_id": "login", "home_directory_storage": "fs"}
            },
        }
    )


async def run() -> None:
    targets = [Target(f"bench-project-{n}", "us-central1") for n in range(TARGETS)]
    per_target = CLUSTERS // TARGETS
    fixtures = {"clusters": [_cluster(t, i) for t in targets for i in range(per_target)]}
    with simulator_process(fixtures, page_max=PAGE) as url:
        async with aiohttp.ClientSession() as session:
            fault = {"method": "GET", "latency_ms": LATENCY_MS}
            await (await session.post(f"{url}/_sim/faults", json=fault)).read()
            async with VertexClient(
                StaticToken("bench"), base_url=url, concurrency=CONCURRENCY, page_size=PAGE
            ) as client:
                started = time.perf_counter()
                listings = await client.list_targets(targets)
                elapsed = time.perf_counter() - started
            log = await (await session.get(f"{url}/_sim/requests")).json()
    found = sum(len(listing.clusters) for listing in listings)
    pages = len(log["requests"])
    critical = max(math.ceil(per_target / PAGE), pages / CONCURRENCY) * LATENCY_MS / 1000
    print(f"list {found} clusters over {TARGETS} targets, {LATENCY_MS} ms latency a call")
    print(f"  API calls:      {pages} list pages (page size {PAGE})")
    print(f"  wall time:      {elapsed:.3f} s")
    print(f"  critical path:  {critical:.3f} s (concurrency {CONCURRENCY})")
    print(f"  one at a time:  {pages * LATENCY_MS / 1000:.3f} s")
    print(f"  ratio:          {elapsed / critical:.2f}x the critical path")
    print(f"  peak in flight: {log['peak_in_flight']}")
