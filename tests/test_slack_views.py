"""The stand-in's views keep Slack's documented rules: a trigger is single use within 3 s, a
modal stack holds three, an older hash is refused, and a view Slack would refuse is refused."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.views import Views


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def modal(title: str = "A form", **extra: Any) -> dict[str, Any]:
    return {"type": "modal", "title": {"type": "plain_text", "text": title}, "blocks": [], **extra}


def refused(code: str) -> Any:
    return pytest.raises(SlackError, match=f"^{code}$")


def test_a_trigger_is_single_use_within_three_seconds() -> None:
    clock = Clock()
    views = Views(lambda blocks: blocks, clock)
    trigger = views.issue_trigger("U1")
    views.open(trigger, modal())
    with refused("exchanged_trigger_id"):
        views.open(trigger, modal())
    late = views.issue_trigger("U1")
    clock.now += 3.5
    with refused("expired_trigger_id"):
        views.open(late, modal())
    with refused("invalid_trigger_id"):
        views.open("1.2.abc", modal())


def test_three_modals_at_most_and_an_old_hash_is_refused() -> None:
    views = Views(lambda blocks: blocks, Clock())
    first = views.open(views.issue_trigger("U1"), modal())
    views.push(views.issue_trigger("U1"), modal("second"))
    views.push(views.issue_trigger("U1"), modal("third"))
    with refused("push_limit_reached"):
        views.push(views.issue_trigger("U1"), modal("fourth"))
    old = first.hash
    views.update(first.id, None, modal("again"), old)
    with refused("hash_conflict"):
        views.update(first.id, None, modal("stale"), old)
    with refused("not_found"):
        views.update("VNOPE", None, modal(), None)


@pytest.mark.parametrize(
    "view",
    [
        modal("A title longer than 24 chars"),
        modal(blocks=[{"type": "divider"}] * 101),
        modal(
            blocks=[
                {
                    "type": "input",
                    "label": {"type": "plain_text", "text": "n"},
                    "element": {"type": "number_input", "action_id": "n"},
                }
            ]
        ),  # no submit with an input block, and number_input needs is_decimal_allowed
        modal(private_metadata="x" * 3001),
        {"type": "home", "blocks": []},  # views.open takes only a modal
    ],
)
def test_views_slack_refuses_are_refused(view: dict[str, Any]) -> None:
    views = Views(lambda blocks: blocks, Clock())
    with refused("invalid_arguments"):
        views.open(views.issue_trigger("U1"), view)


def test_a_view_over_250_kb_is_too_large() -> None:
    views = Views(lambda blocks: blocks, Clock())
    big = modal(blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}] * 90)
    with refused("view_too_large"):
        views.open(views.issue_trigger("U1"), big)


def test_entries_survive_an_update_that_keeps_their_ids() -> None:
    views = Views(lambda blocks: blocks, Clock())
    field = {
        "type": "input",
        "block_id": "count",
        "label": {"type": "plain_text", "text": "Count"},
        "element": {"type": "plain_text_input", "action_id": "n", "initial_value": "1"},
    }
    opened = views.open(views.issue_trigger("U1"), modal(blocks=[field], submit=field["label"]))
    assert opened.values["count"]["n"]["value"] == "1"
    views.enter(opened, "count", field["element"], "7", "http://x")
    views.update(opened.id, None, modal(blocks=[field], submit=field["label"]), None)
    assert opened.values["count"]["n"]["value"] == "7"
    renamed = {**field, "block_id": "count:2"}
    views.update(opened.id, None, modal(blocks=[renamed], submit=field["label"]), None)
    assert opened.values == {"count:2": {"n": {"type": "plain_text_input", "value": "1"}}}
