"""JSON read a piece at a time, giving the event loop back between pieces.

A Slurm queue of 5,000 jobs is a reply of 45 MB or more, and slurmrestd's JSON arrives as a
string inside the control plane's ``{"status", "body"}`` reply: one ``json.loads`` of either
holds the loop for a quarter to a whole second, and every ack waits behind it. A thread does
not help (the decoder holds the GIL). Here the outer object is walked key by key, a long
string is decoded in slices, and a long list is decoded element by element, each element
turned at once into what the caller keeps, so only one raw element lives at a time.

Each piece is decoded by the standard library's C decoder; only the walk is Python.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

from bot.vertex.errors import MalformedReplyError
from bot.vertex.operations import SlurmResponse

SMALL = 256 * 1024  # below this, one plain decode is quicker than pacing it
SLICE = 256 * 1024  # characters of a long string decoded at once (about a millisecond)
BUDGET = 0.005  # seconds of decoding between two turns of the event loop

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
# The inside of a JSON string up to its closing quote: plain characters and escapes.
_INSIDE = re.compile(r'(?:[^"\\]++|\\.)*+', re.DOTALL)


class Unreadable(ValueError):
    """The text is not the JSON object expected; the message says where."""


class Pacer:
    """Gives the event loop back once ``BUDGET`` of work has been done since the last turn."""

    def __init__(self, budget: float = BUDGET) -> None:
        self.budget = budget
        self.since = time.perf_counter()

    async def tick(self) -> None:
        if time.perf_counter() - self.since >= self.budget:
            await asyncio.sleep(0)
            self.since = time.perf_counter()


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _expect(text: str, at: int, char: str) -> int:
    at = _skip(text, at)
    if text[at : at + 1] != char:
        raise Unreadable(f"expected {char!r} at character {at}")
    return at + 1


def _escape_starts(raw: str, at: int) -> bool:
    """Whether the backslash at ``at`` begins an escape (an even run of backslashes precedes)."""
    run = at
    while run > 0 and raw[run - 1] == "\\":
        run -= 1
    return (at - run) % 2 == 0


def _high_surrogate_before(raw: str, at: int) -> bool:
    escape = raw[at - 6 : at]
    return (
        len(escape) == 6
        and escape[:2] == "\\u"
        and escape[2:4].lower() in ("d8", "d9", "da", "db")
        and _escape_starts(raw, at - 6)
    )


def _safe_cut(raw: str, cut: int) -> int:
    """A place at or before ``cut`` that splits no escape (``\\"``, ``\\uXXXX``) and no
    surrogate pair, so each slice decodes on its own."""
    back = raw.rfind("\\", max(0, cut - 6), cut)
    while back != -1 and not _escape_starts(raw, back):
        back = raw.rfind("\\", max(0, cut - 6), back)
    if back != -1 and back + (6 if raw[back + 1 : back + 2] == "u" else 2) > cut:
        cut = back  # the escape would be split
    return cut - 6 if _high_surrogate_before(raw, cut) else cut


async def _string(text: str, at: int, pacer: Pacer) -> tuple[str, int]:
    """The JSON string that starts at ``text[at]`` (its opening quote), and the end. Each
    slice is cut where no escape is split, so its closing quote is found within it."""
    parts = []
    start = at + 1
    while True:
        cut = min(len(text), start + SLICE)
        if cut < len(text):
            cut = max(_safe_cut(text, cut), start + 1)
        inside = _INSIDE.match(text, start, cut)
        stop = inside.end() if inside else start
        ended = stop < cut and text[stop] == '"'
        if (stop < cut and not ended) or (cut == len(text) and not ended):
            raise Unreadable(f"the string at character {at} is not valid JSON")
        try:
            parts.append(json.loads('"' + text[start:stop] + '"'))
        except ValueError as error:
            raise Unreadable(f"the string at character {at} is not valid JSON") from error
        if ended:
            await asyncio.sleep(0)  # the join below is one copy of the whole string
            joined = "".join(parts)
            await asyncio.sleep(0)
            return joined, stop + 1
        start = stop
        await pacer.tick()


async def _list(
    text: str, at: int, keep: Callable[[Any], Any], pacer: Pacer
) -> tuple[list[Any], int]:
    """The JSON list at ``text[at]``, each element passed through ``keep`` as it is read."""
    kept: list[Any] = []
    at = _skip(text, at + 1)
    if text[at : at + 1] == "]":
        return kept, at + 1
    while True:
        try:
            element, at = _DECODER.raw_decode(text, _skip(text, at))
        except ValueError as error:
            raise Unreadable(f"a list element at character {at} is not valid JSON") from error
        kept.append(keep(element))
        await pacer.tick()
        at = _skip(text, at)
        char = text[at : at + 1]
        if char == "]":
            return kept, at + 1
        if char != ",":
            raise Unreadable(f"expected ',' or ']' at character {at}")
        at += 1


async def read_object(
    text: str,
    *,
    lists: dict[str, Callable[[Any], Any]] | None = None,
    strings: frozenset[str] = frozenset(),
    pacer: Pacer | None = None,
) -> dict[str, Any]:
    """The JSON object in ``text``, its members decoded one by one: a member named in
    ``lists`` that is a list is read element by element through its function, one named in
    ``strings`` that is a string is read in slices; any other member is decoded whole."""
    lists = lists or {}
    pacer = pacer or Pacer()
    if len(text) < SMALL:
        return _small(text, lists)
    found: dict[str, Any] = {}
    at = _expect(text, 0, "{")
    at = _skip(text, at)
    if text[at : at + 1] == "}":
        return found
    while True:
        at = _skip(text, at)
        if text[at : at + 1] != '"':
            raise Unreadable(f"expected a member name at character {at}")
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, _expect(text, at, ":"))
        char = text[at : at + 1]
        if key in lists and char == "[":
            found[key], at = await _list(text, at, lists[key], pacer)
        elif key in strings and char == '"':
            found[key], at = await _string(text, at, pacer)
        else:
            try:
                found[key], at = _DECODER.raw_decode(text, at)
            except ValueError as error:
                raise Unreadable(f"the value of {key!r} is not valid JSON") from error
        await pacer.tick()
        at = _skip(text, at)
        char = text[at : at + 1]
        if char == "}":
            if _skip(text, at + 1) != len(text):
                raise Unreadable(f"extra data after character {at}")
            return found
        if char != ",":
            raise Unreadable(f"expected ',' or '}}' at character {at}")
        at += 1


def _small(text: str, lists: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
    try:
        document = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise Unreadable("not valid JSON") from error
    if not isinstance(document, dict):
        raise Unreadable("not a JSON object")
    for key, keep in lists.items():
        if isinstance(document.get(key), list):
            document[key] = [keep(element) for element in document[key]]
    return document


async def read_slurm_reply(raw: bytes) -> SlurmResponse:
    """A long ``{"status", "body"}`` reply (a big queue), its body decoded in slices so that
    the event loop is never held for long."""
    try:
        text = raw.decode("utf-8")  # one pass over the bytes (about 1.5 ms a MB)
        await asyncio.sleep(0)
        envelope = await read_object(text, strings=frozenset({"body"}))
    except (Unreadable, UnicodeDecodeError) as error:
        raise MalformedReplyError(f"the control plane sent a Slurm reply that is {error}") from None
    status, body = envelope.get("status", 0), envelope.get("body", "")
    if not isinstance(status, int) or isinstance(status, bool) or not isinstance(body, str):
        raise MalformedReplyError(
            "the control plane sent a Slurm reply that clusterbot cannot read"
        )
    return SlurmResponse(status=status, body=body)
