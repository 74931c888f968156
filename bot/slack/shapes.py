"""The shape each kind of signed Slack request must have before Bolt sees it.

Bolt's matchers index a payload as Slack documents it (``body["actions"][0]["action_id"]``,
``body["user"]["id"]``): a signed body of another shape (truncated JSON, ``actions: []``, a
view without ``state``) raises inside Bolt and is answered 500, or fails in a task after the
ack. Slack never sends such a body, so one that arrives is refused here, with a reference in
the log, and answered 400. The fields checked are the ones clusterbot's listeners read; the
shapes are those of the payload reference pages (https://docs.slack.dev/reference/
interaction-payloads/block_actions-payload, .../view-interactions-payload,
.../block_suggestion-payload, https://docs.slack.dev/interactivity/implementing-slash-
commands, https://docs.slack.dev/reference/events/app_home_opened).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _user(body: dict[str, Any]) -> str | None:
    user = body.get("user")
    if not isinstance(user, dict) or not _text(user.get("id")):
        return "no user.id"
    return None


def _block_actions(body: dict[str, Any]) -> str | None:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return "actions is not a non-empty list"
    if not all(isinstance(a, dict) and _text(a.get("action_id")) for a in actions):
        return "an action has no action_id"
    if not _text(body.get("trigger_id")):  # every click carries one (a form may open on it)
        return "no trigger_id"
    return _user(body)


def _view(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    if not isinstance(view, dict):
        return "no view"
    if not all(_text(view.get(k)) for k in ("callback_id", "id")):
        return "the view has no callback_id or id"
    if view.get("type") not in ("modal", "home"):  # the views clusterbot opens
        return "the view is not a modal or a Home tab"
    if "private_metadata" in view and not _text(view["private_metadata"]):
        return "the view's private_metadata is not text"
    state = view.get("state", {"values": {}})
    if not isinstance(state, dict) or not isinstance(state.get("values", {}), dict):
        return "the view's state.values is not an object"
    return _user(body)


def _suggestion(body: dict[str, Any]) -> str | None:
    if not _text(body.get("action_id")):
        return "no action_id"
    if "value" in body and not _text(body["value"]):
        return "value is not text"
    return _user(body)


# Where Bolt reads an id from a payload and the parts of an event it looks into (its
# ``extract_user_id``, ``extract_team_id``, ``extract_channel_id``, ``extract_enterprise_id``):
# each is an id (text) or an object with one, as in Slack's event types
# (https://docs.slack.dev/reference/events: ``user`` is an id in message and app_home_opened,
# an object in user_change; ``channel`` an object in channel_created).
IDS = ("user", "team", "channel", "enterprise", "organization")
INNER = ("message", "previous_message", "item", "assistant_thread")


def _ids(part: dict[str, Any], where: str) -> str | None:
    for key in IDS:
        value = part.get(key)
        if value is not None and not isinstance(value, str | dict):
            return f"{where}{key} is neither an id nor an object"
    return None


def _event(body: dict[str, Any]) -> str | None:
    event = body.get("event")
    if not isinstance(event, dict) or not _text(event.get("type")):
        return "no event.type"
    authorizations = body.get("authorizations")
    if authorizations is not None and not (
        isinstance(authorizations, list) and all(isinstance(a, dict) for a in authorizations)
    ):
        return "authorizations is not a list of objects"
    for part, where in [
        (body, ""),
        (event, "event."),
        *((event[k], f"event.{k}.") for k in INNER if isinstance(event.get(k), dict)),
        *((a, "authorizations[].") for a in authorizations or []),
    ]:
        problem = _ids(part, where)
        if problem is not None:
            return problem
    if event["type"] == "app_home_opened" and not _text(event.get("user")):
        return "app_home_opened without a user"
    if event["type"] == "workflow_step_execute" and not isinstance(
        event.get("workflow_step"), dict
    ):
        return "workflow_step_execute without its step"
    return None


PAYLOADS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "block_actions": _block_actions,
    "view_submission": _view,
    "view_closed": _view,
    "block_suggestion": _suggestion,
    "event_callback": _event,
    "url_verification": lambda body: None if _text(body.get("challenge")) else "no challenge",
}


# The parts of a payload that Slack sends as objects, where Bolt reads into them.
OBJECTS = ("view", "message", "container", "channel", "team", "user", "enterprise", "event")


# A slash command's form fields that the listeners read (checked without parsing the whole
# form: this runs on every command, the request clusterbot answers most).
COMMAND_FIELDS = {name: re.compile(rf"(?:^|&){name}=[^&]") for name in ("command", "user_id")}


def _command(body: str) -> str | None:
    for name, present in COMMAND_FIELDS.items():
        if not present.search(body):
            return f"a slash command without a {name}"
    return None


def shape_problem(body: str, content_type: str) -> str | None:
    """What is wrong with a signed request's body, or None when Bolt may take it."""
    if "json" in content_type:
        try:
            document = json.loads(body)
        except ValueError:
            return "the body is not JSON"
        except RecursionError:  # Slack's payloads nest a dozen levels at most
            return "the body nests deeper than any payload Slack sends"
    else:
        if not body.startswith("payload=") and "&payload=" not in body:
            # Slack's certificate check, which Bolt answers, or a slash command
            return None if "ssl_check=" in body else _command(body)
        payload = parse_qs(body, keep_blank_values=True).get("payload") or [""]
        try:
            document = json.loads(payload[0])
        except ValueError:
            return "the payload is not JSON"
        except RecursionError:
            return "the payload nests deeper than any payload Slack sends"
    if not isinstance(document, dict) or not _text(document.get("type")):
        return "the payload is not an object with a type"
    check = PAYLOADS.get(document["type"])
    if check is None:  # Bolt's own report of an unhandled request fails on odd shapes
        return f"a payload of type {document['type'][:40]!r}, which clusterbot does not take"
    for part in OBJECTS:
        if part in document and not isinstance(document[part], dict | None):
            return f"{part} is not an object"
    return check(document)
