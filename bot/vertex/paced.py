"""Slurm replies read as they arrive, a piece at a time, giving the event loop back between
pieces.

A Slurm queue of 5,000 jobs is a reply of 40 MB or more, and slurmrestd's JSON arrives as a
string inside the control plane's ``{"status", "body"}`` reply. Read whole, it is held three
times over (the bytes, their text, the body string), and each decode or copy of it holds the
loop for tens of milliseconds to a second while every ack waits. A thread does not help (the
decoder holds the GIL). Here the bytes are decoded as they arrive, the envelope is walked
member by member, its body string is decoded a slice at a time and handed straight to the walk
of slurmrestd's document, whose long lists are decoded element by element, each element turned
at once into what the caller keeps. Only a slice of text and one raw element live at a time.

Each piece is decoded by the standard library's C decoder; only the walk is Python.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from handlers.domain.errors import MalformedReplyError
from handlers.domain.operations import SlurmResponse

SMALL = 256 * 1024  # bytes below which one plain decode is quicker than pacing it
SLICE = 64 * 1024  # bytes of the reply taken at a time (well under a millisecond to decode)
BUDGET = 0.005  # seconds of decoding between two turns of the event loop
HEAD = 4096  # characters of a long body kept to quote when it is not what was asked for

Keep = Callable[[Any], Any]
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
# The inside of a JSON string up to its closing quote: plain characters and escapes.
_INSIDE = re.compile(r'(?:[^"\\]++|\\.)*+', re.DOTALL)


class Unreadable(ValueError):
    """The text is not the JSON object expected; the message says where."""


@dataclass(frozen=True)
class SlurmAnswer:
    """slurmrestd's answer through the control plane: its HTTP status, its body (a long one
    cut to its first ``HEAD`` characters), and the body's JSON object when it is one, with
    the lists asked for already turned into what the caller keeps; ``problem`` says why
    ``document`` is None."""

    status: int
    text: str
    document: dict[str, Any] | None
    problem: str = ""


class LoopTurns:
    """Gives the event loop back once ``BUDGET`` of work has been done since the last turn."""

    def __init__(self, budget: float = BUDGET) -> None:
        self.budget = budget
        self.since = time.perf_counter()

    async def tick(self) -> None:
        if time.perf_counter() - self.since >= self.budget:
            await asyncio.sleep(0)
            self.since = time.perf_counter()


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
    surrogate pair, so the text before it decodes on its own."""
    back = raw.rfind("\\", max(0, cut - 6), cut)
    while back != -1 and not _escape_starts(raw, back):
        back = raw.rfind("\\", max(0, cut - 6), back)
    if back != -1 and back + (6 if raw[back + 1 : back + 2] == "u" else 2) > cut:
        cut = back  # the escape would be split
    return cut - 6 if _high_surrogate_before(raw, cut) else cut


class Pieces:
    """Text that arrives a piece at a time, read through a buffer that keeps only what has
    not been read yet."""

    def __init__(self, source: AsyncIterator[str], pacer: LoopTurns) -> None:
        self.source = source
        self.pacer = pacer
        self.text = ""
        self.at = 0
        self.passed = 0  # characters read and dropped before ``text``
        self.ended = False

    def where(self) -> int:
        return self.passed + self.at

    async def more(self) -> bool:
        """The next piece appended and what was read dropped; False at the end."""
        if self.ended:
            return False
        try:
            piece = await anext(self.source)
        except StopAsyncIteration:
            self.ended = True
            return False
        self.passed += self.at
        self.text = self.text[self.at :] + piece
        self.at = 0
        await self.pacer.tick()
        return True

    async def peek(self) -> str:
        """The next character that is not white space, left unread; "" at the end."""
        while True:
            match = _SPACE.match(self.text, self.at)
            self.at = match.end() if match else self.at
            if self.at < len(self.text):
                return self.text[self.at]
            if not await self.more():
                return ""

    async def expect(self, char: str) -> None:
        if await self.peek() != char:
            raise Unreadable(f"expected {char!r} at character {self.where()}")
        self.at += 1

    async def value(self, what: str) -> Any:
        """One whole JSON value. While it is cut short, more pieces are added, up to twice
        what is unread each time, so a long value costs a few decodes and not one a piece."""
        await self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.at)
            except ValueError:
                end = -1
            # a value that ends the buffer may go on in the next piece (a number)
            if end != -1 and (end < len(self.text) or self.ended):
                self.at = end
                return value
            if self.ended:
                raise Unreadable(f"{what} at character {self.where()} is not valid JSON")
            want = 2 * (len(self.text) - self.at)
            while len(self.text) - self.at < want and await self.more():
                pass

    async def string(self) -> AsyncIterator[str]:
        """The JSON string that begins here (at its opening quote), decoded a slice at a time;
        each slice is cut where no escape is split."""
        start = self.where()
        self.at += 1
        while True:
            cut = (
                len(self.text) if self.ended else max(self.at, _safe_cut(self.text, len(self.text)))
            )
            inside = _INSIDE.match(self.text, self.at, cut)
            stop = inside.end() if inside else self.at
            if stop > self.at:
                try:
                    yield json.loads('"' + self.text[self.at : stop] + '"')
                except ValueError as error:
                    raise Unreadable(
                        f"the string at character {start} is not valid JSON"
                    ) from error
                self.at = stop
            if stop < cut:
                if self.text[stop] != '"':
                    raise Unreadable(f"the string at character {start} is not valid JSON")
                self.at = stop + 1
                return
            if not await self.more():
                raise Unreadable(f"the string at character {start} is not closed")

    async def members(self) -> AsyncIterator[str]:
        """The member names of the object that begins here, each given with the pieces at its
        value, which the caller reads before asking for the next name."""
        await self.expect("{")
        if await self.peek() == "}":
            self.at += 1
            return
        while True:
            if await self.peek() != '"':
                raise Unreadable(f"expected a member name at character {self.where()}")
            key = await self.value("a member name")
            await self.expect(":")
            yield str(key)
            char = await self.peek()
            if char == "}":
                self.at += 1
                return
            if char != ",":
                raise Unreadable(f"expected ',' or '}}' at character {self.where()}")
            self.at += 1

    async def end(self) -> None:
        if await self.peek() != "":
            raise Unreadable(f"extra data at character {self.where()}")

    async def listed(self, keep: Keep) -> list[Any]:
        """The JSON list that begins here, each element passed through ``keep`` as it is read."""
        kept: list[Any] = []
        self.at += 1
        if await self.peek() == "]":
            self.at += 1
            return kept
        while True:
            kept.append(keep(await self.value("a list element")))
            await self.pacer.tick()
            char = await self.peek()
            if char == "]":
                self.at += 1
                return kept
            if char != ",":
                raise Unreadable(f"expected ',' or ']' at character {self.where()}")
            self.at += 1


async def read_document(pieces: Pieces, lists: dict[str, Keep]) -> dict[str, Any]:
    """The JSON object the pieces hold (none at all: an empty one), its members decoded one by
    one, a member named in ``lists`` that is a list element by element through its function."""
    found: dict[str, Any] = {}
    if await pieces.peek() == "":
        return found
    async for key in pieces.members():
        if key in lists and await pieces.peek() == "[":
            found[key] = await pieces.listed(lists[key])
        else:
            found[key] = await pieces.value(f"the value of {key!r}")
    await pieces.end()
    return found


def read_small(body: str, lists: dict[str, Keep]) -> tuple[dict[str, Any] | None, str]:
    """A short body's JSON object in one decode, or None and why not."""
    try:
        document = json.loads(body) if body.strip() else {}
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(document, dict):
        return None, "not a JSON object"
    for key, keep in lists.items():
        if isinstance(document.get(key), list):
            document[key] = [keep(element) for element in document[key]]
    return document, ""


def answer_of(reply: SlurmResponse, lists: dict[str, Keep]) -> SlurmAnswer:
    document, problem = read_small(reply.body, lists)
    return SlurmAnswer(reply.status, reply.body, document, problem)


async def _text(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        async for chunk in chunks:
            if text := decoder.decode(chunk):
                yield text
        if tail := decoder.decode(b"", final=True):
            yield tail
    except UnicodeDecodeError as error:
        raise Unreadable(f"not UTF-8 ({error.reason})") from None


async def _body(pieces: Pieces, members: dict[str, Any]) -> AsyncIterator[str]:
    """The control plane's ``{"status", "body"}`` reply walked: the body's text yielded as it
    is decoded, the other members kept in ``members``."""
    try:
        async for key in pieces.members():
            if key == "body" and await pieces.peek() == '"':
                async for piece in pieces.string():
                    yield piece
            else:
                members[key] = await pieces.value(f"the value of {key!r}")
        await pieces.end()
    except Unreadable as error:
        raise MalformedReplyError(f"the control plane sent a Slurm reply that is {error}") from None


async def _head(source: AsyncIterator[str], head: list[str]) -> AsyncIterator[str]:
    kept = 0
    async for piece in source:
        if kept < HEAD:
            head.append(piece[: HEAD - kept])
            kept += len(head[-1])
        yield piece


async def read_slurm_stream(chunks: AsyncIterator[bytes], lists: dict[str, Keep]) -> SlurmAnswer:
    """A long ``:callSlurmRestApi`` reply (a big queue) read as its bytes arrive."""
    pacer = LoopTurns()
    members: dict[str, Any] = {}
    head: list[str] = []
    body = _head(_body(Pieces(_text(chunks), pacer), members), head)
    try:
        document: dict[str, Any] | None = await read_document(Pieces(body, pacer), lists)
        problem = ""
    except Unreadable as error:
        document, problem = None, str(error)
        async for _ in body:  # the status may come after the body
            pass
    status = members.get("status", 0)
    if not isinstance(status, int) or isinstance(status, bool) or "body" in members:
        raise MalformedReplyError(
            "the control plane sent a Slurm reply that clusterbot cannot read"
        )
    return SlurmAnswer(status, "".join(head), document, problem)


async def chunks_of(data: bytes, size: int = SLICE) -> AsyncIterator[bytes]:
    """Bytes given a slice at a time, as a reply arrives."""
    for at in range(0, len(data), size):
        yield data[at : at + size]


async def read_slurm_bytes(data: bytes, lists: dict[str, Keep], size: int = SLICE) -> SlurmAnswer:
    """A whole ``:callSlurmRestApi`` reply, read the way a long one arriving is."""
    return await read_slurm_stream(chunks_of(data, size), lists)
