"""The one renderer: a platform-neutral Reply to Block Kit and mrkdwn, within Slack's limits.

Every plain text is escaped here (``&``, ``<``, ``>``: https://api.slack.com/reference/surfaces/
formatting#escaping), so nothing a user or the control plane wrote can become a mention, a
link or markup. Limits: https://api.slack.com/reference/block-kit/blocks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.redact import Redactor
from bot.slack.people import SLACK_USER
from handlers.replies import (
    Button,
    Buttons,
    Caution,
    ChannelRef,
    Code,
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

MAX_BLOCKS = 50
# Characters of monospace a table may take and still be drawn as one: what the desktop's
# message pane shows at 12 px monospace beside the sidebar (about 800 px for 100 characters).
# Replies with tables are read there (privately, in the conversation asked from), not in a
# thread. A wider table is drawn as one line a row that wraps, each cell with its title. No
# useful table fits a phone's 40 or so characters, so the pane's width is the one chosen.
TABLE_WIDTH = 100
SECTION_LIMIT = 3000
FIELD_LIMIT = 2000
FIELDS_PER_SECTION = 10


def escape(text: object) -> str:
    """Neutralise ``&``, ``<`` and ``>`` so text cannot mention, link or break markup."""
    text = str(text)
    if "&" not in text and "<" not in text and ">" not in text:
        return text  # most cells: nothing to do, and no copy made
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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


def date(epoch: float) -> str:
    """A time Slack shows in the reader's time zone, with a UTC fallback
    (https://api.slack.com/reference/surfaces/formatting#date-formatting)."""
    fallback = datetime.fromtimestamp(epoch, UTC).strftime("%H:%M UTC")
    return f"<!date^{int(epoch)}^{{time}}|{fallback}>"


def span(part: Span) -> str:
    if isinstance(part, str):
        return escape(part)
    if isinstance(part, Strong):
        return f"*{escape(part.text)}*"
    if isinstance(part, Em):
        return f"_{escape(part.text)}_"
    if isinstance(part, Code):
        return f"`{escape(part.text)}`"
    if isinstance(part, UserRef):
        if SLACK_USER.match(part.user_id):
            return f"<@{part.user_id}>"
        return f"*{escape(part.user_id)}*"  # not a Slack user: the policy, a pipeline
    if isinstance(part, ChannelRef):
        return f"<#{escape(part.channel_id)}>"
    if isinstance(part, Time):
        return date(part.epoch)
    if isinstance(part, Link):
        # a link's target may not hold the characters that end it (|, >) or start another
        if not part.url.startswith("https://") or any(c in part.url for c in "|<> "):
            return escape(part.label)
        return f"<{part.url.replace('&', '&amp;')}|{escape(part.label)}>"
    assert isinstance(part, Caution)
    return ":warning: "


def mrkdwn(spans: Line) -> str:
    return "".join(span(s) for s in spans)


def table_width(table: Table) -> int:
    """How many monospace characters the table's widest line takes, as a person sees it."""
    return max((len(line) for line in table.lines()), default=0)


def lines_of(table: Table) -> list[str]:
    """The table's aligned lines, escaped for mrkdwn."""
    return [escape(line) for line in table.lines()]


def wrapped(table: Table) -> list[str]:
    """A table too wide for a phone or the thread pane, as one line a row that wraps: the
    first cell in bold, then each other cell with its column's title (``STATE RUNNING``);
    empty and "-" cells are left out."""
    titles = [c.title for c in table.columns]
    lines = []
    for row in table.rows:
        if not row:
            continue
        rest = [
            f"{titles[i]} {escape(cell)}" if titles[i] else escape(cell)
            for i, cell in enumerate(row)
            if i > 0 and cell.strip() not in ("", "-")
        ]
        lines.append(" · ".join([f"*{escape(row[0])}*" if row[0] else "", *rest]).strip(" ·"))
    return lines


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": text if len(text) <= limit else text[: limit - 1] + "…"}


def _mrkdwn(text: str, limit: int = SECTION_LIMIT) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": clip(text, limit)}


def _chunks(lines: list[str], limit: int) -> list[str]:
    """Preformatted blocks of whole lines, each within a section's limit."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        line = line if len(line) < limit else clip(line, limit - 10)
        if current and size + len(line) + 1 > limit:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        chunks.append("\n".join(current))
    return chunks


def _confirm(confirm: Confirm) -> dict[str, Any]:
    dialog: dict[str, Any] = {
        "title": _plain(confirm.title, 100),
        "text": _mrkdwn(mrkdwn(confirm.text), 300),
        "confirm": _plain(confirm.confirm, 30),
        "deny": _plain(confirm.deny, 30),
    }
    if confirm.danger:
        dialog["style"] = "danger"
    return dialog


def _select(select: Select) -> dict[str, Any]:
    return {
        "type": "static_select",
        "action_id": str(select.options[0][1].action_id),
        "placeholder": _plain(select.placeholder, 150),
        "options": [
            {"text": _plain(label, 75), "value": action.value[:150]}
            for label, action in select.options[:100]
        ],
    }


def _button(button: Button | Select) -> dict[str, Any]:
    if isinstance(button, Select):
        return _select(button)
    element: dict[str, Any] = {
        "type": "button",
        "action_id": str(button.action.action_id),
        "text": _plain(button.label, 75),
        "value": button.action.value[:2000],
    }
    if button.style:
        element["style"] = button.style
    if button.confirm:
        element["confirm"] = _confirm(button.confirm)
    return element


def _field(item: Field) -> dict[str, Any]:
    return _mrkdwn(f"*{escape(item.label)}*\n{mrkdwn(item.value)}", FIELD_LIMIT)


def _blocks(part: Part) -> list[dict[str, Any]]:
    if isinstance(part, Heading):
        return [{"type": "header", "text": _plain(part.text, 150)}]
    if isinstance(part, Text):
        return [{"type": "section", "text": _mrkdwn(mrkdwn(part.spans))}]
    if isinstance(part, Fields):
        return [
            {
                "type": "section",
                "fields": [_field(f) for f in part.items[i : i + FIELDS_PER_SECTION]],
            }
            for i in range(0, len(part.items), FIELDS_PER_SECTION)
        ]
    if isinstance(part, Note):
        return [{"type": "context", "elements": [_mrkdwn(mrkdwn(part.spans))]}]
    if isinstance(part, Rule):
        return [{"type": "divider"}]
    if isinstance(part, Table):
        if len(part.columns) > 1 and table_width(part) > TABLE_WIDTH:
            return [
                {"type": "section", "text": {"type": "mrkdwn", "text": chunk}}
                for chunk in _chunks(wrapped(part), SECTION_LIMIT)
            ]
        return [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{chunk}```"}}
            for chunk in _chunks(lines_of(part), SECTION_LIMIT - 6)
        ]
    assert isinstance(part, Buttons)
    elements = [_button(b) for b in part.buttons[:25]]
    return [{"type": "actions", "elements": elements, "block_id": _block_id(part.buttons[0])}]


def _block_id(first: Button | Select) -> str:
    """An actions block is named after its first action (``approve:r-123``): a click whose
    ``value`` Slack left out still says what it is about. The name is ours to choose; Slack
    only wants it at most 255 characters and unique in the message (see ``_unique``)."""
    action = first.options[0][1] if isinstance(first, Select) else first.action
    return f"{action.action_id}:{action.value}"[:250]


def _unique(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Block ids made unique within one message: a repeated one gets ``#2``, ``#3``, …"""
    seen: dict[str, int] = {}
    for block in blocks:
        name = block.get("block_id")
        if name is None:
            continue
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            block["block_id"] = f"{name}#{seen[name]}"
    return blocks


def render(reply: Reply, redactor: Redactor | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and the blocks for a reply; with a redactor, no configured secret
    survives in any of it."""
    blocks = _unique([block for part in reply.parts for block in _blocks(part)])
    if len(blocks) > MAX_BLOCKS:
        hidden = len(blocks) - (MAX_BLOCKS - 1)
        actions = [b for b in blocks if b["type"] == "actions"][-1:]
        keep = MAX_BLOCKS - 1 - len(actions)
        notice = {"type": "context", "elements": [_mrkdwn(f"{hidden} more parts not shown")]}
        blocks = [*blocks[:keep], notice, *actions]
    text = clip(escape(reply.summary), 3000)
    if redactor is not None:
        return redactor.clean_text(text), redactor.clean_blocks(blocks)
    return text, blocks
