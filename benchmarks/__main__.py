"""Run every benchmark, print each figure beside its goal, and write ``bench.json``.

``python -m benchmarks`` runs them all; name some to run only those, e.g.
``python -m benchmarks ack scale``."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, Results

# name -> (module in benchmarks/, its entry point); a module is imported only when its
# benchmark runs, so that a benchmark measuring its own process (the soak) does not carry
# the others' imports
BENCHMARKS: dict[str, tuple[str, str]] = {
    "startup": ("startup", "run"),
    "ready": ("ready", "run"),
    "listing": ("listing", "run"),
    "sweep": ("sweep", "run"),
    "cost": ("cost", "run"),
    "nights": ("nights", "run"),
    "big_queue": ("big_queue", "run"),
    "big_queue_acks": ("big_queue", "acks_while_sweeping"),
    "ack": ("ack", "run"),
    "scale": ("scale", "run"),
    "soak": ("soak", "run"),
    "fuzz": ("fuzz", "run"),
    "fuzz_surfaces": ("fuzz", "run_surfaces"),
    "matrix": ("matrix", "run"),
    "heavy": ("heavy", "run"),
    "week": ("week", "run"),
}


def run_one(name: str, results: Results) -> None:
    module, entry = BENCHMARKS[name]
    function: Callable[[Results], Any] = getattr(
        importlib.import_module(f"benchmarks.{module}"), entry
    )
    if inspect.iscoroutinefunction(function):
        asyncio.run(function(results))
    else:
        function(results)


# Run in an interpreter of their own when others run too: the soak measures its own process's
# memory, which the benchmarks before it (a 45 MB reply parsed, 10,000 clusters listed) leave
# grown and holed.
FRESH = {"soak"}


def in_fresh_process(name: str) -> list[Figure]:
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "figures.json"
        env = {**os.environ, "BENCH_RESULTS": str(saved)}
        subprocess.run([sys.executable, "-m", "benchmarks", name], env=env, check=True)
        return [Figure(**f) for f in json.loads(saved.read_text())["figures"]]


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    results = Results()
    chosen = names or list(BENCHMARKS)
    for name in chosen:
        if name in FRESH and len(chosen) > 1:
            results.figures += in_fresh_process(name)
        else:
            run_one(name, results)
    saved = os.environ.get("BENCH_RESULTS")  # a child run: its figures go to its parent
    if saved:
        results.save(Path(saved))
    else:
        results.save()
    missed = [f for f in results.figures if f.met is False]
    print(f"{len(results.figures)} figures, {len(missed)} goals not met")
    return 0


sys.exit(main(sys.argv[1:]))
