"""Slurm's host lists (``a4-[0-3,7]``, ``rack[1-2]-n[01-02]``), as scontrol(1) "show
hostnames" expands them: ranges keep their zero padding, several bracket groups multiply,
commas outside brackets separate lists. Bounded: a list naming more than ``limit`` hosts is
cut there, so a reply cannot make the bot build millions of names."""

from __future__ import annotations

import re

LIMIT = 100_000
_GROUP = re.compile(r"\[([^\[\]]*)\]")


def _split(text: str) -> list[str]:
    """The top-level comma-separated parts (commas inside brackets belong to a range)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, limit: int) -> list[str]:
    values: list[str] = []
    for item in spec.split(","):
        first, _, last = item.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return [f"[{spec}]"]  # not a range Slurm writes: kept as written
        width = len(first) if first.startswith("0") else 0
        for number in range(int(first), int(last or first) + 1):
            values.append(str(number).zfill(width))
            if len(values) >= limit:
                return values
    return values


def _expand(part: str, limit: int) -> list[str]:
    match = _GROUP.search(part)
    if match is None:
        return [part]
    head, tail = part[: match.start()], part[match.end() :]
    names: list[str] = []
    for value in _range(match.group(1), limit):
        for rest in _expand(tail, limit - len(names)):
            names.append(f"{head}{value}{rest}")
            if len(names) >= limit:
                return names
    return names


def expand(text: str, limit: int = LIMIT) -> list[str]:
    """The host names a host list names, in order, at most ``limit`` of them."""
    names: list[str] = []
    for part in _split(text):
        names += _expand(part, limit - len(names))
        if len(names) >= limit:
            return names[:limit]
    return names
