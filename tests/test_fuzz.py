"""Every command gets exactly one answer, whatever is typed (hypothesis; 10,000 cases run in
`make bench`). Answers never carry more than Slack allows, nor a cut entity or mention."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.demo_stack import text_of
from tests.support.fuzz import Harness, answer_count, commands, harness

EXAMPLES = 150


@pytest.fixture
async def run(tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(tmp_path) as running:
        yield running


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=commands())
async def test_every_command_gets_exactly_one_answer(run: Harness, text: str) -> None:
    replies, cards = await answer_count(run, text)
    assert replies + cards == 1, (text[:200], replies, cards)


async def test_a_long_command_is_answered_briefly(run: Harness) -> None:
    command_id = await run.send("show " + "x" * 5000)
    await run.settled()
    assert not run.hooked[command_id]  # a usage error is at hand: it comes back in the ack
    shown = text_of(run.acked[command_id])
    assert len(shown) < 1000 and "Usage: /cluster show CLUSTER" in shown


async def test_an_answer_at_hand_comes_in_the_ack_and_one_that_needs_work_after_it(
    run: Harness,
) -> None:
    helped = await run.send("help")
    listed = await run.send("list")
    await run.settled()
    # help: in the ack's body, as the user's own reply, and nothing through the response_url
    assert run.acked[helped]["response_type"] == "ephemeral"
    assert "/cluster resize" in text_of(run.acked[helped]) and not run.hooked[helped]
    # list asks the control plane: an empty ack, then the reply through the response_url
    assert listed not in run.acked
    [reply] = run.hooked[listed]
    assert "train01" in text_of(reply)
