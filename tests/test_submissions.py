"""A form submission is owned from its first byte: a stop at any moment ends it with the card
posted or the sender told privately that it was not, and an exact replay of a signed
submission makes nothing new. Through the stand-ins over loopback, and on the core."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from handlers.intake import Intake
from tests.support.demo_stack import CPU01, Stack, demo_stack, is_card, text_of
from tests.support.fakes import FakeMessenger
from tests.support.memory import MemoryStore
from tests.test_forms import choose, modal, submit
from tests.test_store import a_request


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_cut_off_submission_is_told_of_once_by_whoever_finishes_it() -> None:
    store, messenger, clock = MemoryStore(), FakeMessenger(), Clock()
    one = Intake(store=store, requests=store, messenger=messenger, clock=clock, owner="one")
    lost = await one.receive("V1:h", "U0ALICE", "C1", "delete form")
    assert lost is not None
    assert await one.receive("V1:h", "U0ALICE", "C1", "delete form") is None  # a replay
    made = await one.receive("V2:h", "U1", "C1", "resize form")
    assert made is not None
    await store.add_request(a_request("r1"))  # U1's request, made after the submission
    another = Intake(store=store, requests=store, messenger=messenger, clock=clock, owner="two")
    assert await another.recover() == 0  # one's are its work in hand, for a while
    clock.now += 61
    assert await another.recover() == 2  # left past the minute: anyone finishes them
    [(channel, user, told)] = messenger.whispers  # U1's request tells of itself
    assert (channel, user) == ("C1", "U0ALICE")
    assert "Your delete form was not posted" in text_of({"text": told.summary})
    assert await store.unfinished_submissions("one", clock.now) == []
    # a replica starting again finishes its own at once
    again = await one.receive("V3:h", "U0ALICE", "C1", "resize form")
    assert again is not None and await one.recover(starting=True) == 1


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path, drain_seconds=0.5) as running:
        yield running


async def delete_form(stack: Stack) -> dict[str, Any]:
    await stack.command("alice", "/cluster delete")
    form = await modal(stack, "alice")
    await choose(stack, "alice", form, CPU01)
    return await modal(stack, "alice", "confirm")


async def test_a_stop_while_a_submission_works_tells_its_sender(stack: Stack) -> None:
    form = await delete_form(stack)
    await stack.fault(method="GET", path="cpu01", latency_ms=8000)  # the control plane hangs
    answer = await submit(stack, "alice", form, {"confirm": {"form_confirm": "cpu01"}})
    assert answer["errors"] == {}  # the form closed, its work still under way
    await stack.service.stop()  # SIGTERM: the drain (0.5 s) runs out, the work is cut off
    messages = await stack.messages()
    told = [m for m in messages if "was not posted" in text_of(m)]
    assert len(told) == 1 and told[0]["ephemeral_to"] == "U0ALICE", messages
    assert "Your delete form was not posted" in text_of(told[0])
    assert not [m for m in messages if is_card(m)]
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
    assert await stack.service.store.unfinished_submissions("", 1e12) == []


async def test_a_stop_with_time_to_drain_posts_the_card(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, drain_seconds=20) as stack:
        form = await delete_form(stack)
        await stack.fault(method="GET", path="cpu01", latency_ms=2500)
        answer = await submit(stack, "alice", form, {"confirm": {"form_confirm": "cpu01"}})
        assert answer["errors"] == {}
        await stack.service.stop()
        messages = await stack.messages()
        assert [m for m in messages if is_card(m)] and not [
            m for m in messages if "was not posted" in text_of(m)
        ]
        assert len(await stack.service.store.requests_in(["pending"])) == 1


async def test_an_exact_replay_of_a_submission_makes_nothing_new(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.sandbox.slack import view_delivery

    sent: list[str] = []
    original = view_delivery.send

    async def recorded(session: Any, ws: Any, kind: str, payload: Any, body: str) -> Any:
        if payload.get("type") == "view_submission":
            sent.append(body)
        return await original(session, ws, kind, payload, body)

    monkeypatch.setattr(view_delivery, "send", recorded)
    form = await delete_form(stack)
    answer = await submit(stack, "alice", form, {"confirm": {"form_confirm": "cpu01"}})
    assert answer["errors"] == {}
    [request] = await stack.wait_for(lambda: stack.service.store.requests_in(["pending"]))
    await stack.service.core.approvals.withdraw("U0ALICE", request.id, None)  # it ended
    [body] = sent
    status, text = await stack.deliver(body)  # the same signed body, sent again
    assert status == 200 and text == ""
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
    assert len(await stack.service.store.requests_in(["withdrawn"])) == 1
