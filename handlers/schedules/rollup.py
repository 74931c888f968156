"""A fleet's night in one message: the nights asked in a channel in the same window (a minute,
or two schedule checks where checks are quicker) are listed in one roll-up there, redrawn as
they end, while each night's card and lines go in its own schedule's thread. A thousand
clusters on one schedule make one message in the channel, not a thousand cards.

The roll-up is owed with each night's request, in the same step, under a key made of the
channel and the window (the window's first night owes it, the others find it owed), and owed
again when one of its nights ends (``Owed.again``: due again, even once done), so that its
last drawing shows every night as it ended. It is posted and edited ahead of the crowd's
own lines in the threads, which take their turns in Slack's tiers after it. It is done by
the engine like any message the bot owes: posted once, edited when what it shows changed,
and done once its window is over and none of its nights is under way.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.messenger import Messenger, MessengerError
from handlers.owed.engine import Attempt, Engine
from handlers.owed.model import Done, Later, Outcome, Owed
from handlers.owed.posting import post_once, refused
from handlers.ports import Clock, RequestStore
from handlers.replies import Heading, Note, Reply, Text, Time, joined

KIND = "night-rollup"
MINUTE = 60.0
NAMED = 20  # clusters named at most on each line; the rest are counted
UNDER_WAY = frozenset(
    {
        RequestState.DRAFT,
        RequestState.PENDING,
        RequestState.APPROVED,
        RequestState.EXECUTING,
        RequestState.RUNNING,
    }
)
# how each end is said; an end not listed here is shown by its own name
ENDS = {
    RequestState.SUCCEEDED: "done",
    RequestState.FAILED: "failed",
    RequestState.REFUSED: "not applied",
    RequestState.UNKNOWN: "outcome unknown (check the cluster)",
}


def rollup_key(channel: str, start: float) -> str:
    return f"{KIND}:{channel}:{start:.3f}"


def rollup_reply(start: float, nights: Sequence[tuple[str, RequestState]]) -> Reply:
    """The roll-up of the nights asked in one minute: how many are done, under way or ended
    otherwise, and the clusters of each group but the done ones (named up to ``NAMED``)."""
    groups: dict[str, list[str]] = {}
    for cluster, state in nights:
        word = "under way" if state in UNDER_WAY else ENDS.get(state, str(state))
        groups.setdefault(word, []).append(cluster.rsplit("/", 1)[-1])
    counted = Counter({word: len(names) for word, names in groups.items()})
    asked = f"{len(nights):,} {'night' if len(nights) == 1 else 'nights'} asked"
    summary = " · ".join(f"{n:,} {word}" for word, n in counted.most_common())
    reply = Reply(f"Schedules: {asked} · {summary}", public=True).add(
        Heading(f"Schedules: {asked}{' together' if len(nights) > 1 else ''}"),
        Text(summary, "."),
    )
    for word, names in sorted(groups.items()):
        if word == "done" and len(groups) > 1:
            continue  # the ones to look at come first; done is counted above
        shown: list[str] = sorted(names)[:NAMED]
        more = f" and {len(names) - NAMED:,} more" if len(names) > NAMED else ""
        reply.add(Text(f"{word.capitalize()}: ", *joined(shown), more))
    return reply.add(
        Note("Asked from ", Time(start), "; each night is told in its schedule's thread.")
    )


class NightRollup:
    """The ``night-rollup`` worker: one roll-up per channel and window of nights. Its times
    follow the window: drawn a twelfth of it after it closes (the window's last asks have
    landed), again at most every sixth of it while nights end, and looked at once a window
    in any case."""

    kind = KIND
    steps = (f"{KIND}-posted",)

    def __init__(
        self,
        *,
        engine: Engine,
        requests: RequestStore,
        messenger: Messenger,
        clock: Clock,
        window: float = MINUTE,
    ) -> None:
        self.engine = engine
        self.requests = requests
        self.messenger = messenger
        self.clock = clock
        self.window = min(MINUTE, window)

    def _item(self, channel: str, asked_at: float, at: float | None = None) -> Owed:
        start = asked_at // self.window * self.window
        subject = {"channel": channel, "start": start}
        due = start + self.window * (1 + 1 / 12) if at is None else at
        return self.engine.due(KIND, rollup_key(channel, start), subject, at=due)

    def owed_with(self, request: ApprovalRequest) -> Sequence[Owed]:
        """The roll-up a night's request belongs to, owed with it: once (a thousand asks
        of one minute never wait on its row); one asked so late that the roll-up was done
        without it is drawn again when it ends."""
        return [self._item(request.channel, request.created_at)]

    async def ended(self, request: ApprovalRequest) -> None:
        """A night ended: its roll-up is drawn again soon (done or not)."""
        soon = self.clock() + self.window / 6
        item = self._item(request.channel, request.created_at, at=soon)
        item.again = True
        await self.engine.owe(item)

    async def work(self, attempt: Attempt) -> Outcome:
        channel, start = str(attempt.subject["channel"]), float(attempt.subject["start"])
        nights = await self.requests.asked_in(
            channel, str(Origin.SCHEDULE), start, start + self.window
        )
        if not nights:
            return Done("no night was asked in its window")
        reply = rollup_reply(start, nights)
        drawn = hashlib.sha256(repr(reply).encode()).hexdigest()[:16]
        try:
            # posted now with this drawing; one found after a cut-off post may be older
            posts_now = "message" not in attempt.item.result and not attempt.unsure
            # the channel's one message for the crowd goes ahead of the crowd's own lines
            message = await post_once(attempt, self.messenger, channel, reply, waited_for=True)
            if not posts_now and attempt.item.result.get("drawn") != drawn:
                await self.messenger.update(channel, message, reply)
        except MessengerError as error:
            return refused(error, self.clock(), f"cannot post the roll-up in {channel}")
        if attempt.item.result.get("drawn") != drawn:
            await attempt.keep(drawn=drawn)
        now, closes = self.clock(), start + self.window
        if now < closes:  # more nights may be asked in its window
            return Later(closes + self.window / 12, "its window is open")
        if any(state in UNDER_WAY for _, state in nights):
            return Later(now + self.window, "nights under way")  # their ends draw it sooner
        return Done()
