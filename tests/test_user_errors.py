"""One kind of error a person may see, as a user or an attacker would meet it: text any user
can type (a folder of the tz database, a zone 300 characters long, a blank in a form, a body
nested a thousand deep) gets one line, never an internal error; clicks on what changed since
(a node of a cluster deleted, a schedule that is gone, a snooze nobody offered) are answered
in words; and an id that does not fit the API's own pattern (``%2F``, ``..``) never reaches
a URL."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from pydantic import ValidationError

from bot.settings import Settings
from bot.slack.shapes import shape_problem
from handlers import dispatch
from handlers.capabilities import REGISTRY
from handlers.dispatch import Outcome
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName
from handlers.policy import Policy
from handlers.schedules.form import check_schedule
from tests.conftest import ManualClock
from tests.support.factories import cluster_doc
from tests.support.text_adapter import text
from tests.test_health_alerts import Slurm, health_bot
from tests.test_schedules import Store, scheduled_bot, store
from tests.test_services_unit import C1, POLICY, make_bot

__all__ = ["store"]  # the fixture: a migrated SQLite store

ZONES = ["Europe", "America/Argentina", "z" * 300, "../../etc/passwd", "UTC\x00", "Europe/"]


@pytest.mark.parametrize("zone", ZONES)
def test_a_zone_that_is_not_one_is_refused_in_one_line(zone: str) -> None:
    read = dispatch.read(f"schedule c1 off 20:00 on 08:00 tz {zone}")
    assert read.error is not None and "is not a time zone of the tz database" in read.error.reason
    assert REGISTRY.usage(read.error) is not None and "\n" not in read.error.reason


@pytest.mark.parametrize("zone", ["Europe", "America/Argentina", "z" * 300])
def test_a_zone_in_the_settings_or_the_policy_is_listed_not_a_crash(zone: str) -> None:
    with pytest.raises(ValidationError) as settings:
        Settings(digest_timezone=zone)
    assert "is not a zone of the tz database" in str(settings.value)
    policy = Policy.model_validate(
        {"schedules": {"night": {"off": "20:00", "on": "08:00", "tz": zone}}}
    )
    [problem] = policy.problems(REGISTRY.sections.values())
    assert problem.startswith("schedules.night: ") and "is not a time zone of the tz" in problem


def test_a_schedule_form_with_only_blanks_says_so_at_its_fields() -> None:
    cluster = Cluster.model_validate(cluster_doc(cluster_id="c1", nodes=2))
    blanks = {"off_days": " ", "off_time": " ", "on_days": "", "on_time": '""', "tz": " "}
    command, problems = check_schedule(cluster, blanks)
    assert command is None
    missing = "a time of day is missing: write HH:MM, or DAYS HH:MM"
    assert problems == {"off_time": missing, "on_time": missing}  # a blank zone is UTC


def test_a_signed_body_nested_a_thousand_deep_is_refused_not_a_500() -> None:
    nested = "[" * 1000 + "]" * 1000
    body = json.dumps({"type": "block_actions"})[:-1] + f', "x": {nested}}}'
    assert shape_problem(body, "application/json") is not None
    form = "payload=" + quote(body)
    assert "nests deeper" in str(shape_problem(form, "application/x-www-form-urlencoded"))


async def test_show_on_the_alert_of_a_cluster_deleted_since_is_answered(
    clock: ManualClock,
) -> None:
    bot = health_bot(clock, Slurm())
    del bot.plane.clusters[C1]
    answer = await bot.services.dispatcher.click("U0CAROL", "health_show", f"{C1}|c1-gpu-1", None)
    assert answer.outcome != Outcome.INTERNAL_ERROR and answer.reply is not None
    assert "there is no cluster" in text(answer.reply)


async def test_skip_of_a_schedule_that_is_gone_is_answered(
    clock: ManualClock, store: Store
) -> None:
    bot = scheduled_bot(clock, store)
    answer = await bot.services.dispatcher.click(
        "U0ALICE", "schedule_skip", "sch-gone|1700000000", None
    )
    assert answer.outcome == Outcome.BAD_INPUT and answer.reply is not None
    assert "no schedule 'sch-gone' in force" in text(answer.reply)


@pytest.mark.parametrize(
    ("action", "value"),
    [("idle_snooze", f"999999999999|{C1}"), ("health_snooze", f"315360000000|{C1}")],
)
async def test_a_snooze_nobody_offered_is_refused(
    clock: ManualClock, action: str, value: str
) -> None:
    bot = make_bot(clock, Policy.model_validate(POLICY))
    answer = await bot.services.dispatcher.click("U0ALICE", action, value, None)
    assert answer.outcome == Outcome.BAD_INPUT and answer.reply is not None
    assert "not one clusterbot offers" in text(answer.reply)


FORGED = [
    "projects/demo-project/locations/us-central1/modelDevelopmentClusters/x%2F..%2F..%2F"
    "other-project%2Flocations%2Fus-central1%2FmodelDevelopmentClusters%2Fside01",
    "projects/demo-project/locations/us-central1/modelDevelopmentClusters/..",
    "projects/demo-project/locations/us-central1/modelDevelopmentClusters/c1?alt=media",
    "projects/demo-project/locations/us-central1/modelDevelopmentClusters/c1%3Fx",
]


@pytest.mark.parametrize("name", FORGED)
async def test_an_id_that_does_not_fit_the_api_never_reaches_a_url(
    clock: ManualClock, name: str
) -> None:
    with pytest.raises(ValueError, match="not a cluster resource name"):
        ClusterName.parse(name)
    bot = make_bot(clock, Policy.model_validate(POLICY))
    answer = await bot.services.dispatcher.click("U0BOB", "idle_scale_to_zero", name, None)
    assert answer.outcome == Outcome.DENIED and bot.plane.patches == []
    typed = await bot.services.dispatcher.command("U0ALICE", "C0INFRA", f"show {name}")
    assert typed.outcome != Outcome.INTERNAL_ERROR and typed.reply is not None
    assert "\n" not in (typed.reason or "")


def test_errors_for_people_are_caught_as_one_kind() -> None:
    """No hand-made tuple of error classes meant for people: ``UserError`` is caught."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    kinds = "CommandError|PlanError|VertexError|SlurmUnreadableError|ActionError|ReleaseError"
    tuples = re.compile(rf"except \([^)]*\b({kinds})\b")
    found = [
        str(path.relative_to(root))
        for folder in ("handlers", "bot")
        for path in (root / folder).rglob("*.py")
        if "sandbox" not in path.parts and tuples.search(path.read_text())
    ]
    assert found == []
