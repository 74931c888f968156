"""A reply as JSON, so that a message owed is recorded whole before it is sent and sent as it
was meant, by whichever replica sends it. Buttons keep what a platform puts on them (their
action's id and value), which is all a renderer reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from handlers.replies import (
    Button,
    Buttons,
    Caution,
    ChannelRef,
    Code,
    Column,
    Confirm,
    Em,
    Field,
    Fields,
    Heading,
    Line,
    Link,
    Note,
    Part,
    Reply,
    Rule,
    Select,
    Span,
    Strong,
    Table,
    Text,
    Time,
    UserRef,
)


@dataclass(frozen=True)
class Wired:
    """An action read back from a recorded reply: its id and value, as the button had them."""

    action_id: str
    value: str


def _span(span: Span) -> Any:
    if isinstance(span, str):
        return span
    if isinstance(span, Strong | Em | Code):
        return {type(span).__name__: span.text}
    if isinstance(span, UserRef):
        return {"UserRef": span.user_id}
    if isinstance(span, ChannelRef):
        return {"ChannelRef": span.channel_id}
    if isinstance(span, Time):
        return {"Time": span.epoch}
    if isinstance(span, Link):
        return {"Link": [span.url, span.label]}
    return {"Caution": None}


SPANS: dict[str, Any] = {
    "Strong": Strong,
    "Em": Em,
    "Code": Code,
    "UserRef": UserRef,
    "ChannelRef": ChannelRef,
    "Time": Time,
    "Link": lambda pair: Link(pair[0], pair[1]),
    "Caution": lambda _: Caution(),
}


def _read_span(data: Any) -> Span:
    if isinstance(data, str):
        return data
    [(name, value)] = data.items()
    made: Span = SPANS[name](value)
    return made


def _line(line: Line) -> list[Any]:
    return [_span(s) for s in line]


def _read_line(data: list[Any]) -> Line:
    return tuple(_read_span(s) for s in data)


def _action(action: Any) -> list[str]:
    return [str(action.action_id), str(action.value)]


def _button(button: Button | Select) -> dict[str, Any]:
    if isinstance(button, Select):
        options = [[label, _action(a)] for label, a in button.options]
        return {"select": button.placeholder, "options": options}
    confirm = button.confirm
    return {
        "action": _action(button.action),
        "label": button.label,
        "style": button.style,
        "confirm": None
        if confirm is None
        else [confirm.title, _line(confirm.text), confirm.confirm, confirm.deny, confirm.danger],
    }


def _read_button(data: dict[str, Any]) -> Button | Select:
    if "select" in data:
        options = tuple((label, Wired(*a)) for label, a in data["options"])
        return Select(data["select"], options)
    confirm = data["confirm"]
    return Button(
        Wired(*data["action"]),
        data["label"],
        data["style"],
        None
        if confirm is None
        else Confirm(confirm[0], _read_line(confirm[1]), confirm[2], confirm[3], confirm[4]),
    )


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, Heading):
        return {"Heading": part.text}
    if isinstance(part, Text | Note):
        return {type(part).__name__: _line(part.spans)}
    if isinstance(part, Fields):
        return {"Fields": [[f.label, _line(f.value)] for f in part.items]}
    if isinstance(part, Rule):
        return {"Rule": None}
    if isinstance(part, Table):
        columns = [[c.title, c.right] for c in part.columns]
        return {"Table": [columns, [list(r) for r in part.rows]]}
    return {"Buttons": [_button(b) for b in part.buttons]}


def _read_part(data: dict[str, Any]) -> Part:
    [(name, value)] = data.items()
    if name == "Heading":
        return Heading(value)
    if name == "Text":
        return Text(*_read_line(value))
    if name == "Note":
        return Note(*_read_line(value))
    if name == "Fields":
        return Fields(tuple(Field(label, *_read_line(v)) for label, v in value))
    if name == "Rule":
        return Rule()
    if name == "Table":
        columns, rows = value
        return Table(tuple(Column(t, r) for t, r in columns), tuple(tuple(r) for r in rows))
    return Buttons(tuple(_read_button(b) for b in value))


def encode(reply: Reply) -> dict[str, Any]:
    return {
        "summary": reply.summary,
        "public": reply.public,
        "parts": [_part(p) for p in reply.parts],
    }


def decode(data: dict[str, Any]) -> Reply:
    parts = [_read_part(p) for p in data["parts"]]
    return Reply(data["summary"], parts, public=bool(data["public"]))
