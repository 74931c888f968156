"""Messages the bot owes, posted once.

A post is recorded in flight before it is sent and carries its item's key, unseen (Slack's
message metadata); its id is kept with the item once it returns. An attempt that finds a post
of an earlier one cut off between the two (``Attempt.unsure``) looks in the conversation for
the key before posting again, so a crash there costs nothing: no post lost, none doubled.
Where the platform cannot tell (the bot may not read that conversation's history) the post is
sent again: a duplicate at worst, never a loss; where it cannot tell *yet* (a rate limit, its
own outage) the look is made again later, and nothing is posted meanwhile.

``Outbox`` is the ``message`` worker: a reply owed in a channel or a thread, recorded whole
(``handlers/owed/wire.py``) with whatever state change makes it owed, and sent whatever the
chat platform does meanwhile: a rate limit is waited out, a passing failure tried again with
backoff, and a channel the bot was removed from gets it in the alert channel instead, saying
why.
"""

from __future__ import annotations

import logging
import secrets

from handlers.messenger import MessageId, Messenger, MessengerError
from handlers.owed.engine import POST_WINDOW, Attempt, Engine
from handlers.owed.model import Done, GiveUp, Later, Outcome, Owed
from handlers.owed.wire import decode, encode
from handlers.ports import Clock
from handlers.replies import Caution, ChannelRef, Reply, Text

log = logging.getLogger(__name__)
__all__ = ["POST_WINDOW", "Outbox", "look_for", "post_once", "rate_limited", "refused"]
RATE_LIMITED_AGAIN = 60.0  # a post Slack still rate-limits after its own waits: tried then
KIND = "message"


def rate_limited(error: MessengerError, now: float) -> Later:
    """Tried again at the turn the rate limit gives (``retry_after``), else in a minute."""
    wait = RATE_LIMITED_AGAIN if error.retry_after is None else error.retry_after
    return Later(now + wait, "rate limited")


def refused(error: MessengerError, now: float, cannot: str) -> Outcome:
    """How an attempt ends that the chat platform refused: tried again once a rate limit
    has passed, given up (saying ``cannot`` and why) where the bot may not post; anything
    else is raised, for the engine to try again with backoff."""
    if error.code == "ratelimited":
        return rate_limited(error, now)
    if error.not_postable:
        return GiveUp(f"{cannot}: {error.code}")
    raise error


def post_key(attempt: Attempt, name: str) -> str:
    """The key a post of this item is made with (in its metadata), to be found by."""
    return attempt.key if name == "message" else f"{attempt.key}/{name}"


async def look_for(
    attempt: Attempt,
    messenger: Messenger,
    channel: str,
    thread: MessageId | None,
    name: str = "message",
) -> MessageId | None:
    """A post of an earlier attempt cut off before its record (``Attempt.unsure``), looked
    for by its key once it can no longer arrive: found, it is kept as posted; None when it
    is not there (or cannot be looked for), and nothing is in flight any more."""
    key = post_key(attempt, name)
    try:
        found = await messenger.find(channel, key, attempt.item.created_at, thread)
    except MessengerError as error:
        if error.passing:  # a look that may work later: never post again without it
            raise
        log.warning("%s: cannot tell whether it arrived (%s)", key, error.code)
        found = None
    if found is None:
        await attempt.sent()
        return None
    await attempt.sent(**{name: found})
    return found


async def post_once(
    attempt: Attempt,
    messenger: Messenger,
    channel: str,
    reply: Reply,
    *,
    thread: MessageId | None = None,
    name: str = "message",
    waited_for: bool = False,
    progress: bool = False,
) -> MessageId:
    """Post ``reply`` for this item once, whatever attempt it takes; returns its id. ``name``
    tells one post of an item from another (a digest's message and its chart's); a
    ``progress`` post is made only if there is room for it now (``Messenger.post``); the step
    ``KIND-posted`` (which the worker declares) is passed between the post and its record."""
    kept = attempt.item.result.get(name)
    if isinstance(kept, str):
        return kept
    key = post_key(attempt, name)
    if attempt.unsure:
        found = await look_for(attempt, messenger, channel, thread, name)
        if found is not None:
            return found
    await attempt.sending(attempt.engine.post_window)
    try:
        message = await messenger.post(
            channel, reply, thread=thread, key=key, waited_for=waited_for, progress=progress
        )
    except MessengerError as error:
        if error.code != "connection_failed":  # refused: it did not arrive
            await attempt.sent()
        raise
    attempt.step(f"{attempt.worker.kind}-posted")
    await attempt.sent(**{name: message})
    return message


class Outbox:
    """The ``message`` worker, and how a capability owes a message."""

    kind = KIND
    steps = ("message-posted",)

    def __init__(
        self, *, engine: Engine, messenger: Messenger, alert_channel: str | None, clock: Clock
    ) -> None:
        self.engine = engine
        self.messenger = messenger
        self.alert_channel = alert_channel
        self.clock = clock

    def item(
        self,
        channel: str,
        reply: Reply,
        *,
        thread: MessageId | None = None,
        edit: MessageId | None = None,
        key: str | None = None,
    ) -> Owed:
        """A message to owe (with ``owe=`` on a state change, or ``send``): posted in the
        channel or the thread, or replacing ``edit``. With no ``key`` a new one is made: owed
        with the change that makes it so, it is owed exactly when that change happened."""
        subject = {"channel": channel, "thread": thread, "edit": edit, "reply": encode(reply)}
        return self.engine.due(KIND, key or f"{KIND}:{secrets.token_hex(8)}", subject)

    async def send(self, *items: Owed) -> None:
        """Owe these messages (a key owed before is not owed again) and send them now."""
        await self.engine.owe(*items)
        for item in items:
            await self.engine.run(item.key)

    async def sent_now(self, *items: Owed) -> None:
        """Send messages already owed (recorded with a state change) now, from here."""
        for item in items:
            await self.engine.run(item.key)

    async def work(self, attempt: Attempt) -> Outcome:
        subject = attempt.subject
        channel, reply = str(subject["channel"]), decode(subject["reply"])
        try:
            if subject.get("edit"):
                await self.messenger.update(channel, str(subject["edit"]), reply, owed=True)
            else:
                await post_once(attempt, self.messenger, channel, reply, thread=subject["thread"])
        except MessengerError as error:
            if error.not_postable:
                return await self._elsewhere(attempt, channel, reply, error)
            if error.code == "ratelimited":
                return rate_limited(error, self.clock())
            raise
        return Done()

    async def _elsewhere(
        self, attempt: Attempt, channel: str, reply: Reply, error: MessengerError
    ) -> Outcome:
        """The bot may not post where it was owed: the alert channel gets it, and why."""
        if self.alert_channel is None or self.alert_channel == channel:
            return GiveUp(f"cannot post in {channel}: {error.code}")
        if attempt.subject.get("edit"):
            return GiveUp(f"cannot edit in {channel}: {error.code}")  # the post said it
        moved = Reply(reply.summary, public=True).add(
            Text(
                Caution(),
                " clusterbot could not post this in ",
                ChannelRef(channel),
                f" ({error.code}), so it is here instead:",
            ),
            *reply.parts,
        )
        await post_once(attempt, self.messenger, self.alert_channel, moved, name="elsewhere")
        return Done("posted in the alert channel")
