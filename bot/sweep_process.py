"""Scheduled idle sweeps in a process of their own, so that they never hold up an ack.

A sweep of thousands of clusters makes tens of thousands of control-plane calls and reads
megabytes of Slurm replies. On the service's event loop every Slack request waits its turn
behind that work (asyncio runs the callbacks that are ready one after another, with no
priority), however finely the sweep is cut. In a child process the operating system shares
the CPU instead, a second core does the sweep, and the event loop is left to Slack and to
the tracker. The memory a sweep touches is given back when the child exits.

The parent hands the child its settings and policy, pickled, on the child's stdin, and keeps
that pipe open: the child stops (and gives its lease back) when it reads end-of-file, so it
never outlives the service, whatever ends it; a stop that hangs is ended by the child's own
alarm ``STOP_GRACE`` seconds later. The child sweeps as the replica itself, under
the replica's id: the replica's heartbeat keeps the sweep's lease, a restarted replica frees
it, and the replica's lock keeps its own sweeps one at a time. The child writes one JSON line
on stdout, the summary the service's metrics keep; its log lines go where the service's go.

``python -m bot.sweep_child`` is the child (``bot/sweep_child.py``); it is started only by
the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pickle
import signal
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.settings import Settings
from handlers.health.alerts import EPISODES
from handlers.policy import Policy
from handlers.sweep.health import ClusterHealth
from handlers.sweep.report import SweepReport
from handlers.sweep.rules import Status
from handlers.sweep.sweep import SWEEP_LEASE

log = logging.getLogger(__name__)
LENGTH = 8  # bytes of the payload's length, before the payload
NICENESS = 10  # added to the service's: the sweep is batch work beside interactive work
STOP_GRACE = 10.0  # seconds a child has to give its lease back once told to stop; then it ends


class SweepProcessError(Exception):
    """The child ended without a summary; the message says how, in one line."""


@dataclass(frozen=True)
class SweepSummary:
    """What the service keeps of a sweep made elsewhere (the report itself is in the
    database, where ``/cluster idle`` and the Home tab read it)."""

    clusters: int
    alerts: int
    idle: int
    idle_cost: float
    seconds: float
    targets: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)  # target -> why
    unhealthy: list[tuple[str, str, int]] = field(default_factory=list)  # cluster, what, nodes
    episodes: dict[str, int] = field(default_factory=dict)  # health episodes opened, healed

    @classmethod
    def of(cls, report: SweepReport) -> SweepSummary:
        idle = [e for e in report.entries if e.status == Status.IDLE]
        return cls(
            clusters=len(report.entries),
            alerts=report.alerts,
            idle=len(idle),
            idle_cost=sum(e.cost_hour or 0.0 for e in idle),
            seconds=report.finished - report.started,
            targets=report.targets,
            unreadable=dict(report.unreadable_targets),
            unhealthy=unhealthy(report),
            episodes=dict(report.tallies.get(EPISODES, {})),
        )


def unhealthy(report: SweepReport) -> list[tuple[str, str, int]]:
    """The broken nodes of each cluster, counted by what is wrong with them."""
    counted: Counter[tuple[str, str]] = Counter()
    for entry in report.entries:
        if entry.health:
            for node in ClusterHealth.from_dict(entry.health).nodes:
                counted[entry.cluster_id, str(node.trouble)] += 1
    return [(cluster, what, count) for (cluster, what), count in sorted(counted.items())]


def shareable(database_url: str) -> bool:
    """Whether another process can open the same database (an in-memory SQLite cannot)."""
    if not database_url.startswith("sqlite"):
        return True
    path = database_url.split(":///", 1)[1] if ":///" in database_url else ""
    return bool(path) and path != ":memory:" and "mode=memory" not in path


class SweepProcess:
    """Runs one sweep at a time in a child process and returns its summary."""

    def __init__(
        self,
        settings: Settings,
        policy: Policy,
        owner: str,
        *,
        lock: asyncio.Lock,
        free: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.owner = owner
        self.lock = lock  # the sweeper's own: an inline sweep and a child never overlap
        self.free = free  # gives a named lease of the replica's back (``Store.free_lease``)
        self.started = 0  # children started (the tests read it)
        self.child: asyncio.subprocess.Process | None = None

    async def sweep(self, *, force: bool = False) -> SweepSummary | None:
        """One sweep in a child; None when it did not sweep (another replica is sweeping,
        or, ``force`` aside, one swept less than an interval ago)."""
        async with self.lock:
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.sweep_child",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            self.child, self.started = child, self.started + 1
            assert child.stdin is not None and child.stdout is not None
            try:
                order = (self.settings, self.policy, self.owner, force, STOP_GRACE)
                payload = pickle.dumps(order)
                child.stdin.write(len(payload).to_bytes(LENGTH, "big") + payload)
                await child.stdin.drain()
                out = await child.stdout.read()  # until the child exits
                code = await child.wait()
            except asyncio.CancelledError:
                await self._stop(child)
                raise
            finally:
                child.stdin.close()
                self.child = None
        if code != 0 or not out.strip():
            raise SweepProcessError(f"the sweep's process ended with exit code {code}")
        answer = json.loads(out.decode().strip().splitlines()[-1])
        return SweepSummary(**answer["summary"]) if answer["summary"] else None

    async def _stop(self, child: asyncio.subprocess.Process) -> None:
        """Ask the child to stop (it gives its lease back), and end it if it does not."""
        if child.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(child.wait(), STOP_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
            # it sweeps as this replica: its lease is given back here, and the next sweep,
            # by any replica, does not wait for it to lapse
            try:
                await self.free(SWEEP_LEASE, self.owner)
            except Exception as error:
                log.warning("the killed sweep's lease will lapse instead: %s", error)
        log.info("the idle sweep was stopped with the service; the next one starts over")
