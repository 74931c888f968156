"""Slash-command ack latency: `clusterbot serve` against a bare Bolt app that only acks.

Both run in their own process with the same signature check and the same Slack stand-in;
50 concurrent senders post signed `/cluster` commands over loopback and time each HTTP answer.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from benchmarks.process import free_port
from bot.sandbox.slack.delivery import signed_headers

SENDERS = 50
PER_SENDER = 40
WARMUP = 100
SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench"


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # answering at all is ready
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up") from None
            time.sleep(0.2)


async def sink() -> tuple[web.AppRunner, str]:
    """Where response_url posts go, so that replies after the ack cost what they cost."""

    async def accept(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/r", accept)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/r"


async def hammer(url: str, text: str, response_url: str, count: int) -> list[float]:
    body = urlencode(
        {
            "command": "/cluster",
            "text": text,
            "user_id": "U0BENCH",
            "user_name": "bench",
            "channel_id": "C0MLINFRA",
            "channel_name": "ml-infra",
            "team_id": "T0DEMO",
            "team_domain": "bench",
            "api_app_id": "A0",
            "response_url": response_url,
            "trigger_id": "1.2.3",
            "token": "x",
        }
    )
    timings: list[float] = []

    async def sender(session: aiohttp.ClientSession, n: int) -> None:
        for _ in range(n):
            headers = signed_headers(SECRET, body, "application/x-www-form-urlencoded")
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as reply:
                await reply.read()
                assert reply.status == 200, reply.status
            timings.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(limit=SENDERS)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(sender(session, count) for _ in range(SENDERS)))
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run() -> None:
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-bench-"))
    stand_in_port, serve_port, bare_port = free_port(), free_port(), free_port()
    stand_in = f"http://127.0.0.1:{stand_in_port}"
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "CLUSTERBOT_TARGETS": "demo-project/us-central1,demo-project/europe-west4",
        "CLUSTERBOT_SLACK_API_URL": f"{stand_in}/api/",
        "CLUSTERBOT_VERTEX_API_URL": f"{stand_in}/vertex",
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "bench",
        "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'bench.db'}",
    }
    processes = [
        # the demo hosts the Slack stand-in (/api/) and the simulator (/vertex) for both apps
        start([sys.executable, "-m", "bot", "demo", "--port", str(stand_in_port)], env),
        start([sys.executable, "-m", "bot", "serve"], {**env, "PORT": str(serve_port)}),
        start([sys.executable, "-m", "benchmarks.bare_bolt", str(bare_port)], env),
    ]
    runner = None
    try:
        wait_ready(f"{stand_in}/healthz", processes[0])
        wait_ready(f"http://127.0.0.1:{serve_port}/healthz", processes[1])
        wait_ready(f"http://127.0.0.1:{bare_port}/slack/events", processes[2])
        runner, response_url = await sink()
        results = {}
        for name, port, text in (
            ("bare Bolt app (ack only)", bare_port, "help"),
            ("clusterbot serve, /cluster help", serve_port, "help"),
            ("clusterbot serve, /cluster list", serve_port, "list"),
        ):
            url = f"http://127.0.0.1:{port}/slack/events"
            await hammer(url, text, response_url, WARMUP // SENDERS or 1)
            results[name] = await hammer(url, text, response_url, PER_SENDER)
    finally:
        if runner is not None:
            await runner.cleanup()
        for process in processes:
            process.terminate()
            process.wait(timeout=15)
    print(
        f"\nslash-command ack latency, {SENDERS} concurrent senders x {PER_SENDER} requests, "
        "loopback"
    )
    baseline = None
    for name, timings in results.items():
        p50, p99 = percentile(timings, 0.50) * 1000, percentile(timings, 0.99) * 1000
        mean = statistics.mean(timings) * 1000
        baseline = baseline or p99
        print(
            f"  {name:<34} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   mean {mean:6.1f} ms   "
            f"p99 ratio {p99 / baseline:4.2f}x"
        )
    print("  target: p99 of clusterbot serve within 1.25x of the bare app")
