"""Stress: 10,000 generated commands through the bot, each checked for exactly one answer;
then 10,000 generated payloads of the other surfaces (view submissions, block_suggestion,
clicks, Home tab events, release API bodies), each checked for one well-formed answer and no
task failing after it.

The same harnesses as tests/test_fuzz.py and tests/test_fuzz_surfaces.py, run at ten
thousand cases each.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from benchmarks.harness import Results, heading
from tests.support.fuzz import Harness, answer_count, commands, harness
from tests.support.fuzz_surfaces import (
    Case,
    Surfaces,
    answer_status,
    events,
    payloads,
    releases,
    surfaces,
)
from tests.test_release import AUDIENCE, BUILD, Issuer
from tests.test_release_crashes import certs_served

CASES = int(os.environ.get("CLUSTERBOT_FUZZ_CASES", "10000"))
INTERNAL = "internal error"  # what a person is shown, and the log says, of an internal error


def run(results: Results) -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    run_harness = asyncio.run_coroutine_threadsafe(_open(), loop).result(timeout=60)
    counts = {"cases": 0, "replies": 0, "cards": 0}
    wrong: list[str] = []

    @settings(
        max_examples=CASES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(text=commands())
    def check(text: str) -> None:
        try:
            replies, cards = asyncio.run_coroutine_threadsafe(
                answer_count(run_harness, text), loop
            ).result(timeout=60)
        except AssertionError:  # not answered 200: counted by its status below
            wrong.append(text[:80])
            return
        counts["cases"] += 1
        counts["replies"] += replies
        counts["cards"] += cards
        if replies + cards != 1:
            wrong.append(text[:80])

    started = time.perf_counter()
    check()
    elapsed = time.perf_counter() - started
    internal, statuses = run_harness.internal_errors(), dict(run_harness.statuses)
    asyncio.run_coroutine_threadsafe(_close(), loop).result(timeout=60)
    loop.call_soon_threadsafe(loop.stop)
    heading(f"fuzzed commands through the bot: {counts['cases']:,} cases in {elapsed:.0f} s")
    assert counts["cases"] >= CASES, "hypothesis generated fewer cases than asked"
    results.add("fuzz", "commands sent", counts["cases"], "cmds")
    results.add("fuzz", "replies", counts["replies"], "msgs")
    results.add("fuzz", "approval cards", counts["cards"], "cards")
    results.add("fuzz", "HTTP 500 answers to commands", statuses.get(500, 0), "cmds", at_most=0)
    results.add("fuzz", "internal errors answered to commands", internal, "cmds", at_most=0)
    figure = results.add("fuzz", "answered other than exactly once", len(wrong), "cmds", at_most=0)
    if wrong:
        figure.note = f"for example: {wrong[:5]}"


_context = None
_folder = Path(tempfile.mkdtemp(prefix="clusterbot-fuzz-"))


async def _open() -> Harness:
    global _context
    _context = harness(_folder)
    return await _context.__aenter__()


async def _close() -> None:
    assert _context is not None
    await _context.__aexit__(None, None, None)
    shutil.rmtree(_folder, ignore_errors=True)


# per surface: forms and clicks (view submissions, block_suggestion, block_actions), events
# (the Home tab and others), and the release API's bodies
PER_SURFACE = {"interactive": CASES, "event": CASES, "release": max(1, CASES // 5)}


def run_surfaces(results: Results) -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    issuer = Issuer()
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-fuzz-surfaces-"))
    counts: dict[str, int] = {}
    wrong: list[str] = []
    statuses: dict[int, int] = {}
    strategies = {"interactive": payloads(), "event": events(), "release": releases()}
    elapsed = 0.0
    with certs_served(issuer) as certs_url:
        context = surfaces(folder, issuer.token(BUILD), AUDIENCE, certs_url)
        running: Surfaces = asyncio.run_coroutine_threadsafe(context.__aenter__(), loop).result(
            timeout=60
        )
        for surface, wanted in PER_SURFACE.items():

            @settings(
                max_examples=wanted,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategies[surface].map(functools.partial(Case, surface)))
            def check(case: Case) -> None:
                surface = case.surface
                status, problem = asyncio.run_coroutine_threadsafe(
                    answer_status(running, case), loop
                ).result(timeout=60)
                counts[surface] = counts.get(surface, 0) + 1
                statuses[status] = statuses.get(status, 0) + 1
                if problem is not None:
                    wrong.append(problem)

            started = time.perf_counter()
            check()
            elapsed += time.perf_counter() - started
        internal = sum(INTERNAL in f for f in running.failures)
        asyncio.run_coroutine_threadsafe(context.__aexit__(None, None, None), loop).result(60)
    loop.call_soon_threadsafe(loop.stop)
    shutil.rmtree(folder, ignore_errors=True)
    total = sum(counts.values())
    heading(f"fuzzed payloads of the other surfaces: {total:,} cases in {elapsed:.0f} s")
    for surface, wanted in PER_SURFACE.items():
        assert counts.get(surface, 0) >= wanted, f"hypothesis generated fewer {surface} cases"
        results.add("fuzz", f"{surface} payloads sent", counts[surface], "cases")
    results.add("fuzz", "HTTP 500 answers to payloads", statuses.get(500, 0), "cases", at_most=0)
    results.add("fuzz", "internal errors after payloads", internal, "cases", at_most=0)
    figure = results.add(
        "fuzz", "payloads answered other than once and well", len(wrong), "cases", at_most=0
    )
    if wrong:
        figure.note = f"for example: {wrong[:5]}"
