"""A replayed week of a seven-cluster fleet, swept every 15 minutes on a manual clock: the core
(sweeper, idle rules, alerts, spend ledger in SQLite) reading the simulator's slurmrestd over
loopback HTTP, each cluster in one of the situations Slurm shows:

- ``held01``: only held jobs (JobHeldUser): idle all week;
- ``resv01``: a job waiting for a reservation that starts at 30 h: demand from 28 h (the idle
  threshold ahead of it) until the job is gone at 40 h;
- ``maint01``: a job, then a 10 h maintenance window over every node with a job held up by
  it (ReqNodeNotAvail, "Reserved for maintenance"), then the job again, then nothing;
- ``limit01``: jobs Slurm will never start as asked (PartitionTimeLimit, then an account out
  of GPU-minutes, AssocGrpGRESMinutes): idle all week;
- ``stuck01``: a job held up by a down and a drained node until they are resumed at 60 h,
  then it runs until 80 h;
- ``salloc01``: an allocation of both nodes whose GPUs work for an hour and then do nothing
  (its person left a notebook open) until it ends at 100 h: idle once its GPUs have stayed
  under the threshold for the policy's window, an hour, from Cloud Monitoring's metrics;
- ``busy01``: jobs coming and going by a seeded trace (busy spells of 1 to 12 h, gaps of 15
  min to 1.5 h or of 2.5 to 8 h), or, with ``CLUSTERBOT_WEEK_TRACE=FILE.swf``, by the first
  week of a workload trace in the Standard Workload Format (the Parallel Workloads Archive's).

Each sweep is checked against the truth of that moment. The figures: sweeps falsely busy and
falsely idle (goal 0), channel messages per idle period (goal 1), and the idle dollars the
ledger kept against the true idle node-hours at list price (goal within 5 %).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web

from benchmarks.harness import Results, heading
from bot.calendar import CronCalendar
from bot.charts import AggCharts
from bot.sandbox.controlplane import Durations
from bot.sandbox.controlplane.server import create_app
from bot.sandbox.controlplane.state import SimulatorState
from bot.store import IdleRecords, StoreKeeper
from bot.store.store import Store
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.monitoring import GpuMetrics
from bot.vertex.slurm import SlurmReader
from handlers.capability import Options, Ports
from handlers.costs import PriceBook
from handlers.domain.names import Target
from handlers.policy import Policy
from handlers.schedules.capability import CALENDAR
from handlers.services import build
from handlers.spend.capability import CHARTS, SPEND, SPEND_LEDGER
from handlers.sweep.rules import Status
from tests.support.factories import cluster_doc
from tests.support.fakes import FakeMessenger
from tests.support.memory import PolicyRoles
from tests.support.ports import free_port
from tests.support.text_adapter import TextPeople

H = 3600.0
SWEEP = 15 * 60.0
WEEK = 168 * H
IDLE_AFTER = 2 * H
ALERTS = "C0ALERTS"
# an idle period earns an alert when its first and last idle sweeps are idle_after apart
ALERTED = (IDLE_AFTER + SWEEP) / H
TARGET = "demo-project/us-central1"
START = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
PARENT = "projects/demo-project/locations/us-central1/modelDevelopmentClusters"

Jobs = list[dict[str, Any]]


@dataclass
class Situation:
    """One cluster's week: at each hour in ``phases``, what Slurm lists from then on, and
    when it is truly busy (``busy``: [start, end) hours)."""

    cluster: str
    phases: dict[float, dict[str, Any]]
    busy: list[tuple[float, float]]

    def truth(self, hours: float) -> bool:
        return any(start <= hours < end for start, end in self.busy)

    def idle_periods(self) -> list[tuple[float, float]]:
        """The truly idle spells, in hours."""
        edges, at = [], 0.0
        for start, end in sorted(self.busy):
            if start > at:
                edges.append((at, start))
            at = max(at, end)
        if at < WEEK / H:
            edges.append((at, WEEK / H))
        return edges


def pending(**more: Any) -> dict[str, Any]:
    return {"job_state": "PENDING", "partition": "gpu", "node_count": 1, "user_name": "dana"} | more


def running(**more: Any) -> dict[str, Any]:
    return {"job_state": "RUNNING", "partition": "gpu", "node_count": 1, "user_name": "erin"} | more


def trace(seed: int) -> tuple[dict[float, dict[str, Any]], list[tuple[float, float]]]:
    """Busy spells and gaps by a seeded draw, on the sweep's quarter hours; no gap near the
    idle threshold (1.75 to 2.5 h), where one sweep either way decides an alert."""
    rng = random.Random(seed)
    phases: dict[float, dict[str, Any]] = {}
    busy: list[tuple[float, float]] = []
    at = 0.0
    while at < WEEK / H:
        spell = rng.randint(4, 48) / 4
        busy.append((at, at + spell))
        phases[at] = {"jobs": [running(job_id=int(at * 4) + 1)]}
        at += spell
        gap = rng.randint(1, 6) / 4 if rng.random() < 0.6 else rng.randint(10, 32) / 4
        phases[at] = {"jobs": []}
        at += gap
    return phases, busy


def swf_trace(text: str) -> tuple[dict[float, dict[str, Any]], list[tuple[float, float]]]:
    """The first week of a trace in the Standard Workload Format
    (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): per line, field 2 is the
    submit time, 3 the wait and 4 the run time, in seconds; ``;`` starts a comment and -1
    means unknown. At each quarter hour the cluster lists the jobs waiting then (pending,
    for resources) and running then; a job with no known start never ran and is left out.
    Busy is a quarter hour that lists a job, as a sweep at that moment sees it."""
    spans: list[tuple[float, float, float]] = []
    for line in text.splitlines():
        fields = line.split(";", 1)[0].split()
        if len(fields) < 4:
            continue
        submit, wait, run = (float(f) for f in fields[1:4])
        if submit < 0 or wait < 0 or run < 0:
            continue
        spans.append((submit, submit + wait, submit + wait + run))
    if not spans:
        raise ValueError("the trace lists no job with a known submit, wait and run time")
    origin = min(submit for submit, _, _ in spans)
    spans = [span for span in spans if span[0] < origin + WEEK and span[2] > origin]
    phases: dict[float, dict[str, Any]] = {}
    busy: list[tuple[float, float]] = []
    last: tuple[int, int] | None = None
    for step in range(int(WEEK / SWEEP)):
        at = origin + step * SWEEP
        waiting = sum(1 for submit, start, _ in spans if submit <= at < start)
        running_ = sum(1 for _, start, end in spans if start <= at < end)
        hours = step * SWEEP / H
        if waiting or running_:
            busy.append((hours, hours + SWEEP / H))
        if (waiting, running_) != last:  # the list is bounded: what counts is there being one
            jobs = [pending(job_id=step * 100 + n) for n in range(min(waiting, 20))]
            jobs += [running(job_id=step * 100 + 50 + n) for n in range(min(running_, 20))]
            phases[hours] = {"jobs": jobs}
            last = (waiting, running_)
    return phases, busy


def busy_trace() -> tuple[dict[float, dict[str, Any]], list[tuple[float, float]]]:
    path = os.environ.get("CLUSTERBOT_WEEK_TRACE")
    if not path:
        return trace(7)
    print(f"  busy01 replays the first week of {path}")
    return swf_trace(Path(path).read_text(encoding="utf-8", errors="replace"))


def fleet() -> list[Situation]:
    window = {"name": "maint", "start_time": "now", "end_time": "now+10h", "flags": ["MAINT"]}
    later = {"name": "big-run", "start_time": "now+30h", "end_time": "now+40h"}
    phases, busy = busy_trace()
    return [
        Situation("held01", {0: {"jobs": [pending(hold=True)]}}, []),
        Situation(
            "resv01",
            {
                0: {
                    "jobs": [pending(reservation="big-run", node_count=2)],
                    "reservations": [later | {"node_list": "resv01-gpu-[0-1]"}],
                },
                40: {"jobs": [], "reservations": []},
            },
            [(28.0, 40.0)],
        ),
        Situation(
            "maint01",
            {
                0: {"jobs": [running()]},
                10: {
                    "jobs": [pending()],
                    "reservations": [window | {"node_list": "maint01-gpu-[0-1]"}],
                },
                20: {"jobs": [running()], "reservations": []},
                30: {"jobs": []},
            },
            [(0.0, 10.0), (20.0, 30.0)],
        ),
        Situation(
            "limit01",
            {
                0: {"jobs": [pending(state_reason="PartitionTimeLimit")]},
                50: {"jobs": [pending(state_reason="AssocGrpGRESMinutes")]},
            },
            [],
        ),
        Situation(
            "stuck01",
            {
                0: {
                    "jobs": [pending(node_count=2)],
                    "nodes": {
                        "stuck01-gpu-0": {"state": ["DOWN"], "reason": "Not responding"},
                        "stuck01-gpu-1": {"state": ["IDLE", "DRAIN"], "reason": "Xid 79"},
                    },
                },
                60: {"nodes": {"stuck01-gpu-0": None, "stuck01-gpu-1": None}},
                62: {"jobs": [running(node_count=2)]},
                80: {"jobs": []},
            },
            [(60.0, 80.0)],
        ),
        Situation(
            "salloc01",
            {
                0: {"jobs": [running(node_count=2, user_name="frank", started_ago=0)]},
                # what its GPUs did, published an hour in: at work, then nothing
                1: {"metrics": {f"salloc01-gpu-{n}": [[H, 80], [0, 0]] for n in range(2)}},
                100: {"jobs": []},
            },
            [(0.0, 2.0)],  # its GPUs idle from 1 h, an idle allocation once the window is over
        ),
        Situation("busy01", phases, busy),
    ]


@dataclass
class Clock:
    now: float = field(default_factory=lambda: START.timestamp())

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return START + timedelta(seconds=self.now - START.timestamp())


def apply(state: SimulatorState, situation: Situation, hours: float) -> None:
    phase = situation.phases.get(hours)
    if phase is None:
        return
    name = f"{PARENT}/{situation.cluster}"
    if "nodes" in phase:
        state.set_nodes(name, {"nodes": phase["nodes"]})
    if "reservations" in phase:
        state.set_reservations(name, {"reservations": phase["reservations"]})
    if "jobs" in phase:
        state.set_jobs(name, {"jobs": phase["jobs"]})
    if "metrics" in phase:
        state.gpu.publish(name, {"nodes": phase["metrics"]}, state.wall().timestamp())


async def run(results: Results) -> None:
    heading("A replayed week: seven clusters, each a situation Slurm shows, swept every 15 min")
    situations = fleet()
    clock = Clock()
    state = SimulatorState(
        clock=clock, wall=clock.wall, durations=Durations(create=1, update=1, delete=1)
    )
    docs = []
    for situation in situations:
        doc = cluster_doc(cluster_id=situation.cluster, nodes=2)
        doc["clusterStatus"] = {"state": "RUNNING"}
        docs.append(doc)
    state.load_fixtures({"projects": {"demo-project": 123456789012}, "clusters": docs})
    runner = web.AppRunner(create_app(state))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    with tempfile.TemporaryDirectory() as folder:
        store = Store.from_url(f"sqlite+aiosqlite:///{Path(folder) / 'week.db'}")
        await store.migrate()
        try:
            async with VertexClient(
                StaticToken("bench"), base_url=f"http://127.0.0.1:{port}", clock=clock
            ) as vertex:
                gpus = GpuMetrics(vertex, f"http://127.0.0.1:{port}", book=store, clock=clock)
                await _week(results, situations, state, clock, store, vertex, gpus)
        finally:
            await store.close()
            await runner.cleanup()


async def _week(
    results: Results,
    situations: list[Situation],
    state: SimulatorState,
    clock: Clock,
    store: Store,
    vertex: VertexClient,
    gpus: GpuMetrics,
) -> None:
    policy = Policy.model_validate({"roles": {"approver": ["U0BOB"]}})  # default idle rules
    messenger = FakeMessenger()
    slurm = SlurmReader(vertex=vertex, book=store)
    ports = Ports(
        requests=store,
        operations=store,
        leases=store,
        reports=store,
        records=IdleRecords(store),
        keeper=StoreKeeper(store),
        control_plane=vertex,
        activity=slurm,
        nodes=slurm,
        gpus=gpus,
        messenger=messenger,
        roles=PolicyRoles(policy),
        people=TextPeople(),
        clock=clock,
        owed=store,
        provided={
            SPEND_LEDGER.name: store,
            CALENDAR.name: CronCalendar(),
            CHARTS.name: AggCharts(),
        },
    )
    options = Options(
        owner="week", targets=[Target.parse(TARGET)], alert_channel=ALERTS, sweep_interval=SWEEP
    )
    services = build(ports, policy, options)
    started = time.perf_counter()
    false_busy: dict[str, int] = {s.cluster: 0 for s in situations}
    false_idle: dict[str, int] = {s.cluster: 0 for s in situations}
    sweeps = 0
    while clock.now - START.timestamp() < WEEK:
        hours = (clock.now - START.timestamp()) / H
        for situation in situations:
            apply(state, situation, hours)
        report = await services.sweeper.sweep(force=True)
        assert report is not None and len(report.entries) == len(situations), "a sweep missed"
        sweeps += 1
        seen = {e.cluster_id: e.status for e in report.entries}
        for situation in situations:
            status = seen[situation.cluster]
            assert status != Status.UNKNOWN, f"{situation.cluster} unreadable at {hours} h"
            busy = status == Status.BUSY
            if busy and not situation.truth(hours):
                false_busy[situation.cluster] += 1
            if not busy and situation.truth(hours):
                false_idle[situation.cluster] += 1
        clock.now += SWEEP
    elapsed = time.perf_counter() - started
    await _figures(results, situations, services, messenger, sweeps, elapsed)
    results.add("week", "sweeps falsely busy", sum(false_busy.values()), "sweeps", at_most=0)
    results.add("week", "sweeps falsely idle", sum(false_idle.values()), "sweeps", at_most=0)
    for name, count in {**false_busy, **false_idle}.items():
        if count:
            print(f"  {name}: {false_busy[name]} falsely busy, {false_idle[name]} falsely idle")


async def _figures(
    results: Results,
    situations: list[Situation],
    services: Any,
    messenger: FakeMessenger,
    sweeps: int,
    elapsed: float,
) -> None:
    price = PriceBook.with_overrides().prices["a3-ultragpu-8g"]
    posted = [
        (reply.summary, thread)
        for channel, _, reply, thread in messenger.posted
        if channel == ALERTS
    ]
    alerts = [s for s, thread in posted if thread is None and s.startswith("Idle cluster")]
    reminders = sum(1 for s, thread in posted if thread is not None and "still idle" in s)
    periods = sum(1 for s in situations for a, b in s.idle_periods() if b - a >= ALERTED)
    truth_dollars = sum(
        max(0.0, end - start - IDLE_AFTER / H) * 2 * price
        for s in situations
        for start, end in s.idle_periods()
    )
    until = START.timestamp() + WEEK
    assert services.of(SPEND) is not None
    runs = await services.of(SPEND).runs(START.timestamp(), until)
    kept = sum(r.cost(START.timestamp(), until) or 0.0 for r in runs if r.idle and r.pool == "gpu")
    assert sweeps == WEEK / SWEEP, "the week was not swept through"
    results.add("week", f"sweeps ({len(situations)} clusters each)", sweeps, "sweeps")
    results.add("week", "wall time for the week", elapsed, "s")
    results.add("week", "idle periods (idle at sweeps 2 h apart)", periods, "periods")
    results.add("week", "channel messages per idle period", len(alerts) / periods, "x", at_most=1.0)
    results.add("week", "reminders in the alerts' threads", reminders, "replies")
    results.add("week", "idle dollars, true", truth_dollars, "$")
    results.add("week", "idle dollars, the ledger's", kept, "$")
    gap = abs(kept - truth_dollars) / truth_dollars * 100
    results.add("week", "idle dollars off by", gap, "%", at_most=5.0)
    by_cluster: dict[str, int] = {}
    for summary in alerts:
        name = summary.split(":")[0].removeprefix("Idle cluster ")
        by_cluster[name] = by_cluster.get(name, 0) + 1
    missed = 0
    for situation in situations:
        expected = sum(1 for a, b in situation.idle_periods() if b - a >= ALERTED)
        got = by_cluster.get(situation.cluster, 0)
        missed += abs(got - expected)
        print(f"  {situation.cluster}: {got} alerts for {expected} idle periods")
    results.add("week", "idle periods not alerted exactly once", missed, "periods", at_most=0)
    health = {s.split(":")[1].strip() for s, thread in posted if s.startswith("Health:")}
    # the down and drained nodes are broken; a maintenance window is not
    wrong = len(health ^ {"stuck01"})
    results.add("week", "clusters alerted for health wrongly", wrong, "clusters", at_most=0)
