"""A fault made at a named step of a path, on real processes: `clusterbot serve` stands
still at the step (CLUSTERBOT_DEBUG_PAUSE_AT writes a marker file and waits until it is
gone), the test makes the fault, removes the marker, and the process goes on into it.

- ``kill``: the process ends at the step (os._exit, CLUSTERBOT_DEBUG_CRASH_AT), and is
  started again;
- ``sigterm``: SIGTERM while it stands at the step (it drains and hands its work back), and
  it is started again;
- ``database-5s``, ``database-30s``: its PostgreSQL (one of the test's own) stops at the step
  and starts again that much later; the process is never restarted;
- ``slack-429``: Slack answers 429 to every Web API call for a minute from the step.

Each path is a ``Scenario``: what it sets up, what a person does, when it is over, and what
it must have left in the world (each thing counted: a PATCH, a card, a line telling the end).
A run counts what reached the world, so that a caller (a test, ``make bench``) says whether
anything was lost (fewer than wanted), done twice (more), or stuck (not over, work owed).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bot.jobs import CRASH_EXIT
from tests.support.postgres import query
from tests.support.private_postgres import PrivatePostgres, private_postgres
from tests.support.processes import (
    POLICY,
    Replica,
    Sandbox,
    call,
    replica,
    sandbox,
    wait_until,
)

FAULTS = ["sigterm", "database-5s", "database-30s", "slack-429"]
DOWN = {"database-5s": 5.0, "database-30s": 30.0}
SLACK_REFUSES = 60.0
MIGRATING = threading.Lock()  # runs made side by side in one process (make bench)


@dataclass
class Outcome:
    """What one run left in the world, against what it should have."""

    counts: dict[str, int] = field(default_factory=dict)  # what reached the world, by name
    wanted: dict[str, int] = field(default_factory=dict)  # how many of each there should be
    undone: int = 0  # owed items left undone
    stuck: bool = False  # it did not end as it should, or left work owed
    problems: list[str] = field(default_factory=list)
    log: str = ""  # the end of the replica's log, when the run went wrong

    @property
    def lost(self) -> bool:
        return any(self.counts.get(name, 0) < n for name, n in self.wanted.items())

    @property
    def twice(self) -> bool:
        return any(self.counts.get(name, 0) > n for name, n in self.wanted.items())

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def why(self) -> str:
        return "; ".join(self.problems) + (f"\nlog:\n{self.log}" if self.log else "")

    def judge(self, *checks: tuple[bool, str]) -> Outcome:
        """Each count against what was wanted, and the scenario's own checks."""
        for name, n in self.wanted.items():
            got = self.counts.get(name, 0)
            if got != n:
                self.problems.append(f"{got} {name} (wanted {n})")
        if self.undone:
            self.problems.append(f"{self.undone} owed items left")
        for good, why in checks:
            if not good:
                self.stuck = True
                self.problems.append(why)
        self.stuck = self.stuck or self.undone > 0
        return self


@contextmanager
def database_for(fault: str, tmp_path: Path) -> Iterator[tuple[str, PrivatePostgres | None]]:
    """PostgreSQL of the test's own where the fault is the database's, else SQLite."""
    if fault in DOWN:
        with private_postgres() as server:
            yield server.url(), server
        return
    yield f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}", None


def make_fault(
    fault: str, one: Replica, box: Sandbox, server: PrivatePostgres | None, marker: Path
) -> None:
    """The process stands at the step: make the fault, and let it go on into it."""
    if fault == "sigterm":
        assert one.process is not None
        one.process.send_signal(signal.SIGTERM)
        marker.unlink()
        one.wait_exit()
        one.start()
    elif fault in DOWN:
        assert server is not None
        server.stop()
        marker.unlink()
        time.sleep(DOWN[fault])  # the outage itself: the world is away for this long
        server.start()
    elif fault == "slack-429":
        call(f"{box.url}/sandbox/api/config", {"ratelimit_all_for": SLACK_REFUSES})
        marker.unlink()
    else:
        raise ValueError(f"no fault {fault!r}")


def undone(url: str, ignoring: tuple[str, ...] = ()) -> list[str]:
    """The owed items still to do, but for those whose keys start as ``ignoring`` says."""
    due = [k for (k,) in query(url, "SELECT key FROM owed WHERE state = 'due'")]
    return [k for k in due if not k.startswith(ignoring)]


def states(url: str) -> list[str]:
    return sorted(str(s) for (s,) in query(url, "SELECT state FROM approval_requests"))


class Scenario:
    """A path, run once under a fault. ``early`` steps come before anything a person does
    (a periodic run's, a sweep's): the fault is made before ``begin``."""

    # what the service owes beside the path (the first sweep's alerts about the demo's
    # clusters, late when Slack refuses): not the path's to have done when it is over
    unrelated: tuple[str, ...] = ("health-alert:", "idle-alert:")
    patience = 0.0  # seconds the path may need beyond the fault's own (a draft's timeout)

    def undone(self, url: str) -> int:
        return len(undone(url, self.unrelated))

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        """Before the replica starts: the world as the path needs it; the replica's settings."""
        return {}

    def policy(self) -> str:
        return POLICY

    def early(self, point: str) -> bool:
        return False

    def begin(self, box: Sandbox, one: Replica) -> None:
        """What a person does, once the replica is up."""

    def over(self, box: Sandbox, url: str) -> bool:
        raise NotImplementedError

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        raise NotImplementedError


def limit_for(fault: str) -> float:
    return 60 + DOWN.get(fault, 0.0) + (SLACK_REFUSES if fault == "slack-429" else 0.0)


def run(scenario: Scenario, point: str, fault: str, tmp_path: Path) -> Outcome:
    """The scenario with ``fault`` at ``point``: kill -9 there (``kill``: the process, or the
    sweep's child that passes it, ends; the service is started again), or the process stands
    there while the fault is made. A run that does not end in time says so in its problems,
    with the owed items and the end of the replica's log."""
    with (
        sandbox(tmp_path) as box,
        database_for(fault, tmp_path) as (url, server),
        ExitStack() as stack,
    ):
        settings = scenario.setup(stack, box, url, tmp_path)
        marker = tmp_path / "paused"
        if fault == "kill":
            at = {"CLUSTERBOT_DEBUG_CRASH_AT": point}
        else:
            at = {"CLUSTERBOT_DEBUG_PAUSE_AT": point, "CLUSTERBOT_DEBUG_PAUSE_FILE": str(marker)}
        one = replica(tmp_path, box, "one", url, scenario.policy(), **settings, **at)
        box.point_at(one.events)
        early = scenario.early(point)
        problems: list[str] = []

        def begin() -> None:
            try:
                scenario.begin(box, one)
            except Exception as error:  # what a person saw go wrong is a finding, kept
                problems.append(f"{type(error).__name__}: {error}")

        # a person's part runs beside: the replica may stand still in the middle of it
        person = threading.Thread(target=begin, daemon=True)
        try:
            one.start(may_exit=fault == "kill" and early, paused=marker)
            if not early:
                person.start()
            if fault == "kill":
                crashed_then_restarted(one, point)
            else:
                wait_until(marker.exists, limit=90, what=f"the process to stand at {point}")
                one.env.pop("CLUSTERBOT_DEBUG_PAUSE_AT", None)  # once: never again
                make_fault(fault, one, box, server, marker)
            if early:
                person.start()
            person.join(timeout=limit_for(fault) + 90)
            try:
                limit = limit_for(fault) + scenario.patience
                wait_until(lambda: scenario.over(box, url), limit=limit, what="the end")
            except AssertionError as error:
                problems.append(f"{error} after {fault} at {point}; owed {undone(url)}")
        finally:
            one.stop()
        outcome = scenario.outcome(box, url)
        outcome.problems[:0] = problems
        outcome.stuck = outcome.stuck or bool(problems)
        if not outcome.ok:
            owed = query(url, "SELECT key, attempts, note FROM owed WHERE state = 'due'")
            outcome.problems.append(f"owed at the end: {owed}")
            outcome.log = one.log.read_text()[-4000:]
        return outcome


def crashed_then_restarted(one: Replica, point: str) -> None:
    """Run until ``point`` is passed (by the service, or by its sweep's child process, which
    is the one to end then), and start the service again without the crash point."""
    wait_until(lambda: f"exiting at {point}" in one.log.read_text(), limit=90, what=point)
    assert one.process is not None
    if one.process.poll() is None:  # the child ended; the service is stopped and restarted
        one.stop()
    else:
        assert one.wait_exit() == CRASH_EXIT
    one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
    one.start()


Runner = Callable[[str, str, Path], Outcome]


def runner(make: Callable[[], Scenario]) -> Runner:
    """A runner of a fresh scenario at each call (a scenario keeps what its run saw)."""

    def run_it(point: str, fault: str, tmp_path: Path) -> Outcome:
        return run(make(), point, fault, tmp_path)

    return run_it
