"""A Slurm queue of 5,000 jobs (whole slurmrestd job objects, about 7 KB each) read by the
bot while its event loop is watched: the longest stall of the loop and the p99 delay of a
1 ms tick, for the paced reader (``bot.vertex.paced``) and, interleaved in the same run,
for one ``json.loads`` of the same replies as the anchor.

Each read runs in a process of its own, so that the peak memory is that read's; the read
counts only if it returned every job.

Then the acks themselves: ``clusterbot serve`` sweeps the cluster of that queue over and over
(a sweep each second, each reading all 5,000 jobs) while ``/cluster help`` arrives at 20 and
at 100 a second (Poisson arrivals, open loop), in blocks interleaved with the bare Bolt app
(``benchmarks/bare_bolt.py``) at the same rate. A serve block counts only if a sweep ended
within it.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.harness import (
    Results,
    call,
    heading,
    percentile,
    rss_mb,
    serve_and_bare,
    serve_env,
    slack_and_sink,
)
from benchmarks.process import simulator_process
from benchmarks.scale import open_loop, sweeps_done, until
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.slurm import SlurmReader, read_job
from handlers.domain.operations import SlurmResponse
from tests.support.ports import free_port

JOBS = 5_000
ROUNDS = 3
RATES = (20.0, 100.0)  # commands a second
BLOCK = 8.0  # seconds of commands per block, serve and bare in turn
BLOCKS = 3
CLUSTER = "projects/bench-project/locations/us-central1/modelDevelopmentClusters/big01"
PATH = "/slurm/v0.0.42/jobs/"


def fixtures() -> dict[str, Any]:
    cluster = {
        "name": CLUSTER,
        "network": {"network": "projects/bench-project/global/networks/default"},
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
                "homeDirectoryStorage": (
                    "projects/bench-project/locations/us-central1-a/instances/home"
                ),
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
    return result, max(gaps), percentile(gaps, 0.99)


async def _read(url: str, variant: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        VertexClient(StaticToken("bench"), base_url=url) as client,
    ):
        if variant == "paced":
            return len(await SlurmReader(vertex=client, pinned="v0.0.42").jobs(CLUSTER))
        target = f"{url}/v1beta1/{CLUSTER}:callSlurmRestApi"
        body = {"method": "HTTP_METHOD_GET", "path": PATH}
        headers = {"Authorization": "Bearer bench"}
        async with session.post(target, json=body, headers=headers) as reply:
            data = await reply.read()
        envelope = SlurmResponse.model_validate_json(data)
        return len([read_job(j) for j in json.loads(envelope.body)["jobs"]])


def _one_read(url: str, variant: str, out: Queue[tuple[int, float, float, float, float]]) -> None:
    """One read in a fresh process, so that its peak memory is its own."""
    started = time.perf_counter()
    count, stall, p99 = asyncio.run(watched(lambda: _read(url, variant)))
    took = time.perf_counter() - started
    out.put((count, stall, p99, rss_mb(os.getpid(), "VmHWM"), took))


def read_apart(url: str, variant: str) -> tuple[int, float, float, float, float]:
    """(jobs read, longest stall, p99 tick delay, peak memory in MB, seconds) of one read."""
    context = multiprocessing.get_context("spawn")
    out: Queue[tuple[int, float, float, float, float]] = context.Queue()
    process = context.Process(target=_one_read, args=(url, variant, out))
    process.start()
    try:
        return out.get(timeout=300)
    finally:
        process.join(timeout=30)


async def run(results: Results) -> None:
    heading(f"a Slurm queue of {JOBS:,} whole job objects read while the event loop is watched")
    names = ("paced", "one json.loads")
    seen: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in names}
    with simulator_process(fixtures()) as (url, _pid):
        async with VertexClient(StaticToken("bench"), base_url=url) as client:
            raw = await client.call_slurm_rest_api(CLUSTER, PATH)  # warm the simulator's cache
            size = len(raw.body)
            del raw
        for _ in range(ROUNDS):  # interleaved, each read in a process of its own
            for name in names:
                count, stall, p99, peak, took = await asyncio.to_thread(read_apart, url, name)
                assert count == JOBS, f"{name} read {count} of {JOBS} jobs"
                seen[name].append((stall, p99, peak, took))
    results.add("big queue", "reply size", size / 1e6, "MB")
    for name, runs in seen.items():
        paced = name == "paced"
        stall = max(s for s, _, _, _ in runs)
        results.add(
            "big queue",
            f"{name}: longest event-loop stall",
            stall,
            "s",
            at_most=0.1 if paced else None,
        )
        results.add(
            "big queue", f"{name}: p99 tick delay", max(p for _, p, _, _ in runs) * 1000, "ms"
        )
        peak = max(m for _, _, m, _ in runs)
        took = sorted(t for _, _, _, t in runs)[len(runs) // 2]
        results.add("big queue", f"{name}: read time (median)", took, "s")
        results.add(
            "big queue",
            f"{name}: peak memory of the process",
            peak,
            "MB",
            at_most=250 if paced else None,
        )


async def acks_while_sweeping(results: Results) -> None:
    heading(
        f"/cluster help at {' and '.join(f'{r:g}' for r in RATES)}/s while serve sweeps a queue "
        f"of {JOBS:,} jobs, against a bare Bolt app"
    )
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-big-queue-bench-"))
    box_port, sink_port, serve_port, bare_port = (free_port() for _ in range(4))
    serve_url = f"http://127.0.0.1:{serve_port}"
    with (
        simulator_process(fixtures()) as (vertex, _pid),
        slack_and_sink(box_port, sink_port) as (box, sink),
    ):
        env = serve_env(
            box,
            vertex=vertex,
            targets=["bench-project/us-central1"],
            database=f"sqlite+aiosqlite:///{folder / 'bench.db'}",
            sweep_interval=1,
            CLUSTERBOT_SLURM_API_VERSION="v0.0.42",
        )
        with serve_and_bare(env, serve_port, bare_port):
            secret = env["SLACK_SIGNING_SECRET"]
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                await until(lambda: sweeps_done(session, serve_url), 1)
                for rate in RATES:
                    await _blocks(results, session, rate, secret, sink, serve_url, bare_port)
                read = [e for e in call(f"{vertex}/_sim/requests")["requests"] if PATH in str(e)]
                results.add("big queue", "queue reads by serve's sweeps", len(read), "reads")


async def _blocks(
    results: Results,
    session: aiohttp.ClientSession,
    rate: float,
    secret: str,
    sink: str,
    serve_url: str,
    bare_port: int,
) -> None:
    timings: dict[str, list[float]] = {"serve": [], "bare": []}
    for _ in range(BLOCKS):
        before = await sweeps_done(session, serve_url)
        serve_url_events = f"{serve_url}/slack/events"
        timings["serve"] += await open_loop(session, serve_url_events, secret, sink, BLOCK, rate)
        ended = await sweeps_done(session, serve_url) - before
        assert ended >= 1, f"no sweep ended during a block of commands at {rate:g}/s"
        bare_events = f"http://127.0.0.1:{bare_port}/slack/events"
        timings["bare"] += await open_loop(session, bare_events, secret, sink, BLOCK, rate)
    p99 = {name: percentile(t, 0.99) for name, t in timings.items()}
    topic = f"at {rate:g}/s"
    acked = len(timings["serve"]) + len(timings["bare"])
    results.add("big queue", f"{topic}: commands acked, serve and bare", acked, "cmds")
    serve_ms = p99["serve"] * 1000
    results.add("big queue", f"{topic}: serve p99 ack while sweeping", serve_ms, "ms", at_most=200)
    results.add("big queue", f"{topic}: bare Bolt p99 ack", p99["bare"] * 1000, "ms")
    ratio = p99["serve"] / p99["bare"]
    note = "serve decodes 39 MB a second meanwhile, in slices of 5 ms"
    results.add("big queue", f"{topic}: p99 serve while sweeping / bare", ratio, "x", note=note)
