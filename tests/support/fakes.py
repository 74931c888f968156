"""In-memory stand-ins for the core's ports, for unit tests that run in milliseconds."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.slack.messenger import NOT_POSTABLE
from handlers.messenger import MessengerError
from handlers.replies import Line, Reply, plain


@dataclass
class FakeMessenger:
    """Records what would be posted; ``refuse`` makes posts fail with that Slack error."""

    refuse: str | None = None
    posted: list[tuple[str, str, Reply, str | None]] = field(default_factory=list)
    edits: list[tuple[str, str, Reply]] = field(default_factory=list)
    whispers: list[tuple[str, str, Reply]] = field(default_factory=list)
    files: list[tuple[str, str, str, str]] = field(default_factory=list)
    shared: list[tuple[str, tuple[tuple[str, bytes | str], ...], str]] = field(default_factory=list)
    refuse_in: dict[str, str] = field(default_factory=dict)  # a channel's refusal of posts
    refuse_edits: dict[str, str] = field(default_factory=dict)  # a message's edits refused
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (channel, ts)
    refuse_find: str | None = None  # a look at the history refused with that Slack error
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def post(
        self,
        channel: str,
        reply: Reply,
        thread: str | None = None,
        key: str | None = None,
        waited_for: bool = False,
        progress: bool = False,
    ) -> str:
        refused = self.refuse or self.refuse_in.get(channel)
        if refused:
            raise MessengerError(refused, not_postable=refused in NOT_POSTABLE)
        ts = f"{1_700_000_000 + next(self._ids)}.000100"
        self.posted.append((channel, ts, reply, thread))
        if key is not None:
            self.keys[key] = (channel, ts)
        return ts

    async def find(
        self, channel: str, key: str, since: float, thread: str | None = None
    ) -> str | None:
        if self.refuse_find:
            raise MessengerError(self.refuse_find)
        found = self.keys.get(key)
        return found[1] if found is not None and found[0] == channel else None

    async def update(
        self,
        channel: str,
        message: str,
        reply: Reply,
        *,
        progress: bool = False,
        owed: bool = False,
    ) -> None:
        if message in self.refuse_edits:
            raise MessengerError(self.refuse_edits[message])
        self.edits.append((channel, message, reply))

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        self.whispers.append((channel, user, reply))

    async def upload(self, channel: str, filename: str, content: str, comment: Line) -> None:
        if self.refuse:
            raise MessengerError(self.refuse, not_postable=self.refuse in NOT_POSTABLE)
        self.files.append((channel, filename, content, plain(comment)))

    async def share(
        self, channel: str, files: Sequence[tuple[str, bytes | str]], comment: Line
    ) -> None:
        if self.refuse:
            raise MessengerError(self.refuse, not_postable=self.refuse in NOT_POSTABLE)
        self.shared.append((channel, tuple(files), plain(comment)))
