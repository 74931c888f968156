"""How long ``clusterbot serve`` takes from its start to ``/readyz`` answering ready, against a
bare Bolt app from its start to answering at all: rounds interleaved, the median of each
(goal: serve ready within 1.5 s).

Both run against the same Slack stand-in, and serve against a small control plane in a
process of its own, on a SQLite database migrated beforehand (as a deploy runs ``clusterbot
migrate`` before the replicas start). A round counts only when ``/readyz`` said every part
ready: the database, the scheduler, accepting, and the credentials."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from benchmarks.harness import Results, heading, processes, python, serve_env, slack_and_sink
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from tests.support.ports import free_port

ROUNDS = 7
LIMIT = 60.0


def ready_after(url: str, process: subprocess.Popen[bytes], started: float) -> float:
    """Seconds from ``started`` to ``url`` answering 200; ``/readyz``'s body must say ready."""
    deadline = started + LIMIT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                body = reply.read()
            took = time.perf_counter() - started
            if url.endswith("/readyz"):
                said = json.loads(body)
                assert all(said[k] is True for k in ("database", "scheduler", "credentials")), said
            return took
        except urllib.error.HTTPError:
            pass  # answering, not ready yet
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{url}: the process ended before it was ready") from None
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{url} was not ready within {LIMIT:g} s")
        time.sleep(0.01)


def once(command: list[str], env: dict[str, str], url: str) -> float:
    started = time.perf_counter()
    with processes((command, env)) as (process,):
        return ready_after(url, process, started)


def run(results: Results) -> None:
    heading(f"start to ready: clusterbot serve's /readyz against a bare Bolt app, {ROUNDS} rounds")
    targets, fixtures = fleet(1, 10)
    with (
        tempfile.TemporaryDirectory() as folder,
        simulator_process(fixtures) as (vertex, _pid),
        slack_and_sink(free_port(), free_port()) as (box, _sink),
    ):
        database = f"sqlite+aiosqlite:///{Path(folder) / 'ready.db'}"
        env = serve_env(box, vertex=vertex, targets=targets, database=database)
        subprocess.run(python("-m", "bot", "migrate"), env=env, check=True, capture_output=True)
        serve, bare = [], []
        for _ in range(ROUNDS):
            port = free_port()
            serve_url = f"http://127.0.0.1:{port}/readyz"
            serve.append(once(python("-m", "bot", "serve"), {**env, "PORT": str(port)}, serve_url))
            port = free_port()
            bare_command = python("-m", "benchmarks.bare_bolt", str(port))
            bare.append(once(bare_command, env, f"http://127.0.0.1:{port}/count"))
    s, b = statistics.median(serve), statistics.median(bare)
    results.add("startup", "start to /readyz ready, serve (median)", s, "s", at_most=1.5)
    results.add("startup", "start to answering, bare Bolt app (median)", b, "s")
    results.add("startup", "serve ready / bare Bolt answering", s / b, "x")
