"""A week of one cluster's Slurm, swept every 15 minutes by the whole core (sweeper, policy,
alerts) on in-memory ports: running jobs, a queue of held jobs, a job whose begin time is a
day ahead, a job whose dependency can never be satisfied beside a drained node, jobs hidden
from the bot with allocated nodes, an epilog still running, and the nodes powered down.

No alert while it is busy, exactly one per idle period, and the idle spend the alert and the
report give within 5% of what the week really wasted."""

from __future__ import annotations

from dataclasses import dataclass, field

from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.policy import Policy
from handlers.replies import Reply
from handlers.sweep.alert import IdleEntry
from handlers.sweep.rules import Status
from tests.conftest import ManualClock
from tests.support.factories import cluster_doc
from tests.test_services_unit import ALERTS, make_bot, running, text

H = 3600.0
SWEEP = 900.0
START = 1000.0


def job(job_id: int, state: str, reason: str = "None", **extra: object) -> SlurmJob:
    values: dict[str, object] = {
        "job_id": job_id,
        "name": f"job-{job_id}",
        "user": "dana",
        "account": "data",
        "partition": "gpu",
        "states": frozenset(state.split("+")),
        "reason": reason,
        "priority": 0 if reason.startswith("JobHeld") else 100,
        "qos": "normal",
        "node_count": 1,
        "nodes": "",
        "submitted": None,
        "started": None,
        "hold": reason.startswith("JobHeld"),
    }
    values.update(extra)
    return SlurmJob(**values)  # type: ignore[arg-type]


def node(name: str, state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name, frozenset(state.split("+")), reason)


IDLE_NODES = [node("c1-gpu-0", "IDLE"), node("c1-gpu-1", "IDLE")]


def idle_alerts(posted: list[tuple[str, str, Reply, str | None]]) -> int:
    """The idle alerts posted in the alert channel (a drained node's health alert aside)."""
    return sum(1 for p in posted if p[0] == ALERTS and p[2].summary.startswith("Idle cluster"))


@dataclass(frozen=True)
class Phase:
    """From ``start`` hours into the week: what Slurm lists, and whether that is busy."""

    start: float
    busy: bool
    jobs: tuple[SlurmJob, ...] = ()
    nodes: tuple[SlurmNode, ...] = tuple(IDLE_NODES)
    paying: int = 2


WEEK = [
    Phase(0.0, True, (job(1, "RUNNING"),)),
    Phase(8.1, False, (job(2, "PENDING", "JobHeldUser"), job(3, "PENDING", "JobHeldAdmin"))),
    Phase(20.3, True, (job(4, "RUNNING"), job(5, "PENDING", "Resources"))),
    # a job asked to begin at 47 h: not demand until it is within the 2 h threshold (45 h)
    Phase(26.0, False, (job(6, "PENDING", "BeginTime", eligible=int(START + 47 * H)),)),
    Phase(45.0, True, (job(6, "PENDING", "BeginTime", eligible=int(START + 47 * H)),)),
    Phase(47.0, True, (job(6, "RUNNING"),)),
    Phase(
        52.2,
        False,
        (job(7, "PENDING", "DependencyNeverSatisfied"), job(8, "PENDING+REQUEUE_HOLD")),
        (node("c1-gpu-0", "IDLE+DRAIN", "ECC memory error"), node("c1-gpu-1", "IDLE")),
    ),
    Phase(70.0, True, (), (node("c1-gpu-0", "ALLOCATED"), node("c1-gpu-1", "IDLE"))),  # hidden
    Phase(74.0, True, (), (node("c1-gpu-0", "IDLE+COMPLETING"), node("c1-gpu-1", "IDLE"))),
    Phase(74.5, False),
    Phase(
        90.0,
        False,
        (),
        (node("c1-gpu-0", "IDLE+CLOUD+POWERED_DOWN"), node("c1-gpu-1", "IDLE+CLOUD+POWERED_DOWN")),
        0,
    ),
    Phase(168.0, False),
]


def phase_at(hours: float) -> Phase:
    return [p for p in WEEK if p.start <= hours][-1]


@dataclass
class WeekOfSlurm:
    """The ActivityReader port, answering from the week's trace at the clock's time."""

    clock: ManualClock
    asked: list[str] = field(default_factory=list)

    def _phase(self) -> Phase:
        return phase_at((self.clock() - START) / H)

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        self.asked.append("jobs")
        return list(self._phase().jobs)

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        self.asked.append("nodes")
        return list(self._phase().nodes)

    async def shares(self, cluster: str) -> list[object]:
        return []


async def test_a_week_of_real_slurm_states() -> None:
    clock = ManualClock()
    clock.now = START
    policy = Policy.model_validate({"roles": {"approver": ["U0BOB"]}})  # default idle rules
    bot = make_bot(clock, policy, activity=WeekOfSlurm(clock), sweep_interval=SWEEP)
    services, plane, messenger = bot.services, bot.plane, bot.messenger
    price = None
    statuses: list[tuple[float, Status, Status | None]] = []
    alerted_at: list[float] = []
    last_entry: dict[float, tuple[IdleEntry, float]] = {}
    while clock() - START < 168 * H:
        hours = (clock() - START) / H
        phase = phase_at(hours)
        plane.add(running(cluster_doc(cluster_id="c1", nodes=phase.paying), nodes=phase.paying))
        before = idle_alerts(messenger.posted)
        report = await services.sweeper.sweep(force=True)
        assert report is not None
        [entry] = report.entries
        price = entry.cost_hour if phase.paying else price
        statuses.append((hours, entry.status, None))
        if idle_alerts(messenger.posted) > before:
            alerted_at.append(hours)
            assert not phase.busy, f"alerted at {hours:.2f} h while busy ({entry.reason})"
        if phase.busy:
            assert entry.status == Status.BUSY, (hours, entry.reason)
        last_entry[phase.start] = (entry, clock())
        clock.advance(SWEEP)
    # one alert per idle period that pays: 8.1-20.3 h, 26-45 h, 52.2-70 h, 74.5-90 h
    periods = [(8.1, 20.3), (26.0, 45.0), (52.2, 70.0), (74.5, 90.0)]
    assert len(alerted_at) == len(periods)
    for (start, end), at in zip(periods, alerted_at, strict=True):
        assert start + 2 <= at < min(end, start + 2.25)  # two hours quiet, then the next sweep
    # what each period cost by the bot's idle clock (its last report, carried to the end of
    # the period), against the truth: the clock starts at the first quiet sweep
    assert price is not None
    for start, end in periods:
        entry, _seen = last_entry[start]
        spent = entry.spent(START + end * H)
        assert spent is not None
        truth = price * (end - start)
        assert abs(spent - truth) / truth < 0.05, (start, spent, truth)
    # the powered-down week end is free, never alerted
    assert all(s == Status.FREE for h, s, _ in statuses if h >= 90.25)
    # what the alerts said of the queue and the nodes
    posted = [(r.summary, text(r)) for channel, _, r, _ in messenger.posted if channel == ALERTS]
    said = [shown for summary, shown in posted if summary.startswith("Idle cluster")]
    # the drained node is also a health episode: one alert for it, edited as it changes
    health = [shown for summary, shown in posted if summary.startswith("Health:")]
    assert len(health) == 1 and "c1-gpu-0  drained  ECC memory error" in health[0]
    assert "2 jobs of dana" not in said[0]
    assert "1 job of dana held by its user (JobHeldUser)" in said[0]
    assert "scontrol release" in said[0]
    assert "not to start before" in said[1] and "(BeginTime)" in said[1]
    assert "DependencyNeverSatisfied" in said[2] and "REQUEUE_HOLD" in said[2]
    assert "1 drained (ECC memory error)" in said[2]
