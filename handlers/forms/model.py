"""The form model, beside ``Reply``: what a form shows and asks, with no platform in it.

A form is a title, a submit label and parts: fields to fill in, and the reply parts that
explain them (``Text``, ``Note``, ``Fields``). A field says what it asks for (a choice, a
count, a line or a long text, a file), what it starts with, whether a change to it redraws
the form (``live``), and what is wrong with it as typed (``problem``). What a person entered
comes back as ``Entries`` by field name. The form's ``state`` travels with it, so whichever
replica hears the next change or the submission knows what the form is about. A platform's
adapter draws a form (Slack: a modal, ``bot/slack/modal_views.py``) and reads its entries
back; the platform's own ids and limits are the adapter's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from handlers.replies import Fields, Note, Text


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


class Ask(StrEnum):
    """What a field asks for."""

    FIND = "find"  # one of the clusters, found as the person types
    CHOICE = "choice"  # one of the field's choices
    COUNT = "count"  # a whole number
    LINE = "line"  # a line of text
    LONG_TEXT = "long_text"  # several lines
    FILE = "file"  # an uploaded file


@dataclass(frozen=True)
class FormField:
    name: str  # the entry comes back under this name
    label: str
    ask: Ask
    choices: tuple[Choice, ...] = ()
    initial: str | None = None  # a choice's value, or the text or count to start with
    optional: bool = False
    live: bool = False  # a change redraws the form
    scope: str = ""  # the entry starts afresh when the scope changes (a count per pool)
    placeholder: str = ""
    hint: str = ""
    max_length: int | None = None
    file_types: tuple[str, ...] = ()
    problem: str | None = None  # what is wrong with it as typed, shown under it


FormPart = FormField | Text | Note | Fields


class BadState(ValueError):
    """A form's state is not what our forms write."""


@dataclass
class FormState:
    """What a form is about, carried with it between its changes and its submission."""

    kind: str  # handlers/forms/asks.FormKind
    channel: str  # where the request's card goes
    cluster: str | None = None  # full name once chosen (or the typed id until resolved)
    which: str | None = None  # SCRIPT: "prolog" or "epilog"; DRAIN: the node
    place: str | None = None  # SCRIPT: "add:N" or "replace:N" preset by the command

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def of(cls, data: object) -> FormState:
        """The state a form of ours carries; ``BadState`` for anything else (a form that
        says it is ours is not proof that we wrote its state)."""
        if not isinstance(data, dict):
            raise BadState("the form's state is not an object")
        fields = {k: data.get(k) for k in ("kind", "channel", "cluster", "which", "place")}
        if not isinstance(fields["kind"], str) or not isinstance(fields["channel"], str):
            raise BadState("the form's state has no form kind and channel")
        if any(v is not None and not isinstance(v, str) for v in fields.values()):
            raise BadState("the form's state has a field that is not text")
        return cls(**fields)  # type: ignore[arg-type]


@dataclass
class Form:
    state: FormState
    title: str
    submit: str | None  # None: nothing to submit yet (the cluster is being read)
    parts: list[FormPart] = field(default_factory=list)

    def add(self, *parts: FormPart) -> Form:
        self.parts.extend(parts)
        return self


@dataclass(frozen=True)
class Entry:
    """What was entered in one field: its text, the choice picked, the files uploaded (each
    as the platform describes it; the adapter reads their text)."""

    text: str | None = None
    choice: str | None = None
    files: tuple[Mapping[str, object], ...] = ()
    scope: str = ""  # the field's scope when it was entered (the pool a count was typed for)


Entries = Mapping[str, Entry]  # by field name
