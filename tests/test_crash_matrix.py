"""The crash tests cover every named step of every path, found in the code: a step a worker
declares or the code passes by name (``crash("...")``) belongs to a path, and each path's
crash test takes all of its steps (tests/support/steps.py). A step added later is covered
without editing a list; a step no path takes fails here."""

from __future__ import annotations

from tests import (
    test_crash_points,
    test_node_crashes,
    test_owed_crashes,
    test_release_crashes,
    test_schedule_crashes,
    test_submission_crashes,
)
from tests.support.steps import PATHS, every_step, night_steps, steps_of, untaken


def test_every_step_belongs_to_a_path() -> None:
    assert untaken() == set()
    assert len(every_step()) >= 20  # the discovery found the code's steps


def test_each_path_is_run_at_each_of_its_steps() -> None:
    covered = {
        "change": set(test_crash_points.POINTS),
        "node": set(test_node_crashes.POINTS),
        "submission": set(test_submission_crashes.POINTS),
        "release": set(test_release_crashes.POINTS),
        "night": {point for _, point in test_schedule_crashes.NIGHTS},
    }
    for path, points in covered.items():
        assert set(steps_of(path)) <= points, path
    assert set(night_steps()) <= set(test_schedule_crashes.NIGHTS)
    parametrized = {
        "digest": test_owed_crashes.test_a_crash_at_any_step_of_a_digest_says_it_once,
        "idle-alert": test_owed_crashes.test_a_crash_at_any_step_of_an_idle_alert_alerts_once,
    }
    for path, test in parametrized.items():
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        points = next(m.args[1] for m in marks if m.args[0] == "point")
        assert list(points) == steps_of(path), path
    assert set(covered) | set(parametrized) == set(PATHS)


def test_the_fault_matrix_takes_every_step_too() -> None:
    """make bench's fault matrix runs every path's scenario at each step of its own: every
    step of the code is made to meet every fault on some path."""
    from tests.support.scenarios import PATHS as SCENARIOS

    faulted = {step for _, steps in SCENARIOS.values() for step in steps}
    assert every_step() <= faulted, every_step() - faulted
