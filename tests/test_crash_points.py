"""Kill `clusterbot serve` at each step of a change, restart it, and check that nothing is
lost or done twice: at most one PATCH, exactly one message in the card's thread telling the
end, and the request ended. On SQLite and on PostgreSQL.

The process ends itself at a named step (CLUSTERBOT_DEBUG_CRASH_AT: ``os._exit``, no clean
up), except "mid-operation", where the test kills it with SIGKILL while the operation runs.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bot.jobs import CRASH_EXIT
from tests.support.demo_stack import ends_and_mentions
from tests.support.postgres import fresh_database, query
from tests.support.processes import replica, sandbox, wait_until
from tests.support.scenarios import resize_approved
from tests.support.steps import steps_of

# every named step of a change, found in the code (tests/support/steps.py), and a SIGKILL
# while its operation runs
POINTS = [*steps_of("change"), "mid-operation"]


@contextmanager
def database(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"
    else:
        with fresh_database() as url:
            yield url


def ended(url: str) -> bool:
    """Lasting state: the request ended and its thread message is recorded as the last."""
    requests = query(url, "SELECT state FROM approval_requests")
    finals = query(url, "SELECT final FROM tracked_operations")
    undone = query(url, "SELECT key FROM owed WHERE state = 'due'")
    return (
        len(requests) == 1
        and requests[0][0] == "succeeded"
        and len(finals) == 1
        and finals[0][0] == "posted"
        and not undone  # what is owed (the end told in the thread) is done too
    )


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_step_loses_nothing(point: str, kind: str, tmp_path: Path) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        box.simulator("config", {"durations": {"update": 3}})
        crash = {} if point == "mid-operation" else {"CLUSTERBOT_DEBUG_CRASH_AT": point}
        one = replica(tmp_path, box, "one", url, **crash)
        box.point_at(one.events)
        try:
            one.start()
            card = resize_approved(box)
            if point == "mid-operation":
                wait_until(lambda: box.thread(card["ts"]) and len(box.requests("PATCH")) == 1)
                assert one.process is not None
                one.process.send_signal(signal.SIGKILL)
                assert one.wait_exit() == -signal.SIGKILL
            else:
                assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
            assert f"exiting at {point}" in one.log.read_text() or point == "mid-operation"
            one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
            one.start()  # the same replica, restarted: it frees what it held and recovers
            wait_until(lambda: ended(url), limit=60, what=f"the change to end after {point}")
        finally:
            one.stop()
        assert len(box.requests("PATCH")) == 1  # sent once, whatever died
        thread, mentions = ends_and_mentions(box.thread(card["ts"]))
        assert len(thread) == 1, thread  # one message tells the end; none repeated
        assert "done, finished in" in thread[0]
        assert len(mentions) == 1 and "<@U0ALICE>" in mentions[0]  # told once, never twice
        final_card = next(m for m in box.messages() if m["ts"] == card["ts"])
        assert "*Done*" in str(final_card["blocks"])
