"""Modals and Home tabs as Slack keeps them, with the files a modal's file input takes.

A modal opens only on a ``trigger_id`` from an interaction: single use, within 3 s
(``exchanged_trigger_id``, ``expired_trigger_id``, ``invalid_trigger_id``:
https://docs.slack.dev/reference/methods/views.open). A user's modals form a stack of at most
three (``push_limit_reached``: https://docs.slack.dev/reference/methods/views.push). Every
view carries a ``hash``; ``views.update`` and ``views.publish`` given an older one answer
``hash_conflict`` (https://docs.slack.dev/reference/methods/views.update). A view over 250 kB
is ``view_too_large``. What the user entered is kept in ``state.values`` by block and action
id, and survives an update that keeps both ids.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.slack import blockkit
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.files import File as File

TRIGGER_LIFETIME = 3.0
MAX_STACK = 3
MAX_VIEW_BYTES = 250_000
REQUIRED = "This field is required."  # what Slack's client says under an empty required input


def _id(prefix: str) -> str:
    return prefix + "".join(secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(10))


def _option_of(element: dict[str, Any], value: Any) -> dict[str, Any] | None:
    for option in element.get("options") or []:
        if option.get("value") == value:
            return dict(option)
    return None


@dataclass
class View:
    id: str
    type: str  # "modal" or "home"
    user: str
    spec: dict[str, Any]
    hash: str
    root_id: str
    previous_id: str | None = None
    values: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # block_id -> message shown there
    suggested: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        title = self.spec.get("title") or {}
        return str(title.get("text") or ("Home" if self.type == "home" else ""))

    def inputs(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(block_id, element, block) for every element that holds a value or dispatches."""
        found = []
        for block in self.spec.get("blocks", []):
            block_id = str(block.get("block_id"))
            if block.get("type") == "input":
                found.append((block_id, block.get("element") or {}, block))
            elif block.get("type") == "actions":
                found += [(block_id, e, block) for e in block.get("elements", [])]
            elif isinstance(block.get("accessory"), dict):
                found.append((block_id, block["accessory"], block))
        return found

    def seed(self, previous: dict[str, dict[str, dict[str, Any]]]) -> None:
        """State after a (re)render: what the user entered under the same block and action
        ids is kept; other inputs start at their initial values."""
        self.values = {}
        for block_id, element, _block in self.inputs():
            action_id = str(element.get("action_id"))
            kept = previous.get(block_id, {}).get(action_id)
            if kept is not None:
                self.values.setdefault(block_id, {})[action_id] = kept
                continue
            kind = element.get("type")
            entry: dict[str, Any] | None = None
            if kind in ("plain_text_input", "number_input"):
                entry = {"type": kind, "value": element.get("initial_value")}
            elif kind in ("static_select", "external_select"):
                entry = {"type": kind, "selected_option": element.get("initial_option")}
            elif kind == "file_input":
                entry = {"type": kind, "files": []}
            if entry is not None:
                self.values.setdefault(block_id, {})[action_id] = entry

    def to_api(self, team_id: str, app_id: str, bot_id: str) -> dict[str, Any]:
        """Slack's view object, as views.* methods and interaction payloads carry it."""
        spec = self.spec
        return {
            "id": self.id,
            "team_id": team_id,
            "type": self.type,
            "title": spec.get("title"),
            "submit": spec.get("submit"),
            "close": spec.get("close"),
            "blocks": spec.get("blocks", []),
            "private_metadata": spec.get("private_metadata", ""),
            "callback_id": spec.get("callback_id", ""),
            "external_id": spec.get("external_id", ""),
            "state": {"values": self.values},
            "hash": self.hash,
            "clear_on_close": bool(spec.get("clear_on_close", False)),
            "notify_on_close": bool(spec.get("notify_on_close", False)),
            "root_view_id": self.root_id,
            "previous_view_id": self.previous_id,
            "app_id": app_id,
            "bot_id": bot_id,
        }

    def to_sandbox(self) -> dict[str, Any]:
        """What the JSON API and the page show of it."""
        return {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "blocks": self.spec.get("blocks", []),
            "submit": (self.spec.get("submit") or {}).get("text"),
            "close": (self.spec.get("close") or {}).get("text") or "Cancel",
            "callback_id": self.spec.get("callback_id", ""),
            "state": {"values": self.values},
            "errors": self.errors,
        }


@dataclass
class Trigger:
    user: str
    issued: float
    used: bool = False


class Views:
    """Every user's open modals (a stack) and Home tab, and the triggers handed out."""

    def __init__(
        self,
        generate_block_ids: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
        clock: Callable[[], float] = time.time,
        changed: Callable[[str], None] = lambda user: None,
    ) -> None:
        self.generate_block_ids = generate_block_ids
        self.clock = clock
        self.changed = changed
        self.triggers: dict[str, Trigger] = {}
        self.views: dict[str, View] = {}
        self.stacks: dict[str, list[str]] = {}
        self.homes: dict[str, str] = {}
        self.files: dict[str, File] = {}
        self.uploads: dict[str, Any] = {}  # files.getUploadURLExternal, not yet completed

    # -- triggers ----------------------------------------------------------------------------

    def issue_trigger(self, user: str) -> str:
        token = f"{secrets.randbelow(10**13)}.{secrets.randbelow(10**13)}.{secrets.token_hex(16)}"
        now = self.clock()
        for old in [t for t, v in self.triggers.items() if now - v.issued > 60]:
            del self.triggers[old]
        self.triggers[token] = Trigger(user, now)
        return token

    def exchange(self, token: str) -> str:
        """The user a trigger was issued for; it cannot be used again."""
        trigger = self.triggers.get(token)
        if trigger is None:
            raise SlackError("invalid_trigger_id")
        if trigger.used:
            raise SlackError("exchanged_trigger_id")
        if self.clock() - trigger.issued > TRIGGER_LIFETIME:
            raise SlackError("expired_trigger_id")
        trigger.used = True
        return trigger.user

    # -- views -------------------------------------------------------------------------------

    def _spec(self, raw: Any, kind: str) -> dict[str, Any]:
        if isinstance(raw, str):
            if len(raw.encode()) > MAX_VIEW_BYTES:
                raise SlackError("view_too_large")
            try:
                raw = json.loads(raw)
            except ValueError:
                raise SlackError("invalid_arguments") from None
        elif len(json.dumps(raw).encode()) > MAX_VIEW_BYTES:
            raise SlackError("view_too_large")
        errors = blockkit.view_problems(raw)
        if not errors and raw.get("type") != kind:
            errors = [f"must be a {kind} view [json-pointer:/view/type]"]
        if errors:
            raise SlackError(
                "invalid_arguments",
                response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
            )
        spec = dict(raw)
        spec["blocks"] = self.generate_block_ids(list(spec.get("blocks", [])))
        return spec

    def _new(self, user: str, spec: dict[str, Any], root: str | None, previous: str | None) -> View:
        view_id = _id("V")
        view = View(view_id, spec["type"], user, spec, self._hash(), root or view_id, previous)
        view.seed({})
        self.views[view_id] = view
        return view

    def _hash(self) -> str:
        return f"{self.clock():.0f}.{secrets.token_hex(4)}"

    def open(self, trigger_id: str, raw: Any) -> View:
        spec = self._spec(raw, "modal")
        user = self.exchange(trigger_id)
        self.clear(user, notify=False)
        view = self._new(user, spec, None, None)
        self.stacks[user] = [view.id]
        self.changed(user)
        return view

    def push(self, trigger_id: str, raw: Any) -> View:
        spec = self._spec(raw, "modal")
        user = self.exchange(trigger_id)
        stack = self.stacks.get(user) or []
        if not stack:
            raise SlackError("not_found")
        if len(stack) >= MAX_STACK:
            raise SlackError("push_limit_reached")
        view = self._new(user, spec, stack[0], stack[-1])
        stack.append(view.id)
        self.changed(user)
        return view

    def find(self, view_id: str | None, external_id: str | None = None) -> View:
        view = self.views.get(view_id or "")
        if view is None and external_id:
            view = next(
                (v for v in self.views.values() if v.spec.get("external_id") == external_id), None
            )
        if view is None:
            raise SlackError("not_found")
        return view

    def update(
        self, view_id: str | None, external_id: str | None, raw: Any, hash_: str | None
    ) -> View:
        view = self.find(view_id, external_id)
        spec = self._spec(raw, view.type)
        if hash_ and hash_ != view.hash:
            raise SlackError("hash_conflict")
        view.spec, view.hash, view.errors = spec, self._hash(), {}
        view.seed(view.values)
        self.changed(view.user)
        return view

    def publish(self, user: str, raw: Any, hash_: str | None) -> View:
        spec = self._spec(raw, "home")
        home = self.views.get(self.homes.get(user, ""))
        if home is None:
            home = self._new(user, spec, None, None)
            self.homes[user] = home.id
        else:
            if hash_ and hash_ != home.hash:
                raise SlackError("hash_conflict")
            home.spec, home.hash = spec, self._hash()
            home.seed(home.values)
        self.changed(user)
        return home

    def top(self, user: str) -> View | None:
        stack = self.stacks.get(user) or []
        return self.views[stack[-1]] if stack else None

    def close_top(self, user: str) -> None:
        stack = self.stacks.get(user) or []
        if stack:
            self.views.pop(stack.pop(), None)
        self.changed(user)

    def clear(self, user: str, *, notify: bool = True) -> None:
        for view_id in self.stacks.pop(user, []):
            self.views.pop(view_id, None)
        if notify:
            self.changed(user)

    def of_user(self, user: str) -> list[View]:
        found = [self.views[v] for v in self.stacks.get(user, []) if v in self.views]
        home = self.views.get(self.homes.get(user, ""))
        return found + ([home] if home is not None else [])

    # -- what the user enters ----------------------------------------------------------------

    def element(self, view: View, action_id: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
        for block_id, element, block in view.inputs():
            if element.get("action_id") == action_id:
                return block_id, element, block
        raise SlackError("no_such_element", status=404)

    def enter(
        self, view: View, block_id: str, element: dict[str, Any], value: Any, origin: str
    ) -> dict[str, Any]:
        """Put what the user typed, picked or attached into the view's state; refuse what
        Slack's own client would not let through."""
        kind = element.get("type")
        entry: dict[str, Any] = {"type": kind}
        if kind in ("plain_text_input", "number_input"):
            text = None if value is None or value == "" else str(value)
            if text is not None and kind == "number_input":
                text = _number(element, text)
            elif text is not None and len(text) > int(element.get("max_length") or 3000):
                raise SlackError("too_long", status=400)
            entry["value"] = text
        elif kind in ("static_select", "external_select"):
            chosen = None
            if value not in (None, ""):
                served = view.suggested.get(str(element.get("action_id")), {})
                chosen = _option_of(element, value) or served.get(str(value))
                if chosen is None:
                    raise SlackError("no_such_option", status=404)
            entry["selected_option"] = chosen
        elif kind == "file_input":
            given = value if isinstance(value, list) else [value] if value else []
            files = []
            for item in given[: int(element.get("max_files") or 10)]:
                stored = File(
                    _id("F"),
                    str(item.get("name") or "file.txt"),
                    str(item.get("content") or "").encode(),
                    view.user,
                    self.clock(),
                )
                self.files[stored.id] = stored
                files.append(stored.to_api(origin))
            entry["files"] = files
        elif kind == "button":
            return entry
        else:
            entry["value"] = value
        view.values.setdefault(block_id, {})[str(element.get("action_id"))] = entry
        return entry

    def missing(self, view: View) -> dict[str, str]:
        """Required inputs left empty: Slack's client refuses to submit and says so at each."""
        errors = {}
        for block_id, element, block in view.inputs():
            if block.get("type") != "input" or block.get("optional"):
                continue
            entry = view.values.get(block_id, {}).get(str(element.get("action_id"))) or {}
            if not (entry.get("value") or entry.get("selected_option") or entry.get("files")):
                errors[block_id] = REQUIRED
        return errors


def _number(element: dict[str, Any], text: str) -> str:
    """A number input takes digits (and a point when decimals are allowed) between its
    min_value and max_value; Slack's client refuses anything else before submitting
    (https://docs.slack.dev/reference/block-kit/block-elements/number-input-element)."""
    try:
        number = float(text) if element.get("is_decimal_allowed") else int(text)
    except ValueError:
        raise SlackError("not_a_number", status=400) from None
    low, high = element.get("min_value"), element.get("max_value")
    if (low is not None and number < float(low)) or (high is not None and number > float(high)):
        raise SlackError("out_of_range", status=400)
    return text
