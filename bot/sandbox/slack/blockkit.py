"""Block Kit limits as Slack enforces them, so a message or view Slack would refuse fails here.

``problems(blocks)`` returns Slack-style messages, each with a JSON pointer; an empty list means
Slack would accept the blocks. ``view_problems(view)`` does the same for a modal or a Home tab,
which may also hold input blocks (https://docs.slack.dev/reference/views).
"""

from __future__ import annotations

from typing import Any

MAX_BLOCKS = 50
MAX_ACTIONS = 25
MAX_CONTEXT = 10
MAX_FIELDS = 10
MESSAGE_TEXT_LIMIT = 40_000
BLOCK_TYPES = {
    "section",
    "header",
    "context",
    "divider",
    "actions",
    "image",
    "rich_text",
    "markdown",
}
INTERACTIVE = {
    "button",
    "static_select",
    "overflow",
    "datepicker",
    "users_select",
    "external_select",
    "plain_text_input",
    "number_input",
    "file_input",
}
# The elements an input block takes (https://docs.slack.dev/reference/block-kit/blocks/input-block)
INPUT_ELEMENTS = {
    "plain_text_input",
    "number_input",
    "static_select",
    "external_select",
    "users_select",
    "file_input",
    "datepicker",
}
# Views (https://docs.slack.dev/reference/views): a modal's title, submit and close are plain
# text of at most 24 characters; 100 blocks; callback_id 255, private_metadata 3000 characters.
MAX_VIEW_BLOCKS = 100
VIEW_TITLE_LIMIT = 24
PRIVATE_METADATA_LIMIT = 3000


class _Check:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, message: str, pointer: str) -> None:
        self.errors.append(f"{message} [json-pointer:{pointer}]")

    def length(self, value: Any, limit: int, pointer: str) -> None:
        if isinstance(value, str) and len(value) > limit:
            self.fail(f"must be less than {limit + 1} characters", pointer)

    def text(self, obj: Any, pointer: str, limit: int, *, plain_only: bool = False) -> None:
        if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
            self.fail("must provide a text object of type plain_text or mrkdwn", pointer)
            return
        if plain_only and obj["type"] != "plain_text":
            self.fail("must be a plain_text object", f"{pointer}/type")
        if not isinstance(obj.get("text"), str) or not obj["text"]:
            self.fail("must be more than 0 characters", f"{pointer}/text")
            return
        self.length(obj["text"], limit, f"{pointer}/text")

    def confirm(self, obj: Any, pointer: str) -> None:
        if not isinstance(obj, dict):
            self.fail("must be a confirmation dialog object", pointer)
            return
        for key, limit in (("title", 100), ("text", 300), ("confirm", 30), ("deny", 30)):
            if key not in obj:
                self.fail(f"missing required field: {key}", pointer)
                continue
            self.text(obj[key], f"{pointer}/{key}", limit, plain_only=key != "text")
        if obj.get("style") not in (None, "primary", "danger"):
            self.fail("must be primary or danger", f"{pointer}/style")

    def element(self, element: Any, pointer: str, action_ids: set[str]) -> None:
        if not isinstance(element, dict) or not element.get("type"):
            self.fail("must be an element object", pointer)
            return
        kind = element["type"]
        if kind in INTERACTIVE:
            action_id = element.get("action_id")
            if action_id is not None:
                self.length(action_id, 255, f"{pointer}/action_id")
                if action_id in action_ids:
                    self.fail("action_id must be unique within a block", f"{pointer}/action_id")
                action_ids.add(action_id)
        if kind == "button":
            self.text(element.get("text"), f"{pointer}/text", 75, plain_only=True)
            self.length(element.get("value"), 2000, f"{pointer}/value")
            self.length(element.get("url"), 3000, f"{pointer}/url")
            if element.get("style") not in (None, "primary", "danger"):
                self.fail("must be primary or danger", f"{pointer}/style")
            if "confirm" in element:
                self.confirm(element["confirm"], f"{pointer}/confirm")
        elif kind == "static_select":
            self.text(element.get("placeholder"), f"{pointer}/placeholder", 150, plain_only=True)
            options = element.get("options") or []
            if not 1 <= len(options) <= 100:
                self.fail("must have 1 to 100 options", f"{pointer}/options")
            for index, option in enumerate(options):
                where = f"{pointer}/options/{index}"
                self.text(option.get("text"), f"{where}/text", 75, plain_only=True)
                self.length(option.get("value"), 150, f"{where}/value")
        elif kind == "image":
            if not element.get("image_url") and not element.get("slack_file"):
                self.fail("must provide image_url", pointer)
            self.length(element.get("alt_text"), 2000, f"{pointer}/alt_text")
        elif kind not in INTERACTIVE and kind not in ("plain_text", "mrkdwn"):
            self.fail(f"unsupported element type {kind!r}", f"{pointer}/type")
        elif kind in ("plain_text", "mrkdwn"):
            self.text(element, pointer, 3000)

    def field(self, element: Any, pointer: str) -> None:
        """An input block's element, with the limits of its type."""
        kind = element.get("type") if isinstance(element, dict) else None
        if kind not in INPUT_ELEMENTS:
            self.fail(f"unsupported element type {kind!r} in an input block", f"{pointer}/type")
            return
        if "placeholder" in element:
            self.text(element["placeholder"], f"{pointer}/placeholder", 150, plain_only=True)
        if kind == "plain_text_input":
            # plain_text_input: min_length 0-3000, max_length 1-3000
            # (https://docs.slack.dev/reference/block-kit/block-elements/plain-text-input-element)
            for key in ("min_length", "max_length"):
                value = element.get(key)
                if value is not None and not (isinstance(value, int) and 0 <= value <= 3000):
                    self.fail("must be a number from 0 to 3000", f"{pointer}/{key}")
            self.length(element.get("initial_value"), 3000, f"{pointer}/initial_value")
        elif kind == "number_input" and not isinstance(element.get("is_decimal_allowed"), bool):
            self.fail("missing required field: is_decimal_allowed", pointer)
        elif kind == "file_input":
            most = element.get("max_files", 10)
            if not isinstance(most, int) or not 1 <= most <= 10:
                self.fail("must be a number from 1 to 10", f"{pointer}/max_files")
        elif kind == "static_select":
            self.element(element, pointer, set())

    def input(self, block: dict[str, Any], pointer: str) -> None:
        self.text(block.get("label"), f"{pointer}/label", 2000, plain_only=True)
        if "hint" in block:
            self.text(block["hint"], f"{pointer}/hint", 2000, plain_only=True)
        if "element" not in block:
            self.fail("missing required field: element", pointer)
            return
        self.field(block["element"], f"{pointer}/element")
        action_id = (
            block["element"].get("action_id") if isinstance(block["element"], dict) else None
        )
        self.length(action_id, 255, f"{pointer}/element/action_id")

    def block(self, block: Any, pointer: str, block_ids: set[str], *, view: bool = False) -> None:
        if isinstance(block, dict) and block.get("type") == "input" and view:
            self.length(block.get("block_id"), 255, f"{pointer}/block_id")
            if block.get("block_id") is not None:
                if block["block_id"] in block_ids:
                    self.fail("block_id must be unique within a view", f"{pointer}/block_id")
                block_ids.add(block["block_id"])
            self.input(block, pointer)
            return
        if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
            kind = block.get("type") if isinstance(block, dict) else None
            self.fail(f"unsupported block type {kind!r}", f"{pointer}/type")
            return
        block_id = block.get("block_id")
        if block_id is not None:
            self.length(block_id, 255, f"{pointer}/block_id")
            if block_id in block_ids:
                self.fail("block_id must be unique within a message", f"{pointer}/block_id")
            block_ids.add(block_id)
        action_ids: set[str] = set()
        kind = block["type"]
        if kind == "section":
            if "text" not in block and "fields" not in block:
                self.fail("must provide text or fields", pointer)
            if "text" in block:
                self.text(block["text"], f"{pointer}/text", 3000)
            fields = block.get("fields", [])
            if len(fields) > MAX_FIELDS:
                self.fail(f"must be no more than {MAX_FIELDS} items", f"{pointer}/fields")
            for index, field in enumerate(fields):
                self.text(field, f"{pointer}/fields/{index}", 2000)
            if "accessory" in block:
                self.element(block["accessory"], f"{pointer}/accessory", action_ids)
        elif kind == "header":
            self.text(block.get("text"), f"{pointer}/text", 150, plain_only=True)
        elif kind in ("context", "actions"):
            most = MAX_CONTEXT if kind == "context" else MAX_ACTIONS
            elements = block.get("elements", [])
            if not elements or len(elements) > most:
                self.fail(f"must have 1 to {most} elements", f"{pointer}/elements")
            for index, element in enumerate(elements):
                self.element(element, f"{pointer}/elements/{index}", action_ids)
        elif kind == "image":
            self.element({**block, "type": "image"}, pointer, action_ids)
        elif kind == "markdown":
            self.length(block.get("text"), 12_000, f"{pointer}/text")


def problems(blocks: Any) -> list[str]:
    """Why Slack would refuse these blocks; empty when it would accept them."""
    check = _Check()
    if not isinstance(blocks, list):
        check.fail("must be an array", "/blocks")
        return check.errors
    if len(blocks) > MAX_BLOCKS:
        check.fail(f"must be no more than {MAX_BLOCKS} items", "/blocks")
    block_ids: set[str] = set()
    for index, block in enumerate(blocks):
        check.block(block, f"/blocks/{index}", block_ids)
    return check.errors


def view_problems(view: Any) -> list[str]:
    """Why Slack would refuse this view (a modal or a Home tab); empty when it would take it."""
    check = _Check()
    if not isinstance(view, dict) or view.get("type") not in ("modal", "home"):
        check.fail("must be a modal or home view", "/view/type")
        return check.errors
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        check.fail("must be an array", "/view/blocks")
        return check.errors
    if len(blocks) > MAX_VIEW_BLOCKS:
        check.fail(f"must be no more than {MAX_VIEW_BLOCKS} items", "/view/blocks")
    if view["type"] == "modal":
        check.text(view.get("title"), "/view/title", VIEW_TITLE_LIMIT, plain_only=True)
        for key in ("submit", "close"):
            if key in view and view[key] is not None:
                check.text(view[key], f"/view/{key}", VIEW_TITLE_LIMIT, plain_only=True)
        # "submit": required when an input block is in the blocks
        has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in blocks)
        if has_input and not view.get("submit"):
            check.fail("must provide submit when the view has input blocks", "/view/submit")
    check.length(view.get("callback_id"), 255, "/view/callback_id")
    check.length(view.get("external_id"), 255, "/view/external_id")
    check.length(view.get("private_metadata"), PRIVATE_METADATA_LIMIT, "/view/private_metadata")
    block_ids: set[str] = set()
    for index, block in enumerate(blocks):
        check.block(block, f"/view/blocks/{index}", block_ids, view=True)
    return check.errors


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """Every button and menu in a message, with the block_id of its block."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for block in blocks:
        candidates = list(block.get("elements", [])) if block.get("type") == "actions" else []
        if isinstance(block.get("accessory"), dict):
            candidates.append(block["accessory"])
        found += [
            (block.get("block_id"), e)
            for e in candidates
            if e.get("type") in ("button", "static_select")
        ]
    return found
