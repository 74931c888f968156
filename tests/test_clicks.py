"""Every click is one declaration, the core's in handlers/clicks.py and a capability's beside
the action its cards carry: the table refuses, when it is built, two clicks answering one
action id and an id of ActionId no click answers; reading a click gives its typed action, or
says the bot never offered it."""

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
from handlers.clicks import CLICKS, ClickTable
from handlers.policy import Policy, Role
from handlers.schedules.clicks import Night
from tests.conftest import ManualClock
from tests.test_services_unit import POLICY, make_bot


def test_the_shipped_table_answers_every_id_once() -> None:
    table = ClickTable()
    capabilities = {"schedule_skip", "schedule_postpone"}
    capabilities |= {"health_resume", "health_drain", "health_snooze", "health_show"}
    assert set(table.by_id) == {str(a) for a in ActionId} | capabilities
    click, action = table.read("approve", "r-1")
    assert action == Decide("r-1", approve=True) and click.role == Role.VIEWER
    assert table.read("reject", "r-1")[1] == Decide("r-1", approve=False)
    assert table.read("idle_unkeep", "projects/p/x")[1] == Keep("projects/p/x", keep=False)
    assert table.read("idle_snooze", "3600|projects/p/x")[1] == Snooze("projects/p/x", 3600)
    assert table.read("open_form_delete", "delete")[1] == OpenForm("delete")
    assert table.read("idle_keep", "c")[0].names_cluster
    # a capability's own click, declared beside its action (handlers/schedules/clicks.py)
    night = Night("sch-1", 1700000000, postpone=True)
    click, action = table.read(night.action_id, night.value)
    assert action == night and click.role == Role.OPERATOR


def test_a_collision_or_a_forgotten_id_fails_when_the_table_is_built() -> None:
    with pytest.raises(ValueError, match="two clicks answer the action id approve"):
        ClickTable((*CLICKS, CLICKS[0]))
    with pytest.raises(ValueError, match="no click answers restore"):
        ClickTable(tuple(c for c in CLICKS if ActionId.RESTORE not in c.ids))


def test_a_click_never_offered_is_not_understood() -> None:
    table = ClickTable()
    with pytest.raises(ActionError, match="offers no action 'launch_missiles'"):
        table.read("launch_missiles", "")
    with pytest.raises(ActionError, match="carried nothing to act on"):
        table.read("approve", "")
    with pytest.raises(ActionError, match="snooze choice"):
        table.read("idle_snooze", "soon|c")


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
