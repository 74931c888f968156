"""How handlers speak to a chat platform, without knowing which one it is."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, TypeAlias

from handlers.replies import Line, Reply, Text

log = logging.getLogger(__name__)

# A message the bot posted, as the platform that holds it names it: opaque to the core, which
# keeps it (a request's card, its thread's progress message, an alert) to edit or reply to.
MessageId: TypeAlias = str


class MessengerError(Exception):
    """The platform refused a message. ``code`` is its own reason, for logs and to quote;
    ``not_postable`` says the bot may not post in that conversation at all (the platform's
    adapter knows which of its answers mean that), as opposed to a passing failure;
    ``policy`` is what a workspace admin's setting forbids (file uploads turned off), which no
    retry changes; ``passing``, a trouble of the platform's that a later try may not meet."""

    def __init__(
        self,
        code: str,
        *,
        not_postable: bool = False,
        policy: str | None = None,
        passing: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(code)
        self.code = code
        self.retry_after = retry_after  # a rate limit's: seconds until the call may come again
        self.not_postable = not_postable
        self.policy = policy
        # the platform's own passing trouble (a rate limit, its outage, no connection): the
        # same call may succeed later
        self.passing = passing or code == "ratelimited"

    def advice(self) -> str:
        """What the person can do about it, in a few words."""
        if self.policy is not None:
            return f"{self.policy}, a workspace admin's setting"
        if self.not_postable:
            return "invite clusterbot to this channel, or ask in a channel it is in"
        return "try again in a minute"


class Messenger(Protocol):
    async def post(
        self,
        channel: str,
        reply: Reply,
        thread: MessageId | None = None,
        key: str | None = None,
        waited_for: bool = False,
        progress: bool = False,
    ) -> MessageId:
        """Post a message for everyone in the channel (or in the thread under ``thread``);
        returns its id. ``key`` is carried with the message, unseen, so that ``find`` can
        tell later whether a post whose answer was lost arrived; a post with a key is an owed
        item's, which the engine tries again, so under a rate limit it is refused at once
        (``ratelimited``, with ``retry_after``) instead of waiting for its turn, unless a
        person is ``waited_for`` it (a card they asked for): that one waits for the next
        room, ahead of the crowd. A ``progress`` post (a running change's thread message, the
        least of all) is made only when there is room now and nothing more important waits,
        else refused at once (``ratelimited``): it never holds its caller or takes a card's
        room.
        Raises ``MessengerError`` when the platform refuses it."""
        ...

    async def find(
        self, channel: str, key: str, since: float, thread: MessageId | None = None
    ) -> MessageId | None:
        """The message posted with ``key`` since ``since`` (epoch seconds), in the channel
        or the thread; None when there is none. Raises ``MessengerError`` when the platform
        cannot tell (the bot may not read the conversation's history)."""
        ...

    async def update(
        self,
        channel: str,
        message: MessageId,
        reply: Reply,
        *,
        progress: bool = False,
        owed: bool = False,
    ) -> None:
        """Replace a message the bot posted (an edit: repeating it changes nothing). A
        ``progress`` edit may be held back under a rate limit, and dropped for a newer edit
        of the same message; any other edit always arrives. An ``owed`` item's edit is
        refused at once under a rate limit (``ratelimited``, with ``retry_after``): the
        engine tries it again then."""
        ...

    async def whisper(self, channel: str, user: str, reply: Reply) -> None:
        """A message only this user sees."""
        ...

    async def upload(self, channel: str, filename: str, content: str, comment: Line) -> None:
        """Share a text file in the channel, with a comment."""
        ...

    async def share(
        self, channel: str, files: Sequence[tuple[str, bytes | str]], comment: Line
    ) -> None:
        """Share files (name, content) in the channel as one message, with a comment."""
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
