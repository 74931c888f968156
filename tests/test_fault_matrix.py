"""Faults beside kill -9, made at a named step of a path on real processes
(tests/support/faults.py, the paths in tests/support/scenarios.py): SIGTERM, the database
gone for 5 s and for 30 s (a PostgreSQL of the test's own, stopped and started again; the
replica is never restarted), and Slack answering 429 to everything for a minute. Whatever the
fault, what the path owes reaches the world once: for a change, one PATCH, one message
telling the end, one mention, the request succeeded, nothing owed left undone.

Just after the approval is where a short outage once stranded a change for ever (the request
stayed approved, its card said "sending" and the cluster was blocked); around the PATCH is
where an outcome is unknown and must be settled by looking, never sent twice. A night's off
met the same outage once it had chosen to go off (it stayed "going-off" for ever)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faults import DOWN, FAULTS
from tests.support.scenarios import PATHS, run_change, run_night_off


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
    outcome = run_night_off(point, fault, tmp_path)
    assert outcome.ok, outcome.why


# every other path at the step where a fault would most likely lose or double its work: each
# under SIGTERM and a short outage, and those that post first under Slack's 429s (make bench
# runs every fault at every step of every path)
SHORT = ["sigterm", "database-5s"]
PICKED = {
    "release": ("release-asked", [*SHORT, "slack-429"]),
    "submission": ("after-draft", SHORT),
    "node": ("after-patch", [*SHORT, "slack-429"]),
    "night on": ("schedule-on-chosen", SHORT),
    "digest": ("digest-posted", [*SHORT, "slack-429"]),
    "idle alert": ("idle-alert-due", SHORT),
}


@pytest.mark.parametrize(
    ("path", "point", "fault"),
    [
        pytest.param(path, point, fault, marks=_marks(fault))
        for path, (point, faults) in PICKED.items()
        for fault in faults
    ],
)
def test_a_fault_on_every_other_path_loses_nothing(
    path: str, point: str, fault: str, tmp_path: Path
) -> None:
    run, steps = PATHS[path]
    assert point in steps  # a step of the path, found in the code
    outcome = run(point, fault, tmp_path)
    assert outcome.ok, outcome.why
