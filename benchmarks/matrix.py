"""The fault matrix: at each named step of each path (found in the code,
tests/support/steps.py), each fault (kill -9 at the step, SIGTERM, PostgreSQL gone for 5 s
and for 30 s, Slack answering 429 to everything for a minute), on real processes
(tests/support/faults.py). The paths (tests/support/scenarios.py): a change, a pipeline's
release, a form submission, a node's Resume from a health alert, a night's off and its on,
the weekly digest, an idle alert. Each run counts what reached the world (PATCHes and node
updates, cards, the lines telling the end, mentions, digests, alerts) against what it should
have, and the owed items left undone. A run is lost when it has fewer of any than it should,
duplicated when more, stuck when it did not end as it should or left work owed.

Two runs at a time (each its own stand-ins, replica and database). ``CLUSTERBOT_MATRIX_PATHS``,
``CLUSTERBOT_MATRIX_FAULTS`` and ``CLUSTERBOT_MATRIX_STEPS`` (comma-separated) run a part.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.harness import Results, heading
from tests.support.faults import FAULTS, Outcome
from tests.support.scenarios import PATHS  # each path with its runner and its steps

EFFECTS = ("PATCH", "node updates")  # what reached the control plane or Slurm


def _chosen(variable: str, every: list[str]) -> list[str]:
    named = [n for n in os.environ.get(variable, "").split(",") if n]
    unknown = set(named) - set(every)
    if unknown:
        raise SystemExit(f"{variable}: no {', '.join(sorted(unknown))}; choose from {every}")
    return named or every


def _one(path: str, point: str, fault: str, *, unmade: list[str]) -> Outcome:
    """One run; a run that could not be made (its stand-ins or replica did not start, before
    any fault) is made again once, and the reason kept."""
    for _ in range(2):
        folder = Path(tempfile.mkdtemp(prefix="clusterbot-matrix-"))
        try:
            return PATHS[path][0](point, fault, folder)
        except Exception as error:
            unmade.append(f"{path} {point} {fault}: {str(error)[-600:]}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return Outcome(problems=[f"the run could not be made: {unmade[-1]}"])


def run(results: Results) -> None:
    faults = _chosen("CLUSTERBOT_MATRIX_FAULTS", ["kill", *FAULTS])
    paths = _chosen("CLUSTERBOT_MATRIX_PATHS", list(PATHS))
    every = sorted({step for path in paths for step in PATHS[path][1]})
    steps = set(_chosen("CLUSTERBOT_MATRIX_STEPS", every))
    cells = [
        (path, point, fault)
        for path in paths
        for fault in faults
        for point in PATHS[path][1]
        if point in steps
    ]
    started = time.perf_counter()
    unmade: list[str] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda cell: _one(*cell, unmade=unmade), cells))
    elapsed = time.perf_counter() - started
    heading(f"fault matrix: {len(cells)} runs (path x step x fault) in {elapsed:.0f} s")
    for path in paths:
        points = [p for p in PATHS[path][1] if p in steps]
        print(f"  {path}: {', '.join(points)}")
        for fault in faults:
            row = [
                o for (c, _, f), o in zip(cells, outcomes, strict=True) if (c, f) == (path, fault)
            ]
            shown = " ".join("." if o.ok else "x" for o in row)  # a mark a step, in order
            print(f"  {fault:>13}  {shown}")
    lost = sum(o.lost for o in outcomes)
    twice = sum(o.twice for o in outcomes)
    stuck = sum(o.stuck for o in outcomes)
    effects = sum(o.counts.get(name, 0) for o in outcomes for name in EFFECTS)
    # the work proved before a figure: every run sent and told something, or is counted lost
    results.add("matrix", "runs (path x step x fault)", len(outcomes), "runs")
    results.add("matrix", "PATCHes and node updates sent in all", effects, "calls")
    made_again = results.add(
        "matrix", "runs made again (a stand-in did not start)", len(unmade), "runs"
    )
    if unmade:
        made_again.note = f"why: {unmade[:2]}"
    bad = [
        f"{c} {p} {f}: {o.why[:200]}"
        for (c, p, f), o in zip(cells, outcomes, strict=True)
        if not o.ok
    ]
    for label, count in (("lost", lost), ("done or told twice", twice), ("stuck", stuck)):
        figure = results.add("matrix", f"runs {label}", count, "runs", at_most=0)
        if count and bad:
            figure.note = f"for example: {bad[:3]}"
