"""What a user does in a modal or the Home tab, delivered to the app as Slack delivers it.

- A pick or a click in a view whose element dispatches: a ``block_actions`` payload with
  ``container.type`` "view" and the whole view, state included, and no ``response_url``
  (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload).
- A submit: ``view_submission``; the ack's body decides what the modal does next
  (``response_action``: ``errors`` shows messages at their input blocks, ``update`` and
  ``push`` show a new view, ``clear`` closes every view; an empty ack closes this one:
  https://docs.slack.dev/surfaces/modals#interactions); any other answer leaves the modal
  open under Slack's "We had some trouble connecting" banner.
- Typing in an external select: ``block_suggestion``; the ack's body holds ``options`` (at
  most 100) (https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element).
- Opening the Home tab: the Events API's ``app_home_opened`` in an ``event_callback``
  envelope, signed JSON (https://docs.slack.dev/reference/events/app_home_opened).
"""

from __future__ import annotations

import json
import secrets
from typing import Any
from urllib.parse import urlencode

import aiohttp

from bot.sandbox.slack.delivery import Delivery, send
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.views import View
from bot.sandbox.slack.workspace import User, Workspace

MAX_OPTIONS = 100
TROUBLE = "We had some trouble connecting. Try again?"


def _common(ws: Workspace, user: User, view: View) -> dict[str, Any]:
    return {
        "user": {"id": user.id, "username": user.name, "name": user.name, "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "sandbox-verification-token",
        "team": {"id": ws.team_id, "domain": ws.team_domain},
        "enterprise": (
            {"id": ws.enterprise_id, "name": ws.enterprise_name or ""} if ws.enterprise_id else None
        ),
        "is_enterprise_install": False,
        "view": view.to_api(ws.team_id, ws.app_id, ws.bot_id),
    }


def _view_of(ws: Workspace, user: User, view_id: str) -> View:
    view = ws.views.views.get(view_id)
    if view is None or view.user != user.id:
        raise SlackError("view_not_found", status=404)  # not open for this user
    return view


async def _interactive(
    session: aiohttp.ClientSession, ws: Workspace, payload: dict[str, Any]
) -> Delivery:
    return await send(
        session, ws, "interactive", payload, urlencode({"payload": json.dumps(payload)})
    )


async def deliver_view_action(
    ws: Workspace,
    session: aiohttp.ClientSession,
    origin: str,
    user: User,
    view_id: str,
    action_id: str,
    value: Any,
) -> Delivery:
    """The user picks, types or clicks in a view. The value goes into the view's state; the
    app hears of it when the element is a button, a select outside an input block, or in an
    input block with ``dispatch_action``."""
    view = _view_of(ws, user, view_id)
    block_id, element, block = ws.views.element(view, action_id)
    entry = ws.views.enter(view, block_id, element, value, origin)
    dispatches = block.get("type") != "input" or bool(block.get("dispatch_action"))
    if not dispatches:
        return Delivery(200, "")
    action: dict[str, Any] = {
        "type": element.get("type"),
        "action_id": action_id,
        "block_id": block_id,
        "action_ts": ws.next_ts(),
        **{k: v for k, v in entry.items() if k != "type"},
    }
    if element.get("type") == "button":
        action["text"] = element.get("text")
        if "value" in element:
            action["value"] = element["value"]
    payload = {
        "type": "block_actions",
        **_common(ws, user, view),
        "container": {"type": "view", "view_id": view.id},
        "trigger_id": ws.views.issue_trigger(user.id),
        "actions": [action],
    }
    return await _interactive(session, ws, payload)


async def deliver_submission(
    ws: Workspace,
    session: aiohttp.ClientSession,
    origin: str,
    user: User,
    view_id: str,
    values: dict[str, dict[str, Any]],
) -> tuple[Delivery, dict[str, str]]:
    """Submit the user's top modal with these entries; returns what the app answered and the
    errors now shown in the modal (empty when it closed or moved on)."""
    view = _view_of(ws, user, view_id)
    if ws.views.top(user.id) is not view:
        raise SlackError("view_not_found", status=404)  # only the top modal has a submit
    for block_id, actions in (values or {}).items():
        for action_id, value in actions.items():
            found_block, element, _block = ws.views.element(view, action_id)
            if found_block != block_id:
                raise SlackError("no_such_element", status=404)
            ws.views.enter(view, block_id, element, value, origin)
    missing = ws.views.missing(view)
    if missing:  # Slack's client does not send the submission
        view.errors = missing
        ws.publish_views(user.id)
        return Delivery(None, "", "required fields are empty"), missing
    payload = {
        "type": "view_submission",
        **_common(ws, user, view),
        "trigger_id": ws.views.issue_trigger(user.id),
        "response_urls": [],
    }
    delivery = await _interactive(session, ws, payload)
    if delivery.status != 200:
        return delivery, _trouble(ws, user, view)
    try:
        return delivery, _after_submit(ws, user, view, delivery.body)
    except SlackError:  # a view in the answer that Slack would refuse
        return delivery, _trouble(ws, user, view)


def _trouble(ws: Workspace, user: User, view: View) -> dict[str, str]:
    """Slack keeps the modal open, what was typed in it kept, with its banner "We had some
    trouble connecting. Try again?" above it (and nothing at any field)."""
    view.errors = {"": TROUBLE}
    ws.publish_views(user.id)
    return view.errors


def _after_submit(ws: Workspace, user: User, view: View, body: str) -> dict[str, str]:
    """The modal after the app's answer to a submission. An empty body closes the modal; a
    body must otherwise be a JSON object with a ``response_action`` Slack knows. ``errors``
    is keyed by the ``block_id`` of an input block of the view
    (https://docs.slack.dev/surfaces/modals, "Displaying errors in views"): a body of another
    shape, or errors naming another block, is shown as the trouble banner instead, the
    app's messages nowhere (reported of Slack's client in slackapi/bolt-js#554,
    slack-go/slack#1013, slackapi/bolt-python#922)."""
    if not body.strip():
        ws.views.close_top(user.id)
        return {}
    try:
        answer = json.loads(body)
    except ValueError:
        return _trouble(ws, user, view)
    action = answer.get("response_action") if isinstance(answer, dict) else None
    if action == "errors":
        errors = answer.get("errors")
        inputs = {block_id for block_id, _e, block in view.inputs() if block["type"] == "input"}
        if not isinstance(errors, dict) or not errors or not set(errors) <= inputs:
            return _trouble(ws, user, view)
        view.errors = {str(k): str(v) for k, v in errors.items()}
        ws.publish_views(user.id)
        return view.errors
    if action == "update":
        ws.views.update(view.id, None, answer.get("view"), None)
    elif action == "push":
        trigger = ws.views.issue_trigger(user.id)
        ws.views.push(trigger, answer.get("view"))
    elif action == "clear":
        ws.views.clear(user.id)
    else:
        return _trouble(ws, user, view)
    return {}


async def deliver_suggestion(
    ws: Workspace,
    session: aiohttp.ClientSession,
    user: User,
    view_id: str,
    action_id: str,
    typed: str,
) -> list[dict[str, Any]]:
    """The options the app offers for what the user typed in an external select."""
    view = _view_of(ws, user, view_id)
    block_id, element, _block = ws.views.element(view, action_id)
    if element.get("type") != "external_select":
        raise SlackError("not_an_external_select", status=400)
    payload = {
        "type": "block_suggestion",
        **_common(ws, user, view),
        "container": {"type": "view", "view_id": view.id},
        "action_id": action_id,
        "block_id": block_id,
        "value": typed,
    }
    delivery = await _interactive(session, ws, payload)
    if delivery.status != 200 or not delivery.body.strip():
        return []
    try:
        answer = json.loads(delivery.body)
    except ValueError:
        return []
    options = [o for o in (answer.get("options") or [])[:MAX_OPTIONS] if isinstance(o, dict)]
    served = view.suggested.setdefault(action_id, {})
    for option in options:
        served[str(option.get("value"))] = option
    return options


async def deliver_home_opened(
    ws: Workspace, session: aiohttp.ClientSession, user: User
) -> Delivery:
    """The user opens the app's Home tab."""
    home = ws.views.views.get(ws.views.homes.get(user.id, ""))
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user.id,
        "channel": f"D0{user.id[1:]}",  # the app's DM with the user
        "tab": "home",
        "event_ts": ws.next_ts(),
    }
    if home is not None:
        event["view"] = home.to_api(ws.team_id, ws.app_id, ws.bot_id)
    envelope = {
        "token": "sandbox-verification-token",
        "team_id": ws.team_id,
        "api_app_id": ws.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{secrets.token_hex(5).upper()}",
        "event_time": int(ws.clock()),
        "authorizations": [
            {
                "enterprise_id": ws.enterprise_id,
                "team_id": ws.team_id,
                "user_id": ws.bot.id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }
    return await send(session, ws, "events_api", envelope, json.dumps(envelope), "application/json")
