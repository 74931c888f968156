"""A platform-neutral reply: what the bot says, as semantic parts one renderer draws.

Text is a sequence of spans: a plain ``str`` (shown as it is, never read as markup, a mention
or a link), or ``Strong``, ``Em``, ``Code``, ``UserRef``, ``ChannelRef``, ``Time`` and
``Caution``. A table is columns and rows of plain cells; the renderer aligns them. Buttons
carry typed actions (``handlers.actions``). Nothing here knows how a platform writes any of
it: the Slack renderer (``bot/slack/render.py``) turns it into Block Kit and mrkdwn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from handlers.actions import Action


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Em:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class UserRef:
    """Someone who acted: a person, mentioned where the platform can, or another principal
    (the policy, a pipeline's service account), shown as a name."""

    user_id: str


@dataclass(frozen=True)
class ChannelRef:
    channel_id: str


@dataclass(frozen=True)
class Time:
    """A moment, shown in the reader's own time zone where the platform can."""

    epoch: float


@dataclass(frozen=True)
class Caution:
    """A warning sign before a line."""


@dataclass(frozen=True)
class Link:
    """A link: ``label`` to read, ``url`` to open (https only)."""

    url: str
    label: str


Span = str | Strong | Em | Code | UserRef | ChannelRef | Time | Caution | Link
Line = tuple[Span, ...]


def joined(items: Sequence[Span | Line], separator: str = ", ") -> Line:
    """Several spans (or lines) one after another with a separator between them."""
    out: list[Span] = []
    for i, item in enumerate(items):
        if i:
            out.append(separator)
        out.extend(item if isinstance(item, tuple) else (item,))
    return tuple(out)


def bullets(items: Sequence[str]) -> str:
    """Items one to a line, each after a bullet."""
    return "\n".join(f"• {item}" for item in items)


def plain(spans: Line) -> str:
    """The words of a line without any emphasis, for summaries and logs."""
    words = []
    for span in spans:
        if isinstance(span, str):
            words.append(span)
        elif isinstance(span, Strong | Em | Code):
            words.append(span.text)
        elif isinstance(span, Link):
            words.append(span.label)
        elif isinstance(span, UserRef):
            words.append(f"@{span.user_id}")
        elif isinstance(span, ChannelRef):
            words.append(f"#{span.channel_id}")
    return "".join(words)


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True, init=False)
class Text:
    spans: Line

    def __init__(self, *spans: Span) -> None:
        object.__setattr__(self, "spans", spans)


@dataclass(frozen=True, init=False)
class Note:
    """A small, muted line."""

    spans: Line

    def __init__(self, *spans: Span) -> None:
        object.__setattr__(self, "spans", spans)


@dataclass(frozen=True, init=False)
class Field:
    """A labelled value, laid out two to a row."""

    label: str
    value: Line

    def __init__(self, label: str, *value: Span) -> None:
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "value", value)


@dataclass(frozen=True)
class Fields:
    items: tuple[Field, ...]


@dataclass(frozen=True)
class Rule:
    pass


COLUMN_GAP = "  "  # between a table's columns


@dataclass(frozen=True)
class Column:
    title: str
    right: bool = False  # numbers align right


@dataclass(frozen=True)
class Table:
    """Rows of plain cells under titled columns; the renderer aligns the columns. With no
    titles, no header row is drawn."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def of(
        cls,
        titles: Sequence[str],
        rows: Sequence[Sequence[object]],
        right: frozenset[int] = frozenset(),
    ) -> Table:
        columns = tuple(Column(t, i in right) for i, t in enumerate(titles))
        return cls(columns, tuple(tuple(str(cell) for cell in row) for row in rows))

    def lines(self) -> list[str]:
        """The rows in monospace, each column padded to its widest cell, numbers aligned
        right (a last column of words is left ragged); the header only when the columns have
        titles."""
        titled = any(c.title for c in self.columns)
        rows = [tuple(c.title for c in self.columns), *self.rows] if titled else list(self.rows)
        count = len(self.columns)
        widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(count)]
        lines = []
        for row in rows:
            cells = []
            for i, cell in enumerate(row):
                if self.columns[i].right:
                    cells.append(cell.rjust(widths[i]))
                else:
                    cells.append(cell if i == count - 1 else cell.ljust(widths[i]))
            lines.append(COLUMN_GAP.join(cells).rstrip())
        return lines


@dataclass(frozen=True)
class Confirm:
    title: str
    text: Line
    confirm: str
    deny: str = "Cancel"
    danger: bool = False


@dataclass(frozen=True)
class Button:
    action: Action
    label: str
    style: str | None = None  # "primary" or "danger"
    confirm: Confirm | None = None


@dataclass(frozen=True)
class Select:
    """A menu: each option is a label and the action picking it takes."""

    placeholder: str
    options: tuple[tuple[str, Action], ...]


@dataclass(frozen=True)
class Buttons:
    buttons: tuple[Button | Select, ...]  # routing data is the renderer's to choose


Part = Heading | Text | Fields | Note | Rule | Table | Buttons


@dataclass
class Reply:
    summary: str  # the notification and fallback text, plain
    parts: list[Part] = field(default_factory=list)
    public: bool = False  # in the channel for everyone, or only for the person who asked

    def add(self, *parts: Part) -> Reply:
        self.parts.extend(parts)
        return self


class FixedReply(Reply):
    """A reply built once and never changed afterwards (the help texts): what it renders to
    may be kept and sent again."""


def notice(title: str, *spans: Span) -> Reply:
    """A short answer to the person who clicked or asked."""
    return Reply(title).add(Text(*spans))


def error_reply(reason: str, usage: str | None = None) -> Reply:
    """A one-line reason, and the usage when the input was at fault."""
    reply = Reply(summary=reason).add(Text(reason))
    if usage:
        reply.add(Note(usage))
    return reply
