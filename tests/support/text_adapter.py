"""A plain-text adapter for unit tests, in the manner of errbot's test backend: words go into
the core's dispatcher and every reply comes back as plain lines, with no Slack renderer in
between. What a reply says is tested here; how Slack draws it is the Slack renderer's test
(tests/test_render.py and the golden files)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.dispatch import Dispatcher
from handlers.forms.model import Ask, Form, FormField
from handlers.replies import (
    Button,
    Buttons,
    Caution,
    ChannelRef,
    Code,
    Em,
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


def span(part: Span) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Strong | Em):
        return f"*{part.text}*" if isinstance(part, Strong) else f"_{part.text}_"
    if isinstance(part, Code):
        return f"`{part.text}`"
    if isinstance(part, UserRef):
        return f"@{part.user_id}"
    if isinstance(part, ChannelRef):
        return f"#{part.channel_id}"
    if isinstance(part, Time):
        return datetime.fromtimestamp(part.epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")
    if isinstance(part, Link):
        return f"{part.label} <{part.url}>"
    assert isinstance(part, Caution)
    return "(!) "


def line(spans: Line) -> str:
    return "".join(span(s) for s in spans)


def _part(part: Part) -> list[str]:
    if isinstance(part, Heading):
        return [f"# {part.text}"]
    if isinstance(part, Text | Note):
        return line(part.spans).splitlines()
    if isinstance(part, Fields):
        return [f"{field.label}: {line(field.value)}" for field in part.items]
    if isinstance(part, Table):
        return part.lines()
    if isinstance(part, Rule):
        return ["---"]
    assert isinstance(part, Buttons)
    return [" ".join(_control(b) for b in part.buttons)]


def _control(control: Button | Select) -> str:
    """A control as its label and the action it takes: ``[Approve](approve)``."""
    if isinstance(control, Button):
        return f"[{control.label}]({control.action.action_id})"
    options = ", ".join(f"{label}({action.action_id})" for label, action in control.options)
    return f"[{control.placeholder} ▾ {options}]"


def text(reply: Reply | None) -> str:
    """Every part of the reply, one line each (a table a line a row)."""
    if reply is None:
        return ""
    return "\n".join(out for part in reply.parts for out in _part(part))


def form_text(form: Form) -> str:
    """A form as plain lines: its title, each field as ``[label: kind = initial]`` with its
    choices and the problem under it, and the parts that explain it."""
    out = [f"# {form.title}"]
    for part in form.parts:
        if isinstance(part, FormField):
            out += _form_field(part)
        else:
            out += _part(part)
    return "\n".join([*out, f"({form.submit})" if form.submit else "(nothing to submit yet)"])


def _form_field(field: FormField) -> list[str]:
    shown = f" = {field.initial}" if field.initial is not None else ""
    out = [f"[{field.label}: {field.ask}{shown}]{'' if field.optional else ' *'}"]
    if field.ask == Ask.CHOICE:
        out += [f"  - {choice.label}" for choice in field.choices]
    return out + ([f"  (!) {field.problem}"] if field.problem else [])


PERSON = re.compile(r"^@?([A-Za-z0-9_.-]+)$")


class TextPeople:
    """People as a plain-text chat names them: a person is any principal that is not an
    email (a pipeline's service account is one) or a ``kind:id`` (a schedule acting), named by
    their id with or without an @."""

    def is_person(self, principal: str) -> bool:
        return "@" not in principal and ":" not in principal

    def named(self, word: str) -> str | None:
        found = PERSON.match(word)
        return None if found is None else found.group(1)

    def is_group(self, member: str) -> bool:
        return member.startswith("group:")


@dataclass
class TextChat:
    """One conversation with the core: what a person types or clicks, answered in text."""

    dispatcher: Dispatcher
    channel: str = "C0INFRA"

    async def say(self, user: str, words: str) -> str:
        answer = await self.dispatcher.command(user, self.channel, words)
        return text(answer.reply)

    async def click(self, user: str, action: str, value: str) -> str:
        return text((await self.dispatcher.click(user, action, value, None)).reply)
