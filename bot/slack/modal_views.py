"""A form (``handlers/forms/model.py``) drawn as a Slack modal, and a submitted or changed
modal read back as the form's entries.

Each field is an input block whose ``block_id`` names the field, followed by its scope where
it has one (``min:a4``): choosing another pool gives the counts new blocks, and Slack starts
them afresh at that pool's own. Live fields set ``dispatch_action`` so the app hears of a
change and updates the view (https://docs.slack.dev/surfaces/modals#updating_views). The
form's state is the view's ``private_metadata`` (at most 3,000 characters). Limits: title,
submit and close at most 24 characters; an option's text at most 75
(https://docs.slack.dev/reference/views).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from bot.slack.render import mrkdwn
from handlers.forms.model import (
    Ask,
    BadState,
    Choice,
    Entries,
    Entry,
    Form,
    FormField,
    FormPart,
    FormState,
)
from handlers.replies import Fields, Note, Text

CALLBACK = "clusterbot_form"
CLUSTER_ACTION = "form_cluster"  # the one external select: its options are asked for


def unreadable_form(reference: str) -> dict[str, Any]:
    """What a person sees in place of a form whose metadata cannot be read."""
    text = (
        f"This form could not be read (reference `{reference}`); it has been logged. Close it "
        "and open it again with `/cluster`."
    )
    return {
        "type": "modal",
        "title": _plain("clusterbot"),
        "close": _plain("Close"),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


def _plain(text: str, limit: int = 75) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:limit] or " "}


def option(choice: Choice) -> dict[str, Any]:
    return {"text": _plain(choice.label), "value": choice.value[:150]}


def modal(form: Form) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": CALLBACK,
        "title": _plain(form.title, 24),
    }
    if form.submit is not None:
        view["submit"] = _plain(form.submit, 24)
    view["close"] = _plain("Cancel", 24)
    view["private_metadata"] = json.dumps(form.state.to_dict())
    view["blocks"] = [block for part in form.parts for block in _blocks(part)]
    return view


def _blocks(part: FormPart) -> list[dict[str, Any]]:
    if isinstance(part, FormField):
        return _field(part)
    if isinstance(part, Text):
        return [{"type": "section", "text": _text(mrkdwn(part.spans))}]
    if isinstance(part, Note):
        return [_context(mrkdwn(part.spans))]
    assert isinstance(part, Fields)
    # the figures a form shows are its costs, named so a test or a person can find them
    fields = [_text(f"*{item.label}*\n{mrkdwn(item.value)}") for item in part.items]
    return [{"type": "section", "block_id": "cost", "fields": fields}]


def _text(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text[:3000]}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_text(text)]}


def _field(field: FormField) -> list[dict[str, Any]]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": f"{field.name}:{field.scope}" if field.scope else field.name,
        "label": _plain(field.label, 2000),
        "element": _element(field),
        "optional": field.optional,
    }
    if field.live:
        block["dispatch_action"] = True
    if field.hint:
        block["hint"] = _plain(field.hint, 2000)
    if field.problem is None:
        return [block]
    problem = _context(f":warning: {field.problem}")
    problem["block_id"] = f"problem:{field.name}"
    return [block, problem]


def _element(field: FormField) -> dict[str, Any]:
    action = CLUSTER_ACTION if field.ask == Ask.FIND else f"form_{field.name}"
    element: dict[str, Any] = {"action_id": action}
    if field.ask in (Ask.FIND, Ask.CHOICE):
        chosen = next((c for c in field.choices if c.value == field.initial), None)
        if field.ask == Ask.FIND:
            element.update(type="external_select", min_query_length=0)
        else:
            element.update(type="static_select", options=[option(c) for c in field.choices])
        element["placeholder"] = _plain(field.placeholder, 150)
        if chosen is not None:
            element["initial_option"] = option(chosen)
    elif field.ask == Ask.COUNT:
        element.update(type="number_input", is_decimal_allowed=False)
        if field.live:
            element["dispatch_action_config"] = {"trigger_actions_on": ["on_character_entered"]}
        if field.initial is not None:
            element["initial_value"] = field.initial
    elif field.ask == Ask.FILE:
        element.update(type="file_input", filetypes=list(field.file_types), max_files=1)
    else:
        element["type"] = "plain_text_input"
        if field.ask == Ask.LONG_TEXT:
            element["multiline"] = True
        if field.initial is not None:  # Block Kit's plain_text_input takes initial_value
            element["initial_value"] = field.initial
    if field.max_length is not None:
        element["max_length"] = field.max_length
    return element


# -- reading a submitted or changed view ------------------------------------------------------


def state_of(view: dict[str, Any], kinds: Collection[str]) -> FormState:
    """The form's state from the view's ``private_metadata``; ``BadState`` when it is not
    what our forms write (a view with our callback id is not proof that we wrote it);
    ``kinds``: the kinds of form there are."""
    try:
        data = json.loads(str(view.get("private_metadata") or "") or "{}")
    except ValueError:
        raise BadState("private_metadata is not JSON") from None
    state = FormState.of(data)
    if state.kind not in kinds:
        raise BadState(f"no form of ours is a {state.kind[:40]!r} form")
    return state


def state_values(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The view's entries by block id, each the state entry of its one element, as Slack
    sends them: a value that is not text, a selected option that is not an object of text, or
    files that are not a list of objects are read as absent (a signed payload is not proof of
    its shape)."""
    state = view.get("state")
    raw = (state.get("values") if isinstance(state, dict) else None) or {}
    values: dict[str, dict[str, Any]] = {}
    for block, actions in raw.items() if isinstance(raw, dict) else ():
        entry = next(iter(actions.values()), None) if isinstance(actions, dict) else None
        if isinstance(entry, dict):
            values[str(block)] = _sane(entry)
    return values


def _sane(entry: dict[str, Any]) -> dict[str, Any]:
    entry = dict(entry)
    if not isinstance(entry.get("value"), str | None):
        entry["value"] = None
    chosen = entry.get("selected_option")
    if chosen is not None and not (
        isinstance(chosen, dict) and isinstance(chosen.get("value"), str)
    ):
        entry["selected_option"] = None
    files = entry.get("files")
    if files is not None:
        entry["files"] = (
            [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []
        )
    return entry


def entries_of(values: dict[str, dict[str, Any]]) -> Entries:
    """The entries by field name: a block ``min:a4`` is the field ``min``, entered for ``a4``."""
    entries: dict[str, Entry] = {}
    for block, value in values.items():
        chosen = value.get("selected_option") or {}
        name, _, scope = block.partition(":")
        entries[name] = Entry(
            text=value.get("value"),
            choice=str(chosen["value"]) if chosen.get("value") else None,
            files=tuple(value.get("files") or ()),
            scope=scope,
        )
    return entries


def block_of(values: dict[str, dict[str, Any]], field: str) -> str | None:
    """The block of the field named ``field`` (``min`` is ``min:a4``), if the form has it."""
    return next((b for b in values if b == field or b.startswith(field + ":")), None)
