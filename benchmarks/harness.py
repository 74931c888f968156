"""What every benchmark shares: processes on loopback, their CPU and memory read from
``/proc``, percentiles, and the results table printed beside each goal and kept in
``bench.json``. A figure is recorded only by a benchmark that first checked its own work."""

from __future__ import annotations

import itertools
import json
import os
import platform
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
_logs = itertools.count(1)  # numbers the processes' log files


_THREADS: dict[tuple[int, int], float] = {}  # (pid, tid): the CPU last read of each thread


def cpu_seconds(pid: int) -> float:
    """CPU a process's threads have used, to the nanosecond (the first field of each
    ``/proc/PID/task/TID/schedstat``), a thread that ended counted at its last reading (a
    connection's worker thread takes its CPU with it); where the kernel keeps no schedstat,
    utime + stime from ``/proc/PID/stat``, in 10 ms ticks, too coarse for 1 s samples of a
    few %."""
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                used = int((task / "schedstat").read_text().split()[0]) / 1e9
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
            _THREADS[pid, int(task.name)] = used
        return sum(used for (owner, _tid), used in _THREADS.items() if owner == pid)
    except (FileNotFoundError, NotADirectoryError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmRSS``) or at its peak (``VmHWM``, which unlike
    ``ru_maxrss`` is not carried over from the process that started it)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wait_ready(url: str, process: subprocess.Popen[bytes], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # answering at all is ready
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up") from None
            time.sleep(0.1)


def call(url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        text = reply.read()
    return json.loads(text) if text else None


@contextmanager
def processes(
    *commands: tuple[list[str], dict[str, str]],
) -> Iterator[list[subprocess.Popen[bytes]]]:
    logs = os.environ.get("BENCH_LOGS")  # a folder: each process's stderr kept there
    started = []
    for cmd, env in commands:
        err: Any = subprocess.DEVNULL
        if logs:
            Path(logs).mkdir(parents=True, exist_ok=True)
            err = open(Path(logs) / f"{next(_logs)}-{'-'.join(cmd[2:4])}.log", "ab")  # noqa: SIM115
        started.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err))
    try:
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def serve_env(
    box: str,
    *,
    vertex: str,
    targets: Sequence[object],
    database: str,
    sweep_interval: int = 86400,
    **extra: str,
) -> dict[str, str]:
    """The environment of a ``clusterbot serve`` against the Slack stand-in at ``box`` (its
    own token and signing secret) and the control plane at ``vertex``."""
    config = call(f"{box}/sandbox/api/config")
    return {
        **os.environ,
        "SLACK_BOT_TOKEN": config["bot_token"],
        "SLACK_SIGNING_SECRET": config["signing_secret"],
        "CLUSTERBOT_TARGETS": ",".join(str(t) for t in targets),
        "CLUSTERBOT_SLACK_API_URL": f"{box}/api/",
        "CLUSTERBOT_VERTEX_API_URL": vertex,
        "CLUSTERBOT_MONITORING_API_URL": vertex,
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "bench",
        "CLUSTERBOT_DATABASE_URL": database,
        "CLUSTERBOT_SWEEP_INTERVAL": str(sweep_interval),
        "CLUSTERBOT_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
        **extra,
    }


def _spin() -> float:
    started = time.process_time()
    sum(i * i for i in range(20_000))
    return time.process_time() - started


def cold_cost_ratio(rounds: int = 8) -> float:
    """What the same pure-Python work costs after a second asleep against back to back (the
    median of each). Work that wakes once a second, as a tracker tick does, is charged this
    much more CPU on this machine (caches, clock speed) than a busy loop's figures suggest."""
    warm = [_spin() for _ in range(rounds * 4)]
    cold = []
    for _ in range(rounds):
        time.sleep(1.0)
        cold.append(_spin())
    return percentile(cold, 0.5) / percentile(warm, 0.5)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


@contextmanager
def slack_and_sink(box_port: int, sink_port: int) -> Iterator[tuple[str, str]]:
    """The Slack stand-in and the reply sink, each in a process of its own and answering:
    their URLs."""
    box, sink = f"http://127.0.0.1:{box_port}", f"http://127.0.0.1:{sink_port}"
    with processes(
        (python("-m", "bot", "sandbox", "--port", str(box_port)), dict(os.environ)),
        (python("-m", "benchmarks.sink", str(sink_port)), dict(os.environ)),
    ) as (box_process, sink_process):
        wait_ready(f"{box}/sandbox/api/config", box_process)
        wait_ready(f"{sink}/count", sink_process)
        yield box, sink


@contextmanager
def serve_and_bare(
    env: dict[str, str], serve_port: int, bare_port: int
) -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """``clusterbot serve`` and the bare Bolt app, with the same environment, both answering."""
    with processes(
        (python("-m", "bot", "serve"), {**env, "PORT": str(serve_port)}),
        (python("-m", "benchmarks.bare_bolt", str(bare_port)), env),
    ) as (serve, bare):
        wait_ready(f"http://127.0.0.1:{serve_port}/healthz", serve)
        wait_ready(f"http://127.0.0.1:{bare_port}/count", bare)
        yield serve, bare


@dataclass
class Figure:
    benchmark: str
    name: str
    value: float
    unit: str
    goal: str = ""
    met: bool | None = None  # None: shown for context, no goal
    note: str = ""


@dataclass
class Results:
    figures: list[Figure] = field(default_factory=list)

    def add(
        self,
        benchmark: str,
        name: str,
        value: float,
        unit: str,
        *,
        at_most: float | None = None,
        goal: str = "",
        note: str = "",
    ) -> Figure:
        met = None if at_most is None else value <= at_most
        if at_most is not None and not goal:
            goal = f"<= {at_most:g} {unit}".strip()
        figure = Figure(benchmark, name, value, unit, goal, met, note)
        self.figures.append(figure)
        shown = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        verdict = "" if met is None else ("  met" if met else "  NOT MET")
        goal_text = f"  goal {goal}" if goal else ""
        print(f"  {name:<58} {shown:>10} {unit:<6}{goal_text}{verdict}", flush=True)
        return figure

    def save(self, path: Path = ROOT / "bench.json") -> None:
        document = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "figures": [asdict(f) for f in self.figures],
        }
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nwrote {path}")


def heading(text: str) -> None:
    print(f"\n{text}", flush=True)


Check = Callable[[], None]
