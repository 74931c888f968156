"""The paths of the fault matrix, each a ``Scenario`` (tests/support/faults.py): what it sets
up, what a person (or a pipeline, or the clock) does, when it is over, and what it must have
left in the world. Each path is run at every step of its own, found in the code
(tests/support/steps.py), under every fault.

- change: /cluster resize approved: one PATCH, one end in the card's thread, one mention;
- release: a pipeline's release, approved by the policy: one PATCH, the release acted;
- submission: a delete form sent: its card up or its sender told, one of the two, no DELETE;
- node: a health alert's Resume approved: the alert once, one node update, one end;
- night off / night on: a schedule's night: one PATCH each way, each card and line once,
  the pool at zero and then back at exactly its bounds;
- notice: the notice before a night's off: posted once, nothing sent;
- wake: a schedule ended while its cluster sleeps: woken at once, as a night's on is;
- digest: the weekly digest's firing: one digest, one chart;
- idle alert: an idle paying cluster's alert from a sweep: one alert.
"""

from __future__ import annotations

import contextlib
import time
import urllib.error
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from handlers.owed.engine import LEASE, POST_WINDOW
from tests.support.demo_stack import ends_and_mentions
from tests.support.faults import (
    MIGRATING,
    Outcome,
    Runner,
    Scenario,
    runner,
    states,
    undone,
)
from tests.support.postgres import execute, query
from tests.support.processes import Replica, Sandbox, replica, wait_until
from tests.support.steps import night_steps, steps_of, worker_steps


def resize_approved(box: Sandbox) -> dict[str, Any]:
    """alice asks to resize train01, bob approves: the card."""
    assert box.command("alice", "/cluster resize train01 a4 3")["status"] == 200
    card = box.card("Resize request: train01")
    box.click("bob", card["ts"], "approve")
    return card


def _thread_of(box: Sandbox, card: str | None) -> tuple[list[str], list[str]]:
    return ends_and_mentions(box.thread(card)) if card else ([], [])


class Change(Scenario):
    card: str | None = None

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        box.simulator("config", {"durations": {"update": 3}})
        return {}

    def begin(self, box: Sandbox, one: Replica) -> None:
        self.card = resize_approved(box)["ts"]

    def over(self, box: Sandbox, url: str) -> bool:
        return states(url) == ["succeeded"] and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        thread, mentions = _thread_of(box, self.card)
        ended = states(url)
        return Outcome(
            counts={"PATCH": len(box.requests("PATCH")), "ends": len(thread)}
            | {"mentions": len(mentions)},
            wanted={"PATCH": 1, "ends": 1, "mentions": 1},
            undone=self.undone(url),
        ).judge((ended == ["succeeded"], f"the request ended {ended}: {thread}"))


# a card cut off from its record is owed: once the lease of the replica that died lapses
# and its post can no longer arrive, it is looked for by its key (and posted if it never
# arrived). What a path with a card may take more
CARD_LATE = LEASE + POST_WINDOW + 10.0


class Release(Scenario):
    """The pipeline hook's release of cpu01 once its jobs end: approved by the policy."""

    patience = CARD_LATE

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        from tests.test_release import AUDIENCE, Issuer
        from tests.test_release_crashes import certs_served

        self.issuer = Issuer()
        certs = stack.enter_context(certs_served(self.issuer))
        box.simulator("config", {"durations": {"update": 1}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # the pipeline's jobs ended
        return {
            "CLUSTERBOT_OIDC_AUDIENCE": AUDIENCE,
            "CLUSTERBOT_OIDC_CERTS_URL": certs,
            "CLUSTERBOT_RELEASE_CHECK_SECONDS": "0.3",
            "CLUSTERBOT_RELEASE_GRACE_SECONDS": "0",
        }

    def policy(self) -> str:
        from tests.test_release_crashes import POLICY

        return POLICY

    def begin(self, box: Sandbox, one: Replica) -> None:
        from tests.test_release_crashes import ask_release

        # its answer may be lost with the process: what was kept is judged, not the answer
        with contextlib.suppress(OSError, urllib.error.URLError):
            ask_release(one.url, self.issuer.token())

    def over(self, box: Sandbox, url: str) -> bool:
        from tests.test_release_crashes import acted

        return acted(url) and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        releases = query(url, "SELECT state FROM releases")
        ended = states(url)
        return Outcome(
            counts={"PATCH": len(box.requests("PATCH"))}
            | {"releases acted": sum(state == "acted" for (state,) in releases)},
            wanted={"PATCH": 1, "releases acted": 1},
            undone=self.undone(url),
        ).judge(
            (releases == [("acted",)], f"the releases {releases}"),
            # one request, whatever was cut off: its card is owed and posted once
            (ended == ["succeeded"], f"the requests ended {ended}"),
        )


class Submission(Scenario):
    """A delete form sent: it ends one way, its card up or its sender told; nothing sent."""

    patience = CARD_LATE

    def begin(self, box: Sandbox, one: Replica) -> None:
        from tests.test_submission_crashes import submit_delete_form

        submit_delete_form(box)

    def over(self, box: Sandbox, url: str) -> bool:
        from tests.test_submission_crashes import settled

        return settled(url, box)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        from tests.test_submission_crashes import cards, told_not_posted

        ended = states(url)
        return Outcome(
            counts={"ends": len(cards(box)) + len(told_not_posted(box))}
            | {"DELETE": len(box.requests("DELETE"))},
            wanted={"ends": 1, "DELETE": 0},
            undone=self.undone(url),
        ).judge(
            # kept and waiting for an approver, or never made (its sender told): no draft
            # left, none abandoned
            (ended in ([], ["pending"]), f"the requests are {ended}"),
        )


class Node(Scenario):
    """The demo's drained B200 node: its health alert, Resume asked and approved."""

    unrelated = ("idle-alert:",)

    card: str | None = None

    def early(self, point: str) -> bool:
        return worker_steps().get(point) == "health-alert"  # the sweep's, before any click

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        return {"CLUSTERBOT_SWEEP_INTERVAL": "5"}  # a sweep cut off is made again soon

    def begin(self, box: Sandbox, one: Replica) -> None:
        from tests.test_node_crashes import alert

        # after a fault at its post, the alert may come only when Slack takes posts again
        posted = wait_until(lambda: alert(box), limit=150, what="the health alert")
        box.click("alice", posted["ts"], "health_resume")
        card = box.card("Resume node request: train01")
        self.card = card["ts"]
        box.click("bob", card["ts"], "approve")

    def over(self, box: Sandbox, url: str) -> bool:
        from tests.test_node_crashes import resumed

        return resumed(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        from tests.test_node_crashes import node_updates

        alerts = [m for m in box.messages() if str(m.get("text")).startswith("Health: train01")]
        thread, mentions = _thread_of(box, self.card)
        ended = states(url)
        return Outcome(
            counts={"node updates": len(node_updates(box)), "alerts": len(alerts)}
            | {"ends": len(thread), "mentions": len(mentions)},
            wanted={"node updates": 1, "alerts": 1, "ends": 1, "mentions": 1},
            undone=self.undone(url),
        ).judge((ended == ["succeeded"], f"the request ended {ended}"))


class Night(Scenario):
    """A schedule's night: its "off" due now. For the "on", the off is done first, without
    a fault, and its "on" made due; for a "wake", the same, and alice ends the schedule
    while the cluster sleeps (it wakes at once)."""

    def __init__(self, night: str) -> None:
        self.night = night

    def early(self, point: str) -> bool:
        return self.night != "wake"  # the clock sets it going, or alice does

    def begin(self, box: Sandbox, one: Replica) -> None:
        if self.night == "wake":
            assert box.command("alice", "/cluster schedule end sch-crash")["status"] == 200

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        from tests.test_schedule_crashes import in_force, phase

        box.simulator("config", {"durations": {"update": 2}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # nothing runs tonight
        with MIGRATING:  # alembic's context is one per process: one migration at a time
            in_force(url)
        settings = {"CLUSTERBOT_SCHEDULE_CHECK_SECONDS": "0.3"}
        if self.night != "off":  # the off, as it goes with nothing in its way
            first = replica(tmp_path, box, "off", url, **settings)
            box.point_at(first.events)
            try:
                first.start()
                wait_until(lambda: phase(url) == "asleep" and not undone(url), limit=90)
            finally:
                first.stop()
            if self.night == "on":
                execute(url, "UPDATE schedules SET next_on = :now", now=time.time() - 1)
        return settings

    def over(self, box: Sandbox, url: str) -> bool:
        from tests.test_schedule_crashes import phase

        wanted = "asleep" if self.night == "off" else "awake"
        ended = self.night != "wake" or _schedule_state(url) == "ended"
        return phase(url) == wanted and ended and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        from tests.test_schedule_crashes import cpu_bounds

        messages = box.messages()
        nights = 1 if self.night == "off" else 2
        patches = len(box.requests("PATCH"))
        bounds = cpu_bounds(box) if patches else None
        ended = states(url)
        rollups = [str(m["text"]) for m in messages if str(m["text"]).startswith("Schedules: ")]
        return Outcome(
            counts={
                "PATCH": patches,
                "cards": sum(str(m["text"]).startswith("Resize request: cpu01") for m in messages),
                "roll-ups": len(rollups),
                "asleep lines": sum(
                    "asleep: cpu at zero nodes" in str(m["blocks"]) for m in messages
                ),
                "back-on lines": sum("back on: cpu 4:4" in str(m["blocks"]) for m in messages),
            },
            wanted={
                "PATCH": nights,
                "cards": nights,
                "roll-ups": nights,
                "asleep lines": 1,
                "back-on lines": nights - 1,
            },
            undone=self.undone(url),
        ).judge(
            (bounds == ((0, 0) if self.night == "off" else (4, 4)), f"the pool left at {bounds}"),
            (ended == ["succeeded"] * nights, f"the requests ended {ended}"),
            (all(r.endswith("· 1 done") for r in rollups), f"the roll-ups say {rollups}"),
        )


def _schedule_state(url: str) -> str:
    return str(query(url, "SELECT state FROM schedules WHERE id = 'sch-crash'")[0][0])


class Notice(Scenario):
    """The notice before a night's off (with Skip tonight and Postpone): the off is ten
    minutes away."""

    def early(self, point: str) -> bool:
        return True

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        from tests.test_schedule_crashes import in_force

        with MIGRATING:
            in_force(url, off_in=600)
        return {"CLUSTERBOT_SCHEDULE_CHECK_SECONDS": "0.3"}

    def over(self, box: Sandbox, url: str) -> bool:
        noticed = query(url, "SELECT noticed_for FROM schedules WHERE id = 'sch-crash'")
        return noticed[0][0] is not None and bool(_notices(box)) and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        return Outcome(
            counts={"notices": len(_notices(box)), "PATCH": len(box.requests("PATCH"))},
            wanted={"notices": 1, "PATCH": 0},
            undone=self.undone(url),
        ).judge()


def _notices(box: Sandbox) -> list[dict[str, Any]]:
    return [m for m in box.messages() if "goes to zero at" in str(m["blocks"])]


class Digest(Scenario):
    """A daily digest due two minutes ago, with an hour of spend watched."""

    def early(self, point: str) -> bool:
        return True

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        from tests.test_owed_crashes import migrated, watched_an_hour

        with MIGRATING:
            migrated(url)
        return {"CLUSTERBOT_DIGEST_CRON": watched_an_hour(url)}

    def over(self, box: Sandbox, url: str) -> bool:
        from tests.test_owed_crashes import digests

        return bool(digests(box)) and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        from tests.test_owed_crashes import charts, digests

        return Outcome(
            counts={"digests": len(digests(box)), "charts": len(charts(box))},
            wanted={"digests": 1, "charts": 1},
            undone=self.undone(url),
        ).judge()


class IdleAlert(Scenario):
    """cpu01 idle and paying: a sweep every 2 s alerts it, once."""

    unrelated = ("health-alert:",)

    def early(self, point: str) -> bool:
        return True

    def policy(self) -> str:
        from tests.test_owed_crashes import QUICK_IDLE

        return QUICK_IDLE

    def setup(self, stack: ExitStack, box: Sandbox, url: str, tmp_path: Path) -> dict[str, str]:
        return {"CLUSTERBOT_SWEEP_INTERVAL": "2"}

    def over(self, box: Sandbox, url: str) -> bool:
        return bool(_idle_alerts(box)) and not self.undone(url)

    def outcome(self, box: Sandbox, url: str) -> Outcome:
        return Outcome(
            counts={"alerts": len(_idle_alerts(box))}, wanted={"alerts": 1}, undone=self.undone(url)
        ).judge()


def _idle_alerts(box: Sandbox) -> list[dict[str, Any]]:
    return [m for m in box.messages() if str(m["text"]).startswith("Idle cluster cpu01:")]


# each path: its runner and its steps, found in the code
PATHS: dict[str, tuple[Runner, list[str]]] = {
    "change": (runner(Change), steps_of("change")),
    "release": (runner(Release), steps_of("release")),
    "submission": (runner(Submission), steps_of("submission")),
    "node": (runner(Node), steps_of("node")),
    **{
        f"night {night}": (
            runner(lambda night=night: Night(night)),  # type: ignore[misc]
            [step for when, step in night_steps() if when == night],
        )
        for night in ("off", "on")
    },
    "wake": (runner(lambda: Night("wake")), [step for when, step in night_steps() if when == "on"]),
    "notice": (runner(Notice), ["message-posted"]),
    "digest": (runner(Digest), steps_of("digest")),
    "idle alert": (runner(IdleAlert), steps_of("idle-alert")),
}
run_change = PATHS["change"][0]
run_night_off = PATHS["night off"][0]
