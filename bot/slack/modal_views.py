"""The Block Kit of clusterbot's forms (modals): resize, delete, and a prolog or epilog script.

Each field is an input block whose ``block_id`` names the field; fields whose change alters
the form (the cluster, the pool, the node counts) set ``dispatch_action`` so the app hears of
the change and updates the view (https://docs.slack.dev/surfaces/modals#updating_views).
A field's id holds what it depends on (``min:a4``), so choosing another pool starts the counts
afresh at that pool's own. Limits: title, submit and close at most 24 characters; an option's
text at most 75 (https://docs.slack.dev/reference/views).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from handlers.form_ask import FormKind
from handlers.forms import Choice, Estimate

CALLBACK = "clusterbot_form"
CLUSTER_ACTION = "form_cluster"
SCRIPT_TEXT_LIMIT = 3000  # a plain_text_input holds at most 3,000 characters


@dataclass
class Meta:
    """What a form carries in ``private_metadata`` (at most 3,000 characters)."""

    kind: str
    channel: str
    cluster: str | None = None  # full name once chosen (or the typed id until resolved)
    which: str | None = None  # SCRIPT
    place: str | None = None  # SCRIPT: "add:N" or "replace:N" preset by the command

    def dump(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def load(cls, text: str) -> Meta:
        """The metadata a form of ours carries; ``BadMetadata`` for anything else (a view
        with our callback id is not proof that we wrote its metadata)."""
        try:
            data = json.loads(text or "{}")
        except ValueError:
            raise BadMetadata("private_metadata is not JSON") from None
        if not isinstance(data, dict):
            raise BadMetadata("private_metadata is not a JSON object")
        fields = {k: data.get(k) for k in ("kind", "channel", "cluster", "which", "place")}
        if not isinstance(fields["kind"], str) or not isinstance(fields["channel"], str):
            raise BadMetadata("private_metadata has no form kind and channel")
        if any(v is not None and not isinstance(v, str) for v in fields.values()):
            raise BadMetadata("private_metadata has a field that is not text")
        return cls(**fields)  # type: ignore[arg-type]


class BadMetadata(ValueError):
    """A view's ``private_metadata`` is not what our forms write."""


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


def _input(
    block_id: str,
    label: str,
    element: dict[str, Any],
    *,
    optional: bool = False,
    hint: str = "",
    dispatch: bool = False,
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": block_id,
        "label": _plain(label, 2000),
        "element": element,
        "optional": optional,
    }
    if dispatch:
        block["dispatch_action"] = True
    if hint:
        block["hint"] = _plain(hint, 2000)
    return block


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


def _cluster_field(chosen: Choice | None) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "external_select",
        "action_id": CLUSTER_ACTION,
        "placeholder": _plain("Type to find a cluster", 150),
        "min_query_length": 0,
    }
    if chosen is not None:
        element["initial_option"] = option(chosen)
    return _input("cluster", "Cluster", element, dispatch=True)


def _modal(meta: Meta, title: str, submit: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": CALLBACK,
        "title": _plain(title, 24),
        "submit": _plain(submit, 24),
        "close": _plain("Cancel", 24),
        "private_metadata": meta.dump(),
        "blocks": blocks,
    }


def _count(block_id: str, label: str, initial: int | None, optional: bool) -> dict[str, Any]:
    # No min_value or max_value: Slack's client would refuse a count outside them with words
    # of its own and the app would never hear of it; the form's own check says it at the
    # field as it is typed, in the words the submission uses.
    element: dict[str, Any] = {
        "type": "number_input",
        "action_id": f"form_{block_id.split(':')[0]}",
        "is_decimal_allowed": False,
        "dispatch_action_config": {"trigger_actions_on": ["on_character_entered"]},
    }
    if initial is not None:
        element["initial_value"] = str(initial)
    return _input(block_id, label, element, optional=optional, dispatch=True)


def resize_view(
    meta: Meta,
    chosen: Choice | None,
    pools: Sequence[Choice] = (),
    pool: str | None = None,
    current: tuple[int, int] | None = None,
    estimate: Estimate | None = None,
    note: str = "",
    problems: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The resize form; ``problems`` (by field: min, max) are shown under their field while
    the counts are typed, before any submission."""
    problems = problems or {}
    blocks = [_cluster_field(chosen)]
    if chosen is None or not pools:
        blocks.append(_context(note or "Choose a cluster to see its node pools and their cost."))
        return _modal(meta, "Resize a node pool", "Ask for approval", blocks)
    element: dict[str, Any] = {
        "type": "static_select",
        "action_id": "form_pool",
        "placeholder": _plain("Choose a pool", 150),
        "options": [option(p) for p in pools],
    }
    picked = next((p for p in pools if p.value == pool), None)
    if picked is not None:
        element["initial_option"] = option(picked)
    blocks.append(_input("pool", "Node pool", element, dispatch=True))
    if picked is None:
        blocks.append(_context(note or "Choose a pool to set its node counts."))
        return _modal(meta, "Resize a node pool", "Ask for approval", blocks)
    low, high = current or (None, None)
    blocks.append(_count(f"min:{pool}", "Min nodes", low, optional=False))
    blocks += _problem("min", problems)
    blocks.append(
        _count(f"max:{pool}", "Max nodes (more than min: Slurm scales with the queue)", high, True)
    )
    blocks += _problem("max", problems)
    if estimate is not None:
        blocks.append(
            {
                "type": "section",
                "block_id": "cost",
                "fields": [
                    {"type": "mrkdwn", "text": f"*Cost now*\n{estimate.before}"},
                    {"type": "mrkdwn", "text": f"*After*\n{estimate.after}"},
                    {"type": "mrkdwn", "text": f"*Change*\n{estimate.change[:1900]}"},
                ],
            }
        )
    blocks.append(
        _context("The request is posted as a card in the channel; a second person approves it.")
    )
    return _modal(meta, "Resize a node pool", "Ask for approval", blocks)


def _problem(field: str, problems: Mapping[str, str]) -> list[dict[str, Any]]:
    if field not in problems:
        return []
    block = _context(f":warning: {problems[field]}")
    block["block_id"] = f"problem:{field}"
    return [block]


def delete_view(
    meta: Meta, chosen: Choice | None, cluster_id: str = "", summary: str = ""
) -> dict[str, Any]:
    blocks = [_cluster_field(chosen)]
    if chosen is None:
        blocks.append(_context("Choose the cluster to delete."))
        return _modal(meta, "Delete a cluster", "Ask to delete", blocks)
    if summary:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": summary[:3000]}})
    blocks.append(
        _input(
            "confirm",
            f"Type {cluster_id} to confirm",
            {"type": "plain_text_input", "action_id": "form_confirm", "max_length": 100},
        )
    )
    blocks.append(
        _context(
            "An approver must approve the request on its card before anything is deleted; "
            "the cluster's spec is kept so it can be restored."
        )
    )
    return _modal(meta, "Delete a cluster", "Ask to delete", blocks)


def script_view(
    meta: Meta, cluster_id: str, places: Sequence[Choice], scripts: Sequence[str]
) -> dict[str, Any]:
    which = meta.which or "prolog"
    verb, _, number = (meta.place or "").partition(":")
    title = f"Replace {which} {number}" if verb == "replace" else f"Add a {which} script"
    listing = "\n".join(f"{n}. `{line[:80]}`" for n, line in enumerate(scripts, 1))
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": (
                    f"*{cluster_id}* has {len(scripts)} {which} scripts"
                    + (f":\n{listing}" if scripts else ".")
                )[:3000],
            },
        }
    ]
    place: dict[str, Any] = {
        "type": "static_select",
        "action_id": "form_place",
        "placeholder": _plain("Choose where it goes", 150),
        "options": [option(p) for p in places],
    }
    preset = next((p for p in places if p.value == meta.place), places[0] if places else None)
    if preset is not None:
        place["initial_option"] = option(preset)
    blocks.append(_input("place", "Where", place))
    blocks.append(
        _input(
            "paste",
            "Paste the script",
            {
                "type": "plain_text_input",
                "action_id": "form_paste",
                "multiline": True,
                "max_length": SCRIPT_TEXT_LIMIT,
            },
            optional=True,
            hint="Up to 3,000 characters; for a longer one, upload it as a file.",
        )
    )
    blocks.append(
        _input(
            "file",
            "…or upload it",
            {
                "type": "file_input",
                "action_id": "form_file",
                "filetypes": ["sh", "bash", "txt"],
                "max_files": 1,
            },
            optional=True,
        )
    )
    blocks.append(
        _context(
            f"It runs {'before' if which == 'prolog' else 'after'} every job. The request is "
            "posted as a card with the script's hash; a second person approves it."
        )
    )
    return _modal(meta, title[:24], "Ask for approval", blocks)


def setting_view(meta: Meta, cluster_id: str, choices: Sequence[Choice]) -> dict[str, Any]:
    key: dict[str, Any] = {
        "type": "static_select",
        "action_id": "form_key",
        "placeholder": _plain("Choose a setting", 150),
        "options": [option(c) for c in choices],
    }
    value = {"type": "plain_text_input", "action_id": "form_value", "max_length": 500}
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"slurm.conf of *{cluster_id}*"}},
        _input("key", "Setting", key),
        _input("value", "Value", value, hint="Known keys are checked and explained on the card."),
        _context("The whole config map is sent with the new value; a second person approves."),
    ]
    return _modal(meta, "Change a Slurm setting", "Ask for approval", blocks)


def loading_view(meta: Meta, note: str) -> dict[str, Any]:
    """A form whose cluster is being read; it has no fields yet, so no submit."""
    titles = {
        FormKind.RESIZE: "Resize a node pool",
        FormKind.DELETE: "Delete a cluster",
        FormKind.SETTING: "Change a Slurm setting",
    }
    return {
        "type": "modal",
        "callback_id": CALLBACK,
        "title": _plain(titles.get(meta.kind, f"Add a {meta.which or 'prolog'} script"), 24),
        "close": _plain("Cancel", 24),
        "private_metadata": meta.dump(),
        "blocks": [_context(note)],
    }


# -- reading a submitted view's state ---------------------------------------------------------


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


def block_of(values: dict[str, dict[str, Any]], field: str) -> str | None:
    """The block of the field named ``field`` (``min`` is ``min:a4``), if the form has it."""
    return next((b for b in values if b == field or b.startswith(field + ":")), None)


def entry_of(values: dict[str, dict[str, Any]], field: str) -> dict[str, Any]:
    """The entry of the field named ``field``."""
    return values.get(block_of(values, field) or "", {})


def picked(entry: dict[str, Any]) -> str | None:
    chosen = entry.get("selected_option") or {}
    return str(chosen["value"]) if chosen.get("value") else None
