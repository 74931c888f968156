"""Kill `clusterbot serve` at each step of a node's Resume, asked from a health alert and
approved by a second person, or stop it with SIGTERM just after the approval; restart it and
check that the change is finished, not lost or done twice: exactly one node update reaches
slurmrestd, the request ends succeeded, and one message in the card's thread tells the end.
On SQLite and on PostgreSQL.

The demo's train01 has a B200 node drained by a prolog health check: the first sweep posts
its health alert.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.jobs import CRASH_EXIT
from tests.support.demo_stack import ends_and_mentions
from tests.support.postgres import query
from tests.support.processes import Replica, Sandbox, replica, sandbox, wait_until
from tests.support.steps import steps_of
from tests.test_crash_points import database

NODE = "train01-a4-1"
# every named step of the path, found in the code (tests/support/steps.py), a SIGTERM just
# after the approval, and a SIGKILL while the control plane holds the node update
POINTS = [*steps_of("node"), "sigterm", "held"]
# passed by the first sweep, before anyone clicks; the sweep runs in a child process, which
# mostly is the one that ends there: the service lives on, and takes the alert over. The
# alert is owed, and the service's own engine may take it up before the child does: then
# the service is the one that ends, and is started again without the crash point
EARLY = {"health-alert-posted"}
HELD = 3.0  # seconds the proxy holds the node update (under its X-Server-Timeout of 5 s)


def started_again_if_ended(one: Replica) -> None:
    """The replica itself passed the crash point (not its sweep's child): started again
    without it, it takes up what it held."""
    assert one.process is not None
    if one.process.poll() is None:
        return
    assert one.wait_exit() == CRASH_EXIT, one.log.read_text()[-2000:]
    one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
    one.start()


def node_updates(box: Sandbox) -> list[dict[str, Any]]:
    """The node updates slurmrestd received through the control plane's proxy."""
    posts = box.requests("POST")
    return [
        r["body"]
        for r in posts
        if r["path"].endswith("/train01:callSlurmRestApi")
        and str((r.get("body") or {}).get("path", "")).endswith(f"/node/{NODE}")
    ]


def alert(box: Sandbox) -> dict[str, Any] | None:
    return next(
        (m for m in box.messages() if (m.get("text") or "").startswith("Health: train01")), None
    )


def resumed(url: str) -> bool:
    states = query(url, "SELECT state, plan FROM approval_requests")
    undone = query(url, "SELECT key FROM owed WHERE state = 'due'")
    ended = len(states) == 1 and states[0][0] in ("succeeded", "refused", "unknown", "failed")
    return ended and not undone  # and how it ended is told


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_step_of_a_resume_sends_one_node_update(
    point: str, kind: str, tmp_path: Path
) -> None:
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url:
        crash = {} if point in ("sigterm", "held") else {"CLUSTERBOT_DEBUG_CRASH_AT": point}
        if point in EARLY:  # each sweep's child ends after its first post: sweep again soon
            crash["CLUSTERBOT_SWEEP_INTERVAL"] = "5"
        one = replica(tmp_path, box, "one", url, **crash)
        box.point_at(one.events)
        try:
            one.start(may_exit=point in EARLY)  # the replica may be the one that ends there
            if point in EARLY:  # the sweep's alert is cut off between its post and record
                wait_until(lambda: f"exiting at {point}" in one.log.read_text(), limit=60)
                started_again_if_ended(one)
            try:
                posted = wait_until(lambda: alert(box), limit=60, what="the health alert")
            except AssertionError as error:  # what the channel and the replica show instead
                seen = [(m.get("text") or "")[:80] for m in box.messages()]
                raise AssertionError(f"{error}: {seen}\n{one.log.read_text()[-3000:]}") from None
            if point in EARLY:
                started_again_if_ended(one)
            box.click("alice", posted["ts"], "health_resume")
            card = box.card("Resume node request: train01")
            if point == "held":  # the control plane holds the update; slurmctld applies it later
                box.simulator(
                    "faults",
                    {
                        "method": "POST",
                        "path": "callSlurmRestApi",
                        "latency_ms": HELD * 1000,
                        "count": 1,
                        "skip": 1,
                    },
                )
            box.click("bob", card["ts"], "approve")
            if point == "held":
                # killed while its update is held: the restarted replica must not read the
                # node (not yet updated) and send a second RESUME that would also apply
                wait_until(lambda: node_updates(box), what="the node update to be sent")
                one.kill()
            elif point == "sigterm":
                one.terminate()  # a drain of what was under way, then the restart
            elif point not in EARLY:
                assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
                assert f"exiting at {point}" in one.log.read_text()
            if point not in EARLY:
                one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT", None)
                one.start()  # the same replica, restarted: it recovers what it held
            # a held update is looked at only once it can no longer apply: its window, 30 s
            limit = 90 if point == "held" else 60
            wait_until(lambda: resumed(url), limit=limit, what=f"the resume to end after {point}")
        finally:
            one.stop()
        [(state, plan)] = query(url, "SELECT state, plan FROM approval_requests")
        assert state == "succeeded" and json.loads(plan)["detail"]["node"] == NODE
        assert node_updates(box) == [
            {
                "method": "HTTP_METHOD_POST",
                "path": f"/slurm/v0.0.42/node/{NODE}",
                "body": {"state": ["RESUME"]},
            }
        ]  # sent once, whatever died
        alerts = [m for m in box.messages() if (m.get("text") or "").startswith("Health: train01")]
        assert len(alerts) == 1  # the sweep's alert once, whatever died
        thread, mentions = ends_and_mentions(box.thread(card["ts"]))
        assert len(thread) == 1 and "back in service" in thread[0], thread
        assert len(mentions) == 1 and "<@U0ALICE>" in mentions[0]  # told once
