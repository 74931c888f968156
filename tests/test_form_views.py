"""Forms are declared in the core (``handlers/forms/views.py``) with no platform in them; the
Slack adapter draws them as modals. Each modal is pinned by a golden file, and each passes
the stand-in's checks of a view as Slack states them.

Regenerate after an intended change with: UPDATE_GOLDEN=1 make test, then review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.slack.blockkit import view_problems
from bot.slack.modal_views import entries_of, modal, state_of, state_values, unreadable_form
from handlers.capabilities import REGISTRY
from handlers.forms.choices import Estimate, Forms
from handlers.forms.flow import FormFlow
from handlers.forms.model import Ask, BadState, Choice, Entry, Form, FormField, FormState
from handlers.forms.views import (
    delete_form,
    resize_form,
    script_form,
    setting_form,
)
from handlers.policy import Policy
from handlers.replies import Strong
from handlers.schedules.form import schedule_form
from tests.conftest import ManualClock
from tests.support.golden import assert_golden
from tests.test_services_unit import POLICY, make_bot

GOLDEN = Path(__file__).parent / "golden" / "forms"


FORMS = REGISTRY.forms  # every capability's forms, by kind


def loading(state: FormState, note: str) -> Form:
    return FORMS[state.kind].loading(state, note)


TRAIN01 = "projects/p/locations/us-central1/modelDevelopmentClusters/train01"
CHOSEN = Choice(TRAIN01, "train01 · us-central1 · $1,234.00/h")
POOLS = [
    Choice("a4", "a4 · a4-highgpu-8g · 2 nodes"),
    Choice("login", "login · n2-standard-8 · 1 node, login"),
]


def state(kind: str, cluster: str | None = TRAIN01, **extra: str) -> FormState:
    return FormState(kind, "C0X", cluster, **extra)


PRICED = Estimate("$1,234.00/h", "$600.00/h – $1,200.00/h", "-$634.00/h")
PROBLEMS = {
    "min": "MIN -1: a node count cannot be negative",
    "max": "'x' is not a whole number of nodes",
}
CASES = {
    "resize_empty": lambda: resize_form(state("resize", None), None),
    "resize_note": lambda: resize_form(
        state("resize", None), None, note="No cluster train09 in the targets"
    ),
    "resize_pools": lambda: resize_form(state("resize"), CHOSEN, POOLS),
    "resize_pool": lambda: resize_form(state("resize"), CHOSEN, POOLS, "a4", (2, 4), PRICED),
    "resize_problems": lambda: resize_form(
        state("resize"),
        CHOSEN,
        POOLS,
        "a4",
        (2, 2),
        Estimate("$1,234.00/h", "-", "-"),
        problems=PROBLEMS,
    ),
    "delete_empty": lambda: delete_form(state("delete", None), None),
    "delete_chosen": lambda: delete_form(
        state("delete"),
        CHOSEN,
        "train01",
        (
            "This deletes ",
            Strong("train01"),
            ": pools a4 (2 nodes), login (1 node); it costs $1,234.00/h now.",
        ),
    ),
    "script_add": lambda: script_form(
        state("script", which="prolog"),
        "train01",
        [
            Choice("add:3", "add at the end (place 3)"),
            Choice("add:1", "add at place 1"),
            Choice("replace:1", "replace prolog 1"),
        ],
        ["#!/bin/bash", "echo hi"],
    ),
    "script_replace": lambda: script_form(
        state("script", which="epilog", place="replace:1"),
        "train01",
        [Choice("add:2", "add at the end (place 2)"), Choice("replace:1", "replace epilog 1")],
        ["#!/bin/sh"],
    ),
    "script_none": lambda: script_form(
        state("script", which="prolog"),
        "train01",
        [Choice("add:1", "add at the end (place 1)")],
        [],
    ),
    "setting": lambda: setting_form(
        state("setting"),
        "train01",
        [
            Choice("MaxJobCount", "MaxJobCount (not set)"),
            Choice("SchedulerParameters", "SchedulerParameters = bf_continue"),
        ],
    ),
    "loading_resize": lambda: loading(state("resize", "train01"), "Looking up train01…"),
    "loading_script": lambda: loading(
        state("script", "train01", which="epilog"), "Looking up train01…"
    ),
    "loading_setting": lambda: loading(state("setting", "train01"), "Looking up train01…"),
    "loading_schedule": lambda: loading(state("schedule", "train01"), "Looking up train01…"),
    "schedule_empty": lambda: schedule_form(state("schedule", None), None),
    "schedule_chosen": lambda: schedule_form(
        state("schedule"),
        CHOSEN,
        POOLS[:1],
        "a4",
        "Europe/Berlin",
        problems={"off_time": "'25:00' is not a time of day: write HH:MM, 00:00 to 23:59"},
    ),
}


def drawn(name: str) -> dict[str, Any]:
    return unreadable_form("ab12cd34") if name == "unreadable" else modal(CASES[name]())


@pytest.mark.parametrize("name", [*sorted(CASES), "unreadable"])
def test_each_form_draws_as_its_golden_modal(name: str) -> None:
    view = drawn(name)
    assert view_problems(view) == []  # Slack would take it
    assert_golden(GOLDEN / f"{name}.json", view)


def test_every_golden_form_has_a_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == {*CASES, "unreadable"}


def test_what_a_person_typed_is_escaped_in_the_modal() -> None:
    """A script's first line is shown as written: it cannot become a link or a mention."""
    form = script_form(state("script", which="prolog"), "train01", [], ["echo <@U1> & <!here>"])
    text = modal(form)["blocks"][0]["text"]["text"]
    assert "`echo &lt;@U1&gt; &amp; &lt;!here&gt;`" in text


def test_a_modal_reads_back_as_the_forms_state_and_entries() -> None:
    view = modal(resize_form(state("resize"), CHOSEN, POOLS, "a4", (2, 4), PRICED))
    view["state"] = {
        "values": {
            "cluster": {"form_cluster": {"selected_option": {"value": TRAIN01}}},
            "pool": {"form_pool": {"selected_option": {"value": "a4"}}},
            "min:a4": {"form_min": {"value": "3"}},
            "max:a4": {"form_max": {"value": 7}},  # not text: read as absent
        }
    }
    assert state_of(view, FORMS) == state("resize")
    entries = entries_of(state_values(view))
    assert entries["cluster"] == Entry(choice=TRAIN01) and entries["pool"].choice == "a4"
    assert entries["min"] == Entry(text="3", scope="a4") and entries["max"] == Entry(scope="a4")
    forged = json.dumps({"kind": "launch", "channel": "C0X"})  # no form of ours
    for metadata in ("[]", "not json", json.dumps({"kind": "resize"}), forged):
        with pytest.raises(BadState):
            state_of({"private_metadata": metadata}, FORMS)


def test_every_form_opens_under_its_own_title() -> None:
    """While its cluster is read, a form has its own title (the schedule's read "Add a
    prolog script" when its kind had no title of its own)."""
    core = make_bot(ManualClock(), Policy.model_validate(POLICY)).services
    flow = FormFlow(Forms(core.directory, core.approvals.prices), core.dispatcher, None)
    for kind, spec in FORMS.items():
        opening = flow.first(FormState(kind, "C0X", "train01", which="epilog"))
        assert opening.title == spec.title_of(opening.state) and opening.submit is None
    schedule = flow.first(FormState("schedule", "C0X", "train01"))
    assert schedule.title == "Off-hours schedule"


def test_a_field_with_a_scope_gets_a_block_of_its_own_per_scope() -> None:
    """Choosing another pool must start the counts afresh: Slack keeps what was typed in a
    block whose id stays, so the pool is part of the count's block id."""
    field = FormField("min", "Min nodes", Ask.COUNT, initial="2", live=True, scope="a4")
    form = resize_form(state("resize"), CHOSEN, POOLS, "a4", (2, 4))
    assert field in form.parts
    ids = [b.get("block_id") for b in modal(form)["blocks"]]
    assert "min:a4" in ids and "max:a4" in ids
