"""The fault matrix of an approved change: at each named step of its path (found in the code,
tests/support/steps.py), each fault (kill -9 at the step, SIGTERM, PostgreSQL gone for 5 s
and for 30 s, Slack answering 429 to everything for a minute), on real processes
(tests/support/faults.py). Each run counts what reached the world: PATCHes at the control
plane, messages telling the end in the card's thread, mentions of the requester, owed items
left undone, and how the request ended. A run is lost when nothing was sent or nothing told,
duplicated when anything was sent or told twice, stuck when it did not end or left work owed.

Two runs at a time (each its own stand-ins, replica and database). ``CLUSTERBOT_MATRIX_FAULTS``
and ``CLUSTERBOT_MATRIX_STEPS`` (comma-separated) run a part of it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.harness import Results, heading
from tests.support.faults import FAULTS, Outcome, run_change
from tests.support.steps import steps_of


def _chosen(variable: str, every: list[str]) -> list[str]:
    named = [n for n in os.environ.get(variable, "").split(",") if n]
    unknown = set(named) - set(every)
    if unknown:
        raise SystemExit(f"{variable}: no {', '.join(sorted(unknown))}; choose from {every}")
    return named or every


def _one(point: str, fault: str, unmade: list[str]) -> Outcome:
    """One run; a run that could not be made (its stand-ins or replica did not start, before
    any fault) is made again once, and the reason kept."""
    for _ in range(2):
        folder = Path(tempfile.mkdtemp(prefix="clusterbot-matrix-"))
        try:
            return run_change(point, fault, folder)
        except Exception as error:
            unmade.append(f"{point} {fault}: {str(error)[-600:]}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return Outcome(problems=[f"the run could not be made: {unmade[-1]}"])


def run(results: Results) -> None:
    faults = _chosen("CLUSTERBOT_MATRIX_FAULTS", ["kill", *FAULTS])
    points = _chosen("CLUSTERBOT_MATRIX_STEPS", steps_of("change"))
    cells = [(point, fault) for fault in faults for point in points]
    started = time.perf_counter()
    unmade: list[str] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda cell: _one(cell[0], cell[1], unmade), cells))
    elapsed = time.perf_counter() - started
    heading(
        f"fault matrix of a change: {len(points)} steps x {len(faults)} faults, "
        f"{len(cells)} runs in {elapsed:.0f} s"
    )
    for fault in faults:
        row = [o for (_, f), o in zip(cells, outcomes, strict=True) if f == fault]
        shown = " ".join(
            "." if o.ok else "x" for o in row
        )  # one mark a step, in the order of the steps
        print(f"  {fault:>13}  {shown}")
    print(f"  steps: {', '.join(points)}")
    lost = sum(o.patches == 0 or o.ends == 0 for o in outcomes)
    twice = sum(o.patches > 1 or o.ends > 1 or o.mentions > 1 for o in outcomes)
    stuck = sum(o.undone > 0 or o.state != "succeeded" for o in outcomes)
    patches = sum(o.patches for o in outcomes)
    # the work proved before a figure: every run sent and told something, or is counted lost
    results.add("matrix", "runs (step x fault)", len(outcomes), "runs")
    results.add("matrix", "PATCHes sent in all", patches, "calls")
    made_again = results.add(
        "matrix", "runs made again (a stand-in did not start)", len(unmade), "runs"
    )
    if unmade:
        made_again.note = f"why: {unmade[:2]}"
    for label, count in (("lost", lost), ("done or told twice", twice), ("stuck", stuck)):
        figure = results.add("matrix", f"runs {label}", count, "runs", at_most=0)
        bad = [
            f"{p} {f}: {o.why[:200]}" for (p, f), o in zip(cells, outcomes, strict=True) if not o.ok
        ]
        if count and bad:
            figure.note = f"for example: {bad[:3]}"
