"""Messages the bot owes: recorded whole, posted once whatever dies between the post and its
record (an earlier attempt's post is looked for by its key first), waited out under a rate
limit, and moved to the alert channel, saying why, when the bot was removed from the one it
was owed in."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from bot.slack.render import render
from handlers.actions import Decide
from handlers.owed.engine import LEASE, Engine
from handlers.owed.model import OwedState
from handlers.owed.posting import POST_WINDOW, Outbox
from handlers.owed.wire import decode, encode
from handlers.replies import (
    Button,
    Buttons,
    Caution,
    ChannelRef,
    Code,
    Confirm,
    Em,
    Field,
    Fields,
    Heading,
    Link,
    Note,
    Reply,
    Rule,
    Select,
    Strong,
    Table,
    Text,
    Time,
    UserRef,
)
from tests.conftest import ManualClock
from tests.support.fakes import FakeMessenger
from tests.support.memory import MemoryStore
from tests.support.text_adapter import text


def every_part() -> Reply:
    return Reply("a card", public=True).add(
        Heading("Resize request: c1"),
        Text(
            UserRef("U0ALICE"),
            " asks ",
            Strong("c1"),
            Em("now"),
            Code("a4"),
            ChannelRef("C1"),
            Time(1_700_000_000.0),
            Caution(),
            Link("https://example.com", "docs"),
        ),
        Fields((Field("Cost", "~$1.00/h"), Field("Who", UserRef("U0BOB")))),
        Note("a note"),
        Rule(),
        Table.of(("POOL", "NODES"), [("a4", 2)], right=frozenset({1})),
        Buttons(
            (
                Button(Decide("r-1", True), "Approve", "primary", Confirm("Sure?", ("x",), "Yes")),
                Select("Resume a node…", (("n1", Decide("r-2", False)),)),
            )
        ),
    )


def test_a_reply_recorded_whole_renders_as_it_was_meant() -> None:
    reply = every_part()
    again = decode(encode(reply))
    assert render(again) == render(reply)  # the same Block Kit, buttons and all
    assert text(again) == text(reply)


@dataclass
class World:
    store: MemoryStore
    engine: Engine
    outbox: Outbox
    messenger: FakeMessenger


def world(
    clock: ManualClock,
    owner: str = "A",
    messenger: FakeMessenger | None = None,
    store: MemoryStore | None = None,
) -> World:
    store = store or MemoryStore()
    messenger = messenger or FakeMessenger()
    engine = Engine(store=store, clock=clock, owner=owner, rng=random.Random(1), patience=1.0)
    outbox = Outbox(engine=engine, messenger=messenger, alert_channel="C0ALERTS", clock=clock)
    engine.add(outbox)
    return World(store, engine, outbox, messenger)


class Died(BaseException):
    """The process ended here."""


async def test_a_post_cut_off_before_its_record_is_found_not_posted_again(
    clock: ManualClock,
) -> None:
    one = world(clock)

    def die(step: str) -> None:
        if step == "message-posted":
            raise Died(step)

    one.engine.crash = die
    item = one.outbox.item("C1", Reply("hello").add(Text("hello")))
    with pytest.raises(Died):
        await one.outbox.send(item)
    assert len(one.messenger.posted) == 1  # it arrived; the record of it did not
    # a restart, the same world: the item lapses, and the next attempt looks first
    two = world(clock, "B", one.messenger, one.store)
    clock.advance(POST_WINDOW + LEASE)
    assert await two.engine.run_due() == 1
    assert len(one.messenger.posted) == 1  # found by its key: not posted twice
    done = await one.store.get_owed(item.key)
    assert done is not None and done.state == OwedState.DONE
    assert done.result["message"] == one.messenger.posted[0][1]


async def test_a_channel_the_bot_left_gets_it_in_the_alert_channel(clock: ManualClock) -> None:
    one = world(clock, messenger=FakeMessenger(refuse_in={"C0GONE": "not_in_channel"}))
    await one.outbox.send(one.outbox.item("C0GONE", Reply("asleep").add(Text("asleep"))))
    [(channel, _, reply, _)] = one.messenger.posted
    assert channel == "C0ALERTS"
    shown = text(reply)
    assert "could not post this in #C0GONE (not_in_channel)" in shown and "asleep" in shown


async def test_a_rate_limit_that_outlasts_slack_own_waits_is_tried_again(
    clock: ManualClock,
) -> None:
    one = world(clock, messenger=FakeMessenger(refuse="ratelimited"))
    item = one.outbox.item("C1", Reply("x").add(Text("x")))
    await one.outbox.send(item)
    waiting = await one.store.get_owed(item.key)
    assert waiting is not None and waiting.state == OwedState.DUE and waiting.note == "rate limited"
    one.messenger.refuse = None
    clock.advance(61)
    await one.engine.run_due()
    assert len(one.messenger.posted) == 1


async def test_a_failure_of_the_platform_is_tried_again_not_lost(clock: ManualClock) -> None:
    messenger = FakeMessenger(refuse="internal_error")
    one = world(clock, messenger=messenger)
    item = one.outbox.item("C1", Reply("x").add(Text("x")))
    await one.outbox.send(item)
    assert messenger.posted == []
    messenger.refuse = None
    clock.advance(10)
    await one.engine.run_due()
    assert len(messenger.posted) == 1


async def test_an_owed_edit_replaces_the_message(clock: ManualClock) -> None:
    one = world(clock)
    await one.outbox.send(one.outbox.item("C1", Reply("new").add(Text("new")), edit="123.4"))
    [(channel, ts, reply)] = one.messenger.edits
    assert (channel, ts, text(reply)) == ("C1", "123.4", "new")
