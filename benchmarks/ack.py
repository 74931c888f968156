"""Slash commands against `clusterbot serve` and a bare Bolt app that only acks, closed loop.

Each runs in its own process, both verify Slack's signature, both use the sandbox's valid bot
token; replies go to a sink in a process of its own, which counts them. Rounds are
interleaved (the order rotates), each after a warm-up and a pause; a round counts only once
every command it sent was answered (the replies at the sink, or the bare app's own count).
CPU per request is read from ``/proc`` for each server process.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import aiohttp

from benchmarks.harness import (
    Results,
    call,
    cpu_seconds,
    heading,
    percentile,
    serve_and_bare,
    serve_env,
    slack_and_sink,
)
from bot.sandbox.slack.delivery import signed_headers
from tests.support.ports import free_port

SENDERS = 50
PER_SENDER = 20
ROUNDS = 6
WARMUP = 200
PAUSE = 1.0


def command_body(text: str, response_url: str) -> str:
    return urlencode(
        {
            "command": "/cluster",
            "text": text,
            "user_id": "U0CAROL",
            "user_name": "carol",
            "channel_id": "C0MLINFRA",
            "channel_name": "ml-infra",
            "team_id": "T0DEMO",
            "team_domain": "clusterbot-demo",
            "api_app_id": "A0CLUSTERBOT",
            "response_url": response_url,
            "trigger_id": "1.2.3",
            "token": "x",
        }
    )


async def send(
    session: aiohttp.ClientSession, url: str, secret: str, text: str, sink: str
) -> tuple[float, bool]:
    """The time to the ack, and whether the ack's body carried the answer (Slack shows it
    as the reply: https://api.slack.com/interactivity/slash-commands#responding_to_commands)."""
    body = command_body(text, f"{sink}/r/{uuid.uuid4().hex}")
    headers = signed_headers(secret, body, "application/x-www-form-urlencoded")
    started = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as reply:
        answer = await reply.read()
        assert reply.status == 200, reply.status
    elapsed = time.perf_counter() - started
    return elapsed, bool(answer.strip()) and json.loads(answer).get("text") is not None


class Sent:
    """Commands sent, their times to the ack, and how many were answered in the ack."""

    def __init__(self) -> None:
        self.timings: list[float] = []
        self.in_ack = 0

    def add(self, outcome: tuple[float, bool]) -> None:
        self.timings.append(outcome[0])
        self.in_ack += outcome[1]


async def closed_loop(url: str, secret: str, text: str, sink: str, per_sender: int) -> Sent:
    sent = Sent()

    async def sender(session: aiohttp.ClientSession) -> None:
        for _ in range(per_sender):
            sent.add(await send(session, url, secret, text, sink))

    connector = aiohttp.TCPConnector(limit=SENDERS)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(sender(session) for _ in range(SENDERS)))
    return sent


def counted(counter: str) -> Callable[[], int]:
    """How many answers the sink at ``counter`` has had, asked anew at each call."""
    return lambda: int(call(counter)["count"])


async def answered(count: Callable[[], int], wanted: int, limit: float = 120.0) -> None:
    """Wait until ``wanted`` answers arrived: the proof the listener really ran."""
    deadline = time.monotonic() + limit
    while count() < wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {count()} of {wanted} commands were answered")
        await asyncio.sleep(0.1)


def stack_env(box: str, folder: Path) -> dict[str, str]:
    return serve_env(
        box,
        vertex=f"{box}/vertex",
        targets=["demo-project/us-central1", "demo-project/europe-west4"],
        database=f"sqlite+aiosqlite:///{folder / 'bench.db'}",
        sweep_interval=3600,
    )


async def run(results: Results) -> None:
    heading(
        f"slash commands, closed loop: {SENDERS} senders x {PER_SENDER} each, {ROUNDS} rounds "
        "interleaved, loopback"
    )
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-ack-bench-"))
    box_port, sink_port, serve_port, bare_port = (free_port() for _ in range(4))
    with slack_and_sink(box_port, sink_port) as (box, sink):
        env = stack_env(box, folder)
        with serve_and_bare(env, serve_port, bare_port) as (serve, bare):
            await measure(
                results,
                env["SLACK_SIGNING_SECRET"],
                sink,
                serve.pid,
                bare.pid,
                serve_port,
                bare_port,
            )


async def measure(
    results: Results,
    secret: str,
    sink: str,
    serve_pid: int,
    bare_pid: int,
    serve_port: int,
    bare_port: int,
) -> None:
    kinds = {
        "bare Bolt app, ack only": (
            bare_port,
            "help",
            bare_pid,
            f"http://127.0.0.1:{bare_port}/count",
        ),
        "clusterbot serve, /cluster help": (serve_port, "help", serve_pid, f"{sink}/count"),
        "clusterbot serve, /cluster list": (serve_port, "list", serve_pid, f"{sink}/count"),
    }
    timings: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, float] = dict.fromkeys(kinds, 0.0)
    sent: dict[str, int] = dict.fromkeys(kinds, 0)
    in_ack: dict[str, int] = dict.fromkeys(kinds, 0)
    for port, text, _pid, counter in kinds.values():  # warm-up
        before = call(counter)["count"]
        warm = await closed_loop(
            f"http://127.0.0.1:{port}/slack/events", secret, text, sink, WARMUP // SENDERS
        )
        await answered(counted(counter), before + WARMUP - warm.in_ack)
    order = list(kinds)
    for round_number in range(ROUNDS):
        rotated = order[round_number % len(order) :] + order[: round_number % len(order)]
        for name in rotated:
            port, text, pid, counter = kinds[name]
            before = call(counter)["count"]
            cpu_before = cpu_seconds(pid)
            taken = await closed_loop(
                f"http://127.0.0.1:{port}/slack/events", secret, text, sink, PER_SENDER
            )
            wanted = before + len(taken.timings) - taken.in_ack
            await answered(counted(counter), wanted)
            cpu[name] += cpu_seconds(pid) - cpu_before
            timings[name] += taken.timings
            sent[name] += len(taken.timings)
            in_ack[name] += taken.in_ack
            await asyncio.sleep(PAUSE)
    bare = "bare Bolt app, ack only"
    for name in kinds:
        results.add(
            "ack",
            f"{name}: answered",
            sent[name],
            "cmds",
            note=f"{in_ack[name]} in the ack's body, the others counted where they arrived",
        )
        results.add("ack", f"{name}: p50 ack", percentile(timings[name], 0.5) * 1000, "ms")
        results.add("ack", f"{name}: p99 ack", percentile(timings[name], 0.99) * 1000, "ms")
        results.add("ack", f"{name}: server CPU a command", cpu[name] / sent[name] * 1000, "ms")
    bare_cpu = cpu[bare] / sent[bare]
    help_cpu = cpu["clusterbot serve, /cluster help"] / sent["clusterbot serve, /cluster help"]
    results.add("ack", "CPU a /cluster help / bare Bolt", help_cpu / bare_cpu, "x", at_most=2.0)
    p99_bare = percentile(timings[bare], 0.99)
    for name in ("clusterbot serve, /cluster help", "clusterbot serve, /cluster list"):
        results.add(
            "ack",
            f"p99 {name.split(', ')[1]} / bare, closed loop",
            percentile(timings[name], 0.99) / p99_bare,
            "x",
        )
