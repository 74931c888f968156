"""A command's typed form from its words, read as the dispatcher reads them."""

from __future__ import annotations

from typing import Any

from handlers.dispatch import read


def parse(text: str) -> Any:
    """The typed command for the text after ``/cluster``; raise its ``CommandError``."""
    words = read(text)
    if words.error is not None:
        raise words.error
    return words.command
