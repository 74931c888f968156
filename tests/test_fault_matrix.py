"""Faults beside kill -9, made at a named step of an approved change on real processes
(tests/support/faults.py): SIGTERM, the database gone for 5 s and for 30 s (a PostgreSQL of
the test's own, stopped and started again; the replica is never restarted), and Slack
answering 429 to everything for a minute. Whatever the fault: one PATCH, one message telling
the end, one mention, the request succeeded, nothing owed left undone.

Just after the approval is where a short outage once stranded a change for ever (the request
stayed approved, its card said "sending" and the cluster was blocked); around the PATCH is
where an outcome is unknown and must be settled by looking, never sent twice. A night's off
met the same outage once it had chosen to go off (it stayed "going-off" for ever)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faults import DOWN, FAULTS, SLACK_REFUSES, database_for, make_fault, run_change
from tests.support.postgres import query
from tests.support.processes import replica, sandbox, wait_until
from tests.test_schedule_crashes import cpu_bounds, in_force, phase, undone


def _marks(fault: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.postgres] if fault in DOWN else []


@pytest.mark.parametrize("fault", [pytest.param(f, marks=_marks(f)) for f in FAULTS])
def test_a_fault_just_after_an_approval_loses_nothing(fault: str, tmp_path: Path) -> None:
    outcome = run_change("after-approval", fault, tmp_path)
    assert outcome.ok, outcome.why


@pytest.mark.postgres
@pytest.mark.parametrize("point", ["before-patch", "after-patch", "after-operation-recorded"])
def test_a_short_outage_around_the_patch_sends_it_once(point: str, tmp_path: Path) -> None:
    outcome = run_change(point, "database-5s", tmp_path)
    assert outcome.ok, outcome.why


NIGHT_FAULTS = [(f, "schedule-off-chosen") for f in FAULTS] + [("database-5s", "schedule-asked")]


@pytest.mark.parametrize(
    ("fault", "point"), [pytest.param(f, p, marks=_marks(f)) for f, p in NIGHT_FAULTS]
)
def test_a_fault_as_a_night_goes_off_loses_nothing(fault: str, point: str, tmp_path: Path) -> None:
    """A schedule's off is due: the fault comes once the night has chosen to go off (or once
    its change is asked). The pool goes to zero once, its card and its "asleep" line are
    each posted once, nothing owed is left."""
    with sandbox(tmp_path) as box, database_for(fault, tmp_path) as (url, server):
        box.simulator("config", {"durations": {"update": 2}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # nothing runs tonight
        in_force(url)
        marker = tmp_path / "paused"
        one = replica(
            tmp_path,
            box,
            "one",
            url,
            CLUSTERBOT_SCHEDULE_CHECK_SECONDS="0.3",
            CLUSTERBOT_DEBUG_PAUSE_AT=point,
            CLUSTERBOT_DEBUG_PAUSE_FILE=str(marker),
        )
        box.point_at(one.events)
        try:
            one.start(paused=marker)  # the night may come before the replica is ready
            wait_until(marker.exists, limit=60, what=f"the night to stand at {point}")
            make_fault(fault, one, box, server, marker)
            limit = 60 + DOWN.get(fault, 0.0) + (SLACK_REFUSES if fault == "slack-429" else 0)
            wait_until(lambda: phase(url) == "asleep", limit=limit, what=f"asleep after {fault}")
            wait_until(lambda: not undone(url), limit=limit, what=f"what is owed after {fault}")
        finally:
            one.stop()
        assert len(box.requests("PATCH")) == 1 and cpu_bounds(box) == (0, 0)
        states = [s for (s,) in query(url, "SELECT state FROM approval_requests")]
        assert states == ["succeeded"]
        cards = [m for m in box.messages() if m["text"].startswith("Resize request: cpu01")]
        assert len(cards) == 1, [m["text"] for m in cards]
        said = [t for t in box.messages() if "asleep: cpu at zero nodes" in str(t["blocks"])]
        assert len(said) == 1
