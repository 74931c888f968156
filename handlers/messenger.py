"""How handlers speak to a chat platform, without knowing which one it is."""

from __future__ import annotations

from typing import Protocol

from handlers.replies import Reply


class Messenger(Protocol):
    async def post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        """Post a message for everyone in the channel (or a thread); returns its id (ts)."""
        ...

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        """Replace a message the bot posted."""
        ...

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        """A message only this user sees."""
        ...
