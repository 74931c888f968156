"""A burst of alerts in one message: when a sweep finds ``BURST`` alerts or more to post in
one channel at once (a fleet's first sweep, a night's jobs ending together, a zone's outage),
the channel gets one roll-up that lists them, and each alert, with its buttons, goes in the
roll-up's thread instead of as one more message in the channel.

The roll-up is a message the outbox owes (posted once, whatever crashes), owed in the same
write as the alerts and sent first. Each alert's item names it (``burst`` in its subject),
waits for it to be posted and then goes in its thread; in the channel when the roll-up could
not be posted there. An alert owed before the burst keeps its place."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, TypeVar

from handlers.costs import money
from handlers.owed.engine import Engine
from handlers.owed.model import Owed, OwedState
from handlers.owed.posting import Outbox
from handlers.replies import Note, Reply, Text, Time

BURST = 5  # alerts to post in one channel, found by one sweep, that make a roll-up
NAMED = 20  # alerts listed in a roll-up, costliest first; the rest are counted
WAIT: Literal["wait"] = "wait"
T = TypeVar("T")


def rollup_key(kind: str, channel: str, at: float) -> str:
    return f"{kind}:{channel}:{at:.3f}"


def rollup_end(reply: Reply, rest: Sequence[float | None], at: float, buttons: str) -> Reply:
    """A roll-up's last lines: the alerts not named (``rest``: what each costs an hour),
    counted, and when the sweep found them; ``buttons``: what each alert in the thread has."""
    if rest:
        cost = money(sum(hour or 0.0 for hour in rest))
        reply.add(Text(f"And {len(rest):,} more, {cost} together."))
    found = f"; each cluster's alert, with its {buttons}, is in this thread."
    return reply.add(Note("Found by the sweep at ", Time(at), found))


async def rollup_thread(engine: Engine, key: str) -> str | Literal["wait"] | None:
    """Where an alert of the burst ``key`` goes: the roll-up's message (its thread), None
    for the channel (the roll-up is not owed, or could not be posted), or ``WAIT`` while it
    is still to be posted."""
    item = await engine.store.get_owed(key)
    if item is None or item.state == OwedState.DROPPED:
        return None
    message = item.result.get("message")
    if isinstance(message, str):
        return message
    if item.result.get("elsewhere") or item.state == OwedState.DONE:
        return None  # posted elsewhere, or done without a message: not a thread to go in
    return WAIT


async def thread_of(engine: Engine, key: str) -> str | None:
    """The roll-up thread the alert owed as ``key`` goes in (None: the channel)."""
    item = await engine.store.get_owed(key)
    burst = None if item is None else item.subject.get("burst")
    if not isinstance(burst, str):
        return None
    thread = await rollup_thread(engine, burst)
    return None if thread == WAIT else thread


async def not_owed(engine: Engine, due: Sequence[T], key: Callable[[T], str], kind: str) -> list[T]:
    """Those of ``due`` whose items (of ``kind``, named by ``key``) are not owed yet: one
    read of the items still due or given up, whatever their number."""
    states = (OwedState.DUE, OwedState.DROPPED)
    owed = {item.key for item in await engine.store.owed_items(kinds=[kind], states=states)}
    return [what for what in due if key(what) not in owed]


async def owe_burst(
    outbox: Outbox,
    channel: str,
    rollup: tuple[str, Reply],
    alerts: Callable[[str], Iterable[Owed]],
    step: str | None = None,
) -> str:
    """Owe a burst's roll-up (``rollup``: its key and what it says) and its ``alerts`` (made
    with that key) in one write, then send the roll-up: its key. ``step``: the crash point
    passed before the write."""
    key, said = rollup
    item = outbox.item(channel, said, key=key)
    if step is not None:
        outbox.engine.crash(step)
    await outbox.engine.owe(item, *alerts(key))
    await outbox.sent_now(item)
    return key
