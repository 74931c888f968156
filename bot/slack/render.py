"""The one renderer: a platform-neutral Reply to Block Kit, within Slack's limits."""

from __future__ import annotations

from typing import Any

from bot.redact import Redactor
from handlers.replies import (
    Button,
    Buttons,
    Confirm,
    Fields,
    Heading,
    Note,
    Part,
    Reply,
    Rule,
    Select,
    Table,
    Text,
    clip,
    escape,
)

MAX_BLOCKS = 50
SECTION_LIMIT = 3000
FIELD_LIMIT = 2000
FIELDS_PER_SECTION = 10


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": text if len(text) <= limit else text[: limit - 1] + "…"}


def _mrkdwn(text: str, limit: int = SECTION_LIMIT) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": clip(text, limit)}


def _chunks(lines: tuple[str, ...], limit: int) -> list[str]:
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
        "text": _mrkdwn(confirm.text, 300),
        "confirm": _plain(confirm.confirm, 30),
        "deny": _plain(confirm.deny, 30),
    }
    if confirm.danger:
        dialog["style"] = "danger"
    return dialog


def _select(select: Select) -> dict[str, Any]:
    return {
        "type": "static_select",
        "action_id": select.action_id,
        "placeholder": _plain(select.placeholder, 150),
        "options": [
            {"text": _plain(label, 75), "value": value[:150]}
            for label, value in select.options[:100]
        ],
    }


def _button(button: Button | Select) -> dict[str, Any]:
    if isinstance(button, Select):
        return _select(button)
    element: dict[str, Any] = {
        "type": "button",
        "action_id": button.action_id,
        "text": _plain(button.label, 75),
        "value": button.value[:2000],
    }
    if button.style:
        element["style"] = button.style
    if button.confirm:
        element["confirm"] = _confirm(button.confirm)
    return element


def _blocks(part: Part) -> list[dict[str, Any]]:
    if isinstance(part, Heading):
        return [{"type": "header", "text": _plain(part.text, 150)}]
    if isinstance(part, Text):
        return [{"type": "section", "text": _mrkdwn(part.text)}]
    if isinstance(part, Fields):
        return [
            {
                "type": "section",
                "fields": [_mrkdwn(f, FIELD_LIMIT) for f in part.items[i : i + FIELDS_PER_SECTION]],
            }
            for i in range(0, len(part.items), FIELDS_PER_SECTION)
        ]
    if isinstance(part, Note):
        return [{"type": "context", "elements": [_mrkdwn(part.text)]}]
    if isinstance(part, Rule):
        return [{"type": "divider"}]
    if isinstance(part, Table):
        return [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{chunk}```"}}
            for chunk in _chunks(part.lines, SECTION_LIMIT - 6)
        ]
    assert isinstance(part, Buttons)
    block: dict[str, Any] = {"type": "actions", "elements": [_button(b) for b in part.buttons[:25]]}
    if part.block_id:
        block["block_id"] = part.block_id[:255]
    return [block]


def render(reply: Reply, redactor: Redactor | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and the blocks for a reply; with a redactor, no configured secret
    survives in any of it."""
    blocks = [block for part in reply.parts for block in _blocks(part)]
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
