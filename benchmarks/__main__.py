"""Run every benchmark, print each figure beside its goal, and write ``bench.json``.

``python -m benchmarks`` runs them all; name some to run only those, e.g.
``python -m benchmarks ack scale``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from benchmarks import ack, big_queue, fuzz, listing, scale, soak, startup, sweep
from benchmarks.harness import Results

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
}


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    results = Results()
    for name in names or list(BENCHMARKS):
        BENCHMARKS[name](results)
    results.save()
    missed = [f for f in results.figures if f.met is False]
    print(f"{len(results.figures)} figures, {len(missed)} goals not met")
    return 0


sys.exit(main(sys.argv[1:]))
