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
