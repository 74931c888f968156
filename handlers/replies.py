"""A platform-neutral reply: what the bot says, in parts one renderer turns into Block Kit.

Text parts use light markup (``*bold*``, ``_italic_``, `` `code` ``); anything that came from a
user or the control plane goes through ``escape`` first, so it can never become markup,
mentions or links.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def escape(text: object) -> str:
    """Neutralise ``&``, ``<`` and ``>`` so text cannot mention, link or break markup."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int, tail: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, never inside an escaped entity
    (``&amp;``) or a ``<...>`` mention, link or date, which would show as garbage."""
    if len(text) <= limit:
        return text
    cut = max(0, limit - len(tail))
    head = text[:cut]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    angle = head.rfind("<")
    if angle != -1 and ">" not in head[angle:]:
        head = head[:angle]
    return head + tail


def mention(user_id: str) -> str:
    return f"<@{escape(user_id)}>"


@dataclass(frozen=True)
class Heading:
    text: str  # plain text


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Fields:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Note:
    """A small, muted line (context)."""

    text: str


@dataclass(frozen=True)
class Rule:
    pass


@dataclass(frozen=True)
class Table:
    """Preformatted rows; the renderer splits long tables across messages' limits."""

    lines: tuple[str, ...]

    @classmethod
    def of(
        cls,
        header: tuple[str, ...],
        rows: Sequence[tuple[str, ...]],
        right: frozenset[int] = frozenset(),
    ) -> Table:
        """Columns aligned to their widest cell (the last column is left ragged); cells are
        escaped here. ``right`` names the columns to align right (numbers)."""
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        lines = []
        for row in [header, *rows]:
            cells = []
            for i, cell in enumerate(row):
                text = str(cell)
                if i == len(row) - 1:
                    cells.append(text)
                elif i in right:
                    cells.append(text.rjust(widths[i]))
                else:
                    cells.append(text.ljust(widths[i]))
            lines.append(escape("  ".join(cells).rstrip()))
        return cls(tuple(lines))


@dataclass(frozen=True)
class Confirm:
    title: str
    text: str
    confirm: str
    deny: str = "Cancel"
    danger: bool = False


@dataclass(frozen=True)
class Button:
    action_id: str
    label: str
    value: str
    style: str | None = None  # "primary" or "danger"
    confirm: Confirm | None = None


@dataclass(frozen=True)
class Select:
    """A menu of choices: (label, value) pairs; picking one is the action."""

    action_id: str
    placeholder: str
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Buttons:
    buttons: tuple[Button | Select, ...]
    block_id: str | None = None


Part = Heading | Text | Fields | Note | Rule | Table | Buttons


@dataclass
class Reply:
    summary: str  # the notification and fallback text
    parts: list[Part] = field(default_factory=list)
    public: bool = False  # in the channel for everyone, or only for the person who asked

    def add(self, *parts: Part) -> Reply:
        self.parts.extend(parts)
        return self


def error_reply(reason: str, usage: str | None = None) -> Reply:
    """A one-line reason (plain text, escaped here), and the usage when the input was at fault."""
    reply = Reply(summary=reason).add(Text(escape(reason)))
    if usage:
        reply.add(Note(escape(usage)))
    return reply
