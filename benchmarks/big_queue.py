"""A Slurm queue of 5,000 jobs (whole slurmrestd job objects, about 7 KB each) read by the
bot while its event loop is watched: the longest stall of the loop and the p99 delay of a
1 ms tick, for the paced reader (``bot.vertex.paced``) and, interleaved in the same run,
for one ``json.loads`` of the same replies as the anchor.

The read counts only if it returned every job. This measures the event loop the acks run
on; the ack of a slash command through Bolt while such a queue is read is not yet in it.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from benchmarks.harness import Results, heading, percentile
from benchmarks.process import simulator_process
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.operations import SlurmResponse
from bot.vertex.slurm import SlurmReader, read_job

JOBS = 5_000
ROUNDS = 3
CLUSTER = "projects/bench/locations/us-central1/modelDevelopmentClusters/big01"


def fixtures() -> dict[str, Any]:
    cluster = {
        "name": CLUSTER,
        "network": {"network": "projects/bench/global/networks/default"},
        "nodePools": [
            {
                "id": "cpu",
                "zone": "us-central1-a",
                "machineSpec": {"machineType": "n2-standard-8"},
                "scalingSpec": {"minNodeCount": 4, "maxNodeCount": 4},
                "provisioningModel": "ON_DEMAND",
            },
            {
                "id": "login",
                "zone": "us-central1-a",
                "machineSpec": {"machineType": "n2-standard-4"},
                "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
                "provisioningModel": "ON_DEMAND",
            },
        ],
        "orchestratorSpec": {
            "slurmSpec": {
                "homeDirectoryStorage": "projects/bench/locations/us-central1-a/instances/home",
                "loginNodePoolId": "login",
                "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}],
            }
        },
    }
    jobs = [
        {"job_id": 10_000 + i, "job_state": "PENDING", "user_name": f"user{i % 40}"}
        for i in range(JOBS)
    ]
    return {"clusters": [cluster], "jobs": {CLUSTER: {"jobs": jobs}}}


async def watched(work: Callable[[], Awaitable[int]]) -> tuple[int, float, float]:
    """Run ``work`` while a 1 ms ticker measures the loop: (its result, the longest stall,
    the p99 tick delay), in seconds."""
    gaps: list[float] = []
    running = True

    async def ticker() -> None:
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last - 0.001)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    try:
        result = await work()
    finally:
        running = False
        await task
    return result, max(gaps), percentile(gaps, 99)


async def run(results: Results) -> None:
    heading(f"a Slurm queue of {JOBS:,} whole job objects read while the event loop is watched")
    with simulator_process(fixtures()) as (url, _pid):
        async with (
            aiohttp.ClientSession() as session,
            VertexClient(StaticToken("bench"), base_url=url) as client,
        ):
            reader = SlurmReader(client, pinned="v0.0.42")
            path = "/slurm/v0.0.42/jobs/"
            raw = await client.call_slurm_rest_api(CLUSTER, path)  # warm the simulator's cache
            size = len(raw.body)

            async def paced() -> int:
                return len(await reader.jobs(CLUSTER))

            async def one_shot() -> int:
                target = f"{url}/v1beta1/{CLUSTER}:callSlurmRestApi"
                body = {"method": "HTTP_METHOD_GET", "path": path}
                headers = {"Authorization": "Bearer bench"}
                async with session.post(target, json=body, headers=headers) as reply:
                    data = await reply.read()
                envelope = SlurmResponse.model_validate_json(data)
                return len([read_job(j) for j in json.loads(envelope.body)["jobs"]])

            seen: dict[str, list[tuple[float, float]]] = {"paced": [], "one json.loads": []}
            for _ in range(ROUNDS):
                for name, work in (("paced", paced), ("one json.loads", one_shot)):
                    count, stall, p99 = await watched(work)
                    assert count == JOBS, f"{name} read {count} of {JOBS} jobs"
                    seen[name].append((stall, p99))
    results.add("big queue", "reply size", size / 1e6, "MB")
    for name, runs in seen.items():
        stall = max(s for s, _ in runs)
        p99 = max(p for _, p in runs)
        goal = 0.1 if name == "paced" else None
        results.add("big queue", f"{name}: longest event-loop stall", stall, "s", at_most=goal)
        results.add("big queue", f"{name}: p99 tick delay", p99 * 1000, "ms")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results.add("big queue", "peak memory of the process", peak, "MB", at_most=250)
