"""Every signed payload of the surfaces other than commands (view submissions,
block_suggestion, clicks, Home tab events) and every body sent to the release API gets exactly
one well-formed answer, and no task fails after it (hypothesis; 10,000 cases run in
`make bench`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.fuzz_surfaces import Case, Surfaces, answer, cases, surfaces
from tests.test_release import AUDIENCE, BUILD, Issuer, issuer

__all__ = ["issuer"]  # the fixture, used by name
EXAMPLES = 150


@pytest.fixture
async def run(tmp_path: Path, issuer: tuple[Issuer, str]) -> AsyncIterator[Surfaces]:
    keys, certs_url = issuer
    async with surfaces(tmp_path, keys.token(BUILD), AUDIENCE, certs_url) as running:
        yield running


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
async def test_every_payload_gets_one_well_formed_answer(run: Surfaces, case: Case) -> None:
    assert await answer(run, case) is None, case.body


# Found by the 10,000-case run: an event whose ids are neither text nor objects reached Bolt,
# which read into them and answered 500 before any listener ran.
ODD_IDS = [
    {"type": "\U000d0cdb\u00a7", "tab": True, "user": True},
    {"type": "app_mention", "user": -324, "tab": {}},
    {"type": "message", "user": "U0ALICE", "channel": False},
    {"type": "message", "team": 7},
    {"type": "message_changed", "message": {"user": 5}},
    {"type": "reaction_added", "item": {"channel": []}},
]


@pytest.mark.parametrize("event", ODD_IDS)
async def test_an_event_whose_ids_are_not_ids_is_refused_not_a_500(
    run: Surfaces, event: dict[str, object]
) -> None:
    case = Case("event", {"type": "event_callback", "team_id": "T0DEMO", "event": event})
    status, text = await run.send(case)
    assert status == 400, text
    assert await answer(run, case) is None
    forged = Case("event", {"type": "event_callback", "authorizations": ["x"], "event": event})
    assert (await run.send(forged))[0] == 400
