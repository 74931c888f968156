"""JSON written as slurmrestd writes it (two-space indent, ``": "`` between key and value),
quickly. The standard library's encoder falls back to pure Python when asked to indent, and a
sweep of 10,000 clusters has the simulator write 20,000 documents, each of whole job and node
objects: its time went on writing them. Most of each object is the captured template
(``slurmrestd_objects.json``), shared and never changed, so the text of each nested template
value is written once for each depth it appears at and kept; the rest is written piece by
piece, each scalar by the C encoder.

The output is the same text as ``json.dumps(value, indent=2)`` (the tests compare them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

_ENCODE = json.JSONEncoder(separators=(",", ": ")).encode
_STRING = json.encoder.encode_basestring_ascii  # the C function json.dumps uses for a str
_FROZEN: dict[int, object] = {}  # id -> a template value that never changes (kept alive)
_TEXT: dict[tuple[int, int], str] = {}  # (id, depth) -> its text at that depth
_NAMES: dict[str, str] = {}  # a member name -> its text and ": "


def freeze(values: Iterable[Any]) -> None:
    """Mark these values, and every list and object within them, as never changing."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            _FROZEN[id(value)] = value
            stack.extend(value.values())
        elif isinstance(value, list):
            _FROZEN[id(value)] = value
            stack.extend(value)


def dumps(value: Any) -> str:
    out: list[str] = []
    _write(value, 0, out)
    return "".join(out)


def _scalar(value: Any) -> str:
    """One value that is not a list or object with members, as ``json.dumps`` writes it; the
    common kinds without the encoder's setup on each call."""
    kind = value.__class__
    if kind is str:
        return _STRING(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return _ENCODE(value)  # floats (inf and nan as json writes them), empty lists and objects


def _name(name: Any) -> str:
    """A member name's text, with its ``": "``; the names of slurmrestd's objects repeat.
    A name that is not a string is written as ``json`` writes it (``true``, ``1``)."""
    if not isinstance(name, str):
        return _scalar(_scalar(name)) + ": "
    text = _NAMES.get(name)
    if text is None:
        text = _scalar(name) + ": "
        if len(_NAMES) < 10_000:  # names that are data (none in slurmrestd's) are not kept
            _NAMES[name] = text
    return text


def _write(value: Any, depth: int, out: list[str]) -> None:
    if not isinstance(value, dict | list) or not value:
        out.append(_scalar(value))
        return
    key = (id(value), depth)
    kept = _TEXT.get(key)
    if kept is not None:
        out.append(kept)
        return
    start = len(out)
    inner = ",\n" + "  " * (depth + 1)
    lead = inner[1:]
    if isinstance(value, dict):
        out.append("{")
        for name, item in value.items():
            out.append(lead + _name(name))
            if isinstance(item, dict | list) and item:
                _write(item, depth + 1, out)
            else:
                out.append(_scalar(item))
            lead = inner
        out.append("\n" + "  " * depth + "}")
    else:
        out.append("[")
        for item in value:
            out.append(lead)
            _write(item, depth + 1, out)
            lead = inner
        out.append("\n" + "  " * depth + "]")
    if id(value) in _FROZEN:
        _TEXT[key] = text = "".join(out[start:])
        del out[start:]
        out.append(text)
