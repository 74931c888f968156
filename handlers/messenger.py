"""How handlers speak to a chat platform, without knowing which one it is."""

from __future__ import annotations

import logging
from typing import Protocol

from handlers.replies import Reply, Text

log = logging.getLogger(__name__)

# Slack's answers when the bot may not post where it was asked to (chat.postMessage errors):
# a public channel it was not invited to, a private channel or DM it is not in, an archived one.
NOT_POSTABLE = frozenset(
    {
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "restricted_action",
        "cannot_reply_to_message",
    }
)


class MessengerError(Exception):
    """The platform refused a message; ``code`` is its reason (``not_in_channel``, ...)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code

    @property
    def not_postable(self) -> bool:
        """The bot cannot post in that conversation at all (as opposed to a passing failure)."""
        return self.code in NOT_POSTABLE


class Messenger(Protocol):
    async def post(self, channel: str, reply: Reply, thread_ts: str | None = None) -> str:
        """Post a message for everyone in the channel (or a thread); returns its id (ts).
        Raises ``MessengerError`` when the platform refuses it."""
        ...

    async def update(self, channel: str, ts: str, reply: Reply, *, progress: bool = False) -> None:
        """Replace a message the bot posted (an edit: repeating it changes nothing). A
        ``progress`` edit may be held back under a rate limit, and dropped for a newer edit
        of the same message; any other edit always arrives."""
        ...

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        """A message only this user sees."""
        ...

    async def upload(self, channel: str, filename: str, content: str, comment: str) -> None:
        """Share a text file in the channel, with a comment."""
        ...


async def tell_not_posted(messenger: Messenger, channel: str, user: str, what: str) -> None:
    """Tell ``user`` privately that their ``what`` (a request, a form) was cut off by a stop
    before it was posted, and that nothing was asked; a refusal to deliver is only logged."""
    text = (
        f"Your {what} was not posted: clusterbot stopped while making it. Nothing was "
        "requested; please ask again."
    )
    try:
        await messenger.whisper(channel, user, Reply(f"Your {what} was not posted").add(Text(text)))
    except MessengerError as error:
        log.warning("could not tell %s that their %s was not posted: %s", user, what, error.code)
