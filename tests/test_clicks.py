"""Every click is one declaration in its capability's ``capability.py``: the registry refuses,
when it is built, two clicks answering one action id and an id of ActionId no click answers;
reading a click gives its typed action, or says the bot never offered it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.redact import Redactor
from bot.slack.failures import Failures
from bot.slack.listeners import Background, SlackEdge
from bot.slack.responder import Responder
from handlers.actions import ActionError, ActionId, Decide, Keep, OpenForm, Snooze
from handlers.capabilities import CAPABILITIES, REGISTRY
from handlers.capability import Capability
from handlers.policy import Policy, Role
from handlers.registry import Registry
from handlers.schedules.clicks import Night
from tests.conftest import ManualClock
from tests.test_services_unit import POLICY, make_bot


def test_the_shipped_table_answers_every_id_once() -> None:
    table = REGISTRY
    declared = {i for c in CAPABILITIES for click in c.clicks for i in click.ids}
    clickable = {f"open_form_{k}" for k, spec in table.forms.items() if spec.clickable}
    assert clickable >= {"open_form_resize", "open_form_delete", "open_form_schedule"}
    assert set(table.clicks) == declared | clickable
    assert declared >= {str(a) for a in ActionId}
    assert {"schedule_skip", "health_drain"} <= declared
    click, action = table.read_click("approve", "r-1")
    assert action == Decide("r-1", approve=True) and click.role == Role.VIEWER
    assert table.read_click("reject", "r-1")[1] == Decide("r-1", approve=False)
    assert table.read_click("idle_unkeep", "projects/p/x")[1] == Keep("projects/p/x", keep=False)
    assert table.read_click("idle_snooze", "3600|projects/p/x")[1] == Snooze("projects/p/x", 3600)
    assert table.read_click("open_form_delete", "delete")[1] == OpenForm("delete")
    assert table.read_click("idle_keep", "c")[0].names_cluster
    # a capability's own click, declared with its action id (handlers/schedules/capability.py)
    night = Night("sch-1", 1700000000, postpone=True)
    click, action = table.read_click(night.action_id, night.value)
    assert action == night and click.role == Role.OPERATOR


def test_a_collision_or_a_forgotten_id_fails_when_the_table_is_built() -> None:
    clicks = tuple(click for c in CAPABILITIES for click in c.clicks)
    approve = tuple(c for c in clicks if ActionId.APPROVE in c.ids)
    with pytest.raises(ValueError, match="two clicks answer the action id approve"):
        Registry((*CAPABILITIES, Capability("again", lambda k: None, clicks=approve)))
    kept = tuple(c for c in clicks if ActionId.RESTORE not in c.ids)
    with pytest.raises(ValueError, match="no click answers restore"):
        Registry((Capability("all", lambda k: None, clicks=kept),))


def test_a_click_never_offered_is_not_understood() -> None:
    table = REGISTRY
    with pytest.raises(ActionError, match="offers no action 'launch_missiles'"):
        table.read_click("launch_missiles", "")
    with pytest.raises(ActionError, match="carried nothing to act on"):
        table.read_click("approve", "")
    with pytest.raises(ActionError, match="snooze choice"):
        table.read_click("idle_snooze", "soon|c")


async def test_the_slack_listeners_answer_every_click_of_the_table() -> None:
    """Bolt routes a capability's click (Skip tonight) as it routes the core's: the listeners
    subscribe to the ids the dispatcher's table answers, not to a list of their own."""

    async def authorize(**_: Any) -> AuthorizeResult:  # no auth.test call to Slack
        return AuthorizeResult(enterprise_id=None, team_id="T0", bot_token="xoxb-test")

    app = AsyncApp(
        authorize=authorize,
        signing_secret="unused",
        request_verification_enabled=False,
        process_before_response=True,
    )
    dispatcher = make_bot(ManualClock(), Policy.model_validate(POLICY)).services.dispatcher
    responder = Responder(Redactor([]))
    failures = Failures(responder, lambda name, outcome: None)
    background = Background()
    SlackEdge(app, dispatcher, background, responder, failures=failures).register()

    async def status(action_id: str) -> int:
        payload = {
            "type": "block_actions",
            "user": {"id": "U0CAROL"},
            "actions": [{"action_id": action_id, "value": "sch-1|1700000000"}],
        }
        body = urlencode({"payload": json.dumps(payload)})
        return (await app.async_dispatch(AsyncBoltRequest(body=body, headers={}))).status

    assert await status("schedule_skip") == 200
    assert await status("approve") == 200
    assert await status("launch_missiles") == 404  # no listener: Bolt's unhandled request
    await background.drain()
    await responder.close()
