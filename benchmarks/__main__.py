"""Run every benchmark, print each figure beside its goal, and write ``bench.json``.

``python -m benchmarks`` runs them all; name some to run only those, e.g.
``python -m benchmarks ack scale``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks import ack, big_queue, fuzz, listing, scale, soak, startup, sweep
from benchmarks.harness import Figure, Results

BENCHMARKS: dict[str, Callable[[Results], None]] = {
    "startup": startup.run,
    "listing": lambda r: asyncio.run(listing.run(r)),
    "sweep": lambda r: asyncio.run(sweep.run(r)),
    "big_queue": lambda r: asyncio.run(big_queue.run(r)),
    "big_queue_acks": lambda r: asyncio.run(big_queue.acks_while_sweeping(r)),
    "ack": lambda r: asyncio.run(ack.run(r)),
    "scale": lambda r: asyncio.run(scale.run(r)),
    "soak": lambda r: asyncio.run(soak.run(r)),
    "fuzz": fuzz.run,
    "fuzz_surfaces": fuzz.run_surfaces,
}


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
            BENCHMARKS[name](results)
    saved = os.environ.get("BENCH_RESULTS")  # a child run: its figures go to its parent
    if saved:
        results.save(Path(saved))
    else:
        results.save()
    missed = [f for f in results.figures if f.met is False]
    print(f"{len(results.figures)} figures, {len(missed)} goals not met")
    return 0


sys.exit(main(sys.argv[1:]))
