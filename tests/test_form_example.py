"""The form worked example of docs/ARCHITECTURE.md is true: its kind of form, taken from the
page and registered with one entry, opens, is looked up, drawn, checked and submitted into its
typed command by the same FormFlow as every other form, and drawn by the Slack adapter as a
modal that passes the stand-in's checks of a view."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.slack.blockkit import view_problems
from bot.slack.modal_views import modal
from handlers.capabilities import CAPABILITIES
from handlers.changes.capability import CHANGES
from handlers.forms.choices import Forms
from handlers.forms.flow import FormFlow
from handlers.forms.model import Entry, FormState
from handlers.forms.spec import Filled
from handlers.policy import Policy
from handlers.registry import Registry
from tests.conftest import ManualClock
from tests.support.page import module_from_page
from tests.support.text_adapter import form_text, text
from tests.test_services_unit import C1, POLICY, make_bot

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "ARCHITECTURE.md"


def test_the_page_counts_the_files_it_touches() -> None:
    text = PAGE.read_text()
    assert (
        "capability's `forms`, plus `form=` on\nthe subcommand whose words open it: **3 files**"
        in text
    )
    declared = (ROOT / "handlers" / "changes" / "capability.py").read_text()
    [line] = [ln for ln in declared.splitlines() if ln.strip().startswith("forms=(")]
    assert line.removesuffix("),") + ", LABEL_FORM)," in text  # the entry is one name more


@pytest.fixture
def label(tmp_path: Path) -> Iterator[Any]:
    module = module_from_page("# handlers/forms/label.py", "label_form_example", tmp_path)
    yield module
    sys.modules.pop("label_form_example", None)


def with_label(label: Any) -> Registry:
    """The capabilities with the example's one entry: the form in the changes capability
    (in place of one of its kind a project that has the example already declares)."""
    shipped = [
        replace(c, forms=tuple(f for f in c.forms if f.kind != "label")) for c in CAPABILITIES
    ]
    changes = replace(CHANGES, forms=(*CHANGES.forms, label.LABEL_FORM))
    return Registry([changes if c.name == CHANGES.name else c for c in shipped])


async def test_the_example_form_runs_through_the_same_flow(label: Any) -> None:
    registry = with_label(label)
    core = make_bot(ManualClock(), Policy.model_validate(POLICY), registry=registry).services
    forms = Forms(core.directory, core.approvals.prices)
    flow = FormFlow(forms, core.dispatcher, None)
    assert label.label_form([]) == label.FormAsk("label", None)
    assert label.label_form(["c1", "team"]) is None  # the words say it all

    state = FormState("label", "C0X", "c1")
    opening = flow.first(state)
    assert opening.title == "Set a cluster label" and "Looking up c1…" in form_text(opening)
    drawn = await flow.filled(state, None)  # the cluster read through the control plane
    shown = form_text(drawn)
    assert "[Key: line] *" in shown and "[Value (empty: remove it): line]" in shown
    assert view_problems(modal(drawn)) == []  # Slack draws it as a valid modal
    assert registry.last_field("label") == "value" and state.cluster == C1

    cluster = await forms.cluster(C1, "label")
    spec = registry.forms["label"]
    bad, errors = spec.command(forms, Filled(state, cluster, {"key": Entry(text="Team!")}))
    assert bad is None and errors == {"key": "a key is lower case letters, digits, - and _"}
    typed = {"key": Entry(text="team"), "value": Entry(text="ml")}
    good, errors = spec.command(forms, Filled(state, cluster, typed))
    assert errors == {} and good == label.Label(C1, "team", "ml")
    # a button may open it: the registry answers its id (where forms cannot open, in words)
    answer = await core.dispatcher.click("U0ALICE", "open_form_label", "label", None)
    assert answer.reply is not None and "Type /cluster label" in text(answer.reply)
