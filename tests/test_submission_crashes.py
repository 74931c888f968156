"""Kill `clusterbot serve` at each step of a form submission, restart it, and check that the
submission ends in exactly one of two ways, and nothing blocks the cluster: its card posted
and waiting for an approver, or its sender told privately that nothing was posted. On SQLite
and on PostgreSQL.

The process ends itself at a named step (CLUSTERBOT_DEBUG_CRASH_AT: ``os._exit``, no clean
up): after the submission is kept, after its draft is kept with its card owed, after its card
is posted and before that is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.jobs import CRASH_EXIT
from tests.support.demo_stack import CPU01
from tests.support.postgres import query
from tests.support.processes import Sandbox, call, replica, sandbox, wait_until
from tests.support.steps import steps_of
from tests.test_crash_points import database

POINTS = steps_of("submission")  # found in the code: tests/support/steps.py


def top_form(box: Sandbox, has_block: str | None = None) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        views = call(f"{box.url}/sandbox/api/views?user=alice")["views"]
        modals = [v for v in views if v["type"] == "modal"]
        if not modals:
            return None
        top: dict[str, Any] = modals[-1]
        ids = [b.get("block_id") for b in top["blocks"]]
        return top if has_block is None or has_block in ids else None

    result: dict[str, Any] = wait_until(found, what="the form")
    return result


def submit_delete_form(box: Sandbox) -> None:
    """/cluster delete, cpu01 chosen in its form, the confirmation typed, and sent."""
    assert box.command("alice", "/cluster delete")["status"] == 200
    form = top_form(box)
    user = {"user": "alice", "view_id": form["id"]}
    call(f"{box.url}/sandbox/api/suggest", {**user, "action_id": "form_cluster", "value": ""})
    call(f"{box.url}/sandbox/api/click", {**user, "action_id": "form_cluster", "value": CPU01})
    form = top_form(box, "confirm")
    values = {"confirm": {"form_confirm": "cpu01"}}
    call(
        f"{box.url}/sandbox/api/submit", {"user": "alice", "view_id": form["id"], "values": values}
    )


def told_not_posted(box: Sandbox) -> list[dict[str, Any]]:
    return [m for m in box.messages() if "was not posted" in m["text"]]


def cards(box: Sandbox) -> list[dict[str, Any]]:
    return [m for m in box.messages() if m["text"].startswith("Delete request: cpu01")]


def settled(url: str, box: Sandbox) -> bool:
    """Lasting state: no submission unfinished, no draft, and the sender told or a card up."""
    left = query(url, "SELECT key FROM submissions WHERE made = false")
    drafts = query(url, "SELECT id FROM approval_requests WHERE state = 'draft'")
    undone = query(url, "SELECT key FROM owed WHERE state = 'due'")
    return not left and not drafts and not undone and bool(told_not_posted(box) or cards(box))


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_step_of_a_submission_ends_it_one_way(
    point: str, kind: str, tmp_path: Path
) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        one = replica(tmp_path, box, "one", url, CLUSTERBOT_DEBUG_CRASH_AT=point)
        box.point_at(one.events)
        try:
            one.start()
            submit_delete_form(box)
            assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
            assert f"exiting at {point}" in one.log.read_text()
            one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT")
            one.start()  # the same replica, restarted: it finishes what it had in hand
            # at start, not a minute later when any replica would; a card whose post may
            # still arrive is looked for by its key once it no longer can (35 s)
            wait_until(lambda: settled(url, box), limit=90, what=f"the submission after {point}")
            told = told_not_posted(box)
            states = [s for (s,) in query(url, "SELECT state FROM approval_requests")]
            if point == "submission-received":  # nothing was made: alice is told so
                assert len(told) == 1 and told[0]["ephemeral_to"] == "U0ALICE", box.messages()
                assert states == []
                # nothing blocks cpu01: the same change, asked again, gets its card
                assert box.command("alice", "/cluster delete cpu01")["status"] == 200
                wait_until(lambda: len(cards(box)) == 1, what="the card asked again")
            else:  # the draft was kept with its card owed: one card, waiting for an approver
                assert told == [] and states == ["pending"], box.messages()
                [card] = cards(box)
                assert any(b["type"] == "actions" for b in card["blocks"])
                # it is open: the same change asked again is refused, and says why
                assert box.command("alice", "/cluster delete cpu01")["status"] == 200
                wait_until(
                    lambda: [m for m in box.messages() if "already has an open" in m["text"]],
                    what="the refusal of a second request",
                )
                assert len(cards(box)) == 1
        finally:
            one.stop()
        assert box.requests("DELETE") == []  # nothing was sent for a request nobody approved
