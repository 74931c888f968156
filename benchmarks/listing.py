"""`/cluster list` of 1,000 clusters over 10 targets through `clusterbot serve` at default
settings, from the signed command to the reply arriving at the response_url (a sink in its
own process), every control-plane call 50 ms slow.

Two floors are printed beside it. Latency alone: the list pages of one target go one after
another, the targets at once. And what this machine's stand-in takes to hand over every page
when nothing reads them (raw GETs of all targets at once, interleaved with the commands):
the simulator is one Python process that writes the pages one after another, which the real
service does not, so that is the critical path a bot can be held to here. A command counts
only if its reply arrived and listed every cluster.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

from benchmarks.ack import command_body
from benchmarks.harness import (
    Results,
    call,
    heading,
    processes,
    python,
    serve_env,
    wait_ready,
)
from benchmarks.process import simulator_process
from bot.sandbox.controlplane.wire import camelize
from bot.sandbox.slack.delivery import signed_headers
from handlers.costs import PriceBook, money
from handlers.domain.names import Target
from tests.support.ports import free_port

CLUSTERS = 1000
TARGETS = 10
LATENCY_MS = 50
PAGE = 100
RUNS = 12
# every cluster has 2 a3-ultragpu-8g nodes and its n2-standard-8 login node, all priced
_PRICES = PriceBook.with_overrides().prices
TOTAL = money(CLUSTERS * (2 * _PRICES["a3-ultragpu-8g"] + _PRICES["n2-standard-8"]))


def fixture_cluster(target: Target, index: int) -> dict[str, object]:
    cluster: dict[str, object] = camelize(
        {
            "name": f"{target.parent}/modelDevelopmentClusters/c{index:04d}",
            "node_pools": [
                {
                    "id": "gpu",
                    "machine_spec": {"machine_type": "a3-ultragpu-8g"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2},
                    "provisioning_model": "ON_DEMAND",
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
    return cluster


def fleet(targets: int, clusters: int) -> tuple[list[Target], dict[str, list[dict[str, object]]]]:
    """``targets`` simulated targets, and the simulator's fixtures: ``clusters`` clusters
    spread evenly over them."""
    where = [Target(f"bench-project-{n}", "us-central1") for n in range(targets)]
    per_target = clusters // targets
    return where, {"clusters": [fixture_cluster(t, i) for t in where for i in range(per_target)]}


async def run(results: Results) -> None:
    heading(
        f"/cluster list of {CLUSTERS:,} clusters over {TARGETS} targets through clusterbot "
        f"serve, {LATENCY_MS} ms a call, default settings, {RUNS} commands one after another"
    )
    targets, fixtures = fleet(TARGETS, CLUSTERS)
    per_target = CLUSTERS // TARGETS
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-list-bench-"))
    box_port, sink_port, serve_port = free_port(), free_port(), free_port()
    box, sink = f"http://127.0.0.1:{box_port}", f"http://127.0.0.1:{sink_port}"
    with (
        simulator_process(fixtures, page_max=PAGE) as (vertex, _pid),
        processes(
            (python("-m", "bot", "sandbox", "--port", str(box_port)), dict(os.environ)),
            (python("-m", "benchmarks.sink", str(sink_port)), dict(os.environ)),
        ) as (box_process, sink_process),
    ):
        call(f"{vertex}/_sim/faults", {"method": "GET", "latency_ms": LATENCY_MS})
        wait_ready(f"{box}/sandbox/api/config", box_process)
        wait_ready(f"{sink}/count", sink_process)
        env = serve_env(
            box,
            vertex=vertex,
            targets=targets,
            database=f"sqlite+aiosqlite:///{folder / 'bench.db'}",
            PORT=str(serve_port),
        )
        with processes((python("-m", "bot", "serve"), env)) as (serve,):
            wait_ready(f"http://127.0.0.1:{serve_port}/healthz", serve)
            url = f"http://127.0.0.1:{serve_port}/slack/events"
            took, floors = await commands(url, env["SLACK_SIGNING_SECRET"], sink, vertex, targets)
    latency_only = -(-per_target // PAGE) * LATENCY_MS / 1000
    median, floor = statistics.median(took), statistics.median(floors)
    results.add("listing", "command to reply (median)", median * 1000, "ms")
    results.add("listing", "latency alone (list pages in turn)", latency_only * 1000, "ms")
    results.add("listing", "every page fetched raw, nothing read (median)", floor * 1000, "ms")
    results.add("listing", "command to reply / latency alone", median / latency_only, "x")
    results.add("listing", "command to reply / pages fetched raw", median / floor, "x", at_most=1.3)


async def raw_pages(session: aiohttp.ClientSession, vertex: str, targets: list[Target]) -> float:
    """Every target's pages fetched at once, unread: the stand-in's own share of a listing."""

    async def fetch(target: Target) -> None:
        url = f"{vertex}/v1beta1/{target.parent}/modelDevelopmentClusters"
        token = ""
        while True:
            params = {"pageSize": str(PAGE), **({"pageToken": token} if token else {})}
            headers = {"Authorization": "Bearer bench"}
            async with session.get(url, params=params, headers=headers) as reply:
                body = await reply.read()
            marker = b'"nextPageToken": "'
            if marker not in body:
                return
            token = body.split(marker, 1)[1].split(b'"', 1)[0].decode()

    started = time.perf_counter()
    await asyncio.gather(*(fetch(t) for t in targets))
    return time.perf_counter() - started


async def commands(
    url: str, secret: str, sink: str, vertex: str, targets: list[Target]
) -> tuple[list[float], list[float]]:
    took: list[float] = []
    floors: list[float] = []
    async with aiohttp.ClientSession() as session:
        for index in range(RUNS + 2):  # the first two warm up
            floor = await raw_pages(session, vertex, targets)
            name = f"k_{uuid.uuid4().hex}"
            body = command_body("list", f"{sink}/r/{name}")
            headers = signed_headers(secret, body, "application/x-www-form-urlencoded")
            sent = time.time()
            async with session.post(url, data=body, headers=headers) as reply:
                assert reply.status == 200, reply.status
            arrived = await until_answered(session, sink, name)
            async with session.get(f"{sink}/kept/{name}") as kept:
                text = await kept.text()
            assert f"Clusters ({CLUSTERS})" in text, "the reply did not list every cluster"
            assert f"Estimated total {TOTAL} " in text, "the reply did not price every cluster"
            if index >= 2:
                took.append(arrived - sent)
                floors.append(floor)
    return took, floors


async def until_answered(session: aiohttp.ClientSession, sink: str, name: str) -> float:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        async with session.get(f"{sink}/times") as reply:
            arrived = (await reply.json()).get(name)
        if arrived is not None:
            return float(arrived)
        await asyncio.sleep(0.02)
    raise RuntimeError("the list was never answered")
