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

Each run counts what reached the world, so that a caller (a test, ``make bench``) says
whether anything was lost or done twice.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.jobs import CRASH_EXIT
from tests.support.demo_stack import ends_and_mentions
from tests.support.postgres import query
from tests.support.private_postgres import PrivatePostgres, private_postgres
from tests.support.processes import Replica, Sandbox, call, replica, sandbox, wait_until

FAULTS = ["sigterm", "database-5s", "database-30s", "slack-429"]
DOWN = {"database-5s": 5.0, "database-30s": 30.0}
SLACK_REFUSES = 60.0
MIGRATING = threading.Lock()  # runs made side by side in one process (make bench)


@dataclass
class Outcome:
    """What one run left in the world, and whether that is right."""

    patches: int = 0
    ends: int = 0
    mentions: int = 0
    undone: int = 0
    state: str = ""
    cards: int = 0  # approval cards posted
    problems: list[str] = field(default_factory=list)
    log: str = ""  # the end of the replica's log, when the run went wrong

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def why(self) -> str:
        return "; ".join(self.problems) + (f"\nlog:\n{self.log}" if self.log else "")


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
        one.env.pop("CLUSTERBOT_DEBUG_PAUSE_AT", None)
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


def resize_approved(box: Sandbox) -> dict[str, Any]:
    """alice asks to resize train01, bob approves: the card."""
    assert box.command("alice", "/cluster resize train01 a4 3")["status"] == 200
    card = box.card("Resize request: train01")
    box.click("bob", card["ts"], "approve")
    return card


def run_change(point: str, fault: str, tmp_path: Path) -> Outcome:
    """/cluster resize approved, with the fault at ``point``: one PATCH, one end, one mention,
    the request succeeded, nothing owed left. A run that does not end in time says so in its
    problems, with the owed items and the end of the replica's log."""
    with sandbox(tmp_path) as box, database_for(fault, tmp_path) as (url, server):
        box.simulator("config", {"durations": {"update": 3}})
        marker = tmp_path / "paused"
        if fault == "kill":
            at = {"CLUSTERBOT_DEBUG_CRASH_AT": point}
        else:
            at = {"CLUSTERBOT_DEBUG_PAUSE_AT": point, "CLUSTERBOT_DEBUG_PAUSE_FILE": str(marker)}
        one = replica(tmp_path, box, "one", url, **at)
        box.point_at(one.events)
        try:
            one.start()
            card = resize_approved(box)
            if fault == "kill":
                assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
                one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
                one.start()
            else:
                wait_until(marker.exists, limit=60, what=f"the process to stand at {point}")
                make_fault(fault, one, box, server, marker)
            limit = 60 + DOWN.get(fault, 0.0) + (SLACK_REFUSES if fault == "slack-429" else 0)
            try:
                wait_until(lambda: _ended(url), limit=limit, what=f"the change after {fault}")
            except AssertionError as error:
                outcome = _counted(box, url, card["ts"])
                owed = query(url, "SELECT key, state, attempts, note FROM owed")
                outcome.problems.insert(0, f"{error}; owed {owed}")
                outcome.log = one.log.read_text()[-4000:]
                return outcome
            return _counted(box, url, card["ts"])
        finally:
            one.stop()


def _ended(url: str) -> bool:
    requests = query(url, "SELECT state FROM approval_requests")
    undone = query(url, "SELECT key FROM owed WHERE state = 'due'")
    return len(requests) == 1 and requests[0][0] == "succeeded" and not undone


def _counted(box: Sandbox, url: str, card_ts: str) -> Outcome:
    thread, mentions = ends_and_mentions(box.thread(card_ts))
    outcome = Outcome(
        patches=len(box.requests("PATCH")),
        ends=len(thread),
        mentions=len(mentions),
        undone=len(query(url, "SELECT key FROM owed WHERE state = 'due'")),
        state=str(query(url, "SELECT state FROM approval_requests")[0][0]),
    )
    checks: list[tuple[bool, str]] = [
        (outcome.patches == 1, f"{outcome.patches} PATCHes"),
        (outcome.ends == 1, f"{outcome.ends} messages told the end: {thread}"),
        (outcome.mentions == 1, f"{outcome.mentions} mentions"),
        (outcome.state == "succeeded", f"the request ended {outcome.state}"),
        (outcome.undone == 0, f"{outcome.undone} owed items left"),
    ]
    outcome.problems = [why for good, why in checks if not good]
    return outcome


Runner = Callable[[str, str, Path], Outcome]


def run_night_off(point: str, fault: str, tmp_path: Path) -> Outcome:
    """A schedule's off due now, with the fault at ``point``: the pool at zero by one PATCH,
    its card and its "asleep" line (``ends``) once each, the request succeeded, nothing owed
    left."""
    from tests.test_schedule_crashes import cpu_bounds, in_force, phase, undone

    with sandbox(tmp_path) as box, database_for(fault, tmp_path) as (url, server):
        box.simulator("config", {"durations": {"update": 2}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # nothing runs tonight
        with MIGRATING:  # alembic's context is one per process: one migration at a time
            in_force(url)
        marker = tmp_path / "paused"
        if fault == "kill":
            at = {"CLUSTERBOT_DEBUG_CRASH_AT": point}
        else:
            at = {"CLUSTERBOT_DEBUG_PAUSE_AT": point, "CLUSTERBOT_DEBUG_PAUSE_FILE": str(marker)}
        one = replica(tmp_path, box, "one", url, CLUSTERBOT_SCHEDULE_CHECK_SECONDS="0.3", **at)
        box.point_at(one.events)
        try:
            # the night may come before the replica is ready
            one.start(may_exit=fault == "kill", paused=marker)
            if fault == "kill":
                assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
                one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
                one.start()
            else:
                wait_until(marker.exists, limit=60, what=f"the night to stand at {point}")
                make_fault(fault, one, box, server, marker)
            limit = 60 + DOWN.get(fault, 0.0) + (SLACK_REFUSES if fault == "slack-429" else 0)
            problems = []
            try:
                wait_until(lambda: phase(url) == "asleep", limit=limit, what="asleep")
                wait_until(lambda: not undone(url), limit=limit, what="what is owed")
            except AssertionError as error:
                problems.append(f"{error}; owed {undone(url)}")
        finally:
            one.stop()
        messages = box.messages()
        outcome = Outcome(
            patches=len(box.requests("PATCH")),
            ends=sum("asleep: cpu at zero nodes" in str(m["blocks"]) for m in messages),
            cards=sum(str(m["text"]).startswith("Resize request: cpu01") for m in messages),
            undone=len(undone(url)),
            state=",".join(s for (s,) in query(url, "SELECT state FROM approval_requests")),
            log=one.log.read_text()[-4000:] if problems else "",
        )
        checks: list[tuple[bool, str]] = [
            (outcome.patches == 1, f"{outcome.patches} PATCHes"),
            (outcome.patches == 0 or cpu_bounds(box) == (0, 0), "the pool is not at zero"),
            (outcome.ends == 1, f"{outcome.ends} asleep lines"),
            (outcome.cards == 1, f"{outcome.cards} cards"),
            (outcome.state == "succeeded", f"the request ended {outcome.state}"),
            (outcome.undone == 0, f"{outcome.undone} owed items left"),
        ]
        outcome.problems = problems + [why for good, why in checks if not good]
        return outcome
