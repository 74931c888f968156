"""A soak: 24 idle sweeps of 10,000 clusters over 10 targets, one after another, by the same
service ``clusterbot serve`` runs (the simulator in a process of its own), and the memory of
the process after each. RSS must level off under 200 MB.

RSS alone cannot tell objects kept from memory an allocator holds on to, so after every sweep
(and a collection) it reads as well: the memory blocks Python holds live
(``sys.getallocatedblocks``), Python's arenas against the bytes in use within them
(``sys._debugmallocstats``), and glibc's heap in use against free but kept (``mallinfo2``).
At the end glibc is asked to give back what it holds free (``malloc_trim``).

What it found: the live Python blocks did not grow (1,400 more after 24 sweeps than after
one), but RSS rose from 153 to 231 MB over six sweeps, 53 MB of it glibc's heap free but kept.
glibc raises its mmap threshold each time a large block is freed, so each sweep's large
temporaries came from the heap and left holes. ``bot/memory.py`` fixes the threshold, as every
clusterbot command does on start, and this soak does too.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from benchmarks.harness import Results, heading, rss_mb
from benchmarks.listing import fleet
from benchmarks.process import simulator_process
from benchmarks.sweep import sweeping_service
from bot.memory import glibc, keep_large_blocks_apart, mallinfo

SWEEPS = int(os.environ.get("BENCH_SOAK_SWEEPS", "24"))  # 24 by default; fewer to try things
CLUSTERS = 10_000
TARGETS = 10
LATENCY_MS = 5


def c_heap() -> tuple[float, float]:
    """glibc's heap in MB: (in use, mapped chunks included; free but kept); zeros elsewhere."""
    info = mallinfo()
    if info is None:
        return 0.0, 0.0
    return (info.uordblks + info.hblkhd) / 1e6, info.fordblks / 1e6


def python_arenas() -> tuple[float, float]:
    """Python's own allocator in MB: (its arenas, the blocks in use within them), from
    ``sys._debugmallocstats``. Arenas much larger than their blocks are fragmentation."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    arenas = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text)
    blocks = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    count = int(arenas.group(1).replace(",", "")) if arenas else 0
    used = int(blocks.group(1).replace(",", "")) if blocks else 0
    return count * 1_048_576 / 1e6, used / 1e6


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: free memory at the top of the heap and in the arenas given
    back to the system. False where the C library has none."""
    libc = glibc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    libc.malloc_trim(0)
    return True


@dataclass
class Sample:
    rss: float  # MB
    blocks: int  # Python memory blocks live
    arenas: float  # MB of Python's arenas
    in_arenas: float  # MB of blocks in use within them
    c_used: float  # MB of glibc's heap in use
    c_free: float  # MB of glibc's heap free but kept


def sample(pid: int) -> Sample:
    gc.collect()
    arenas, in_arenas = python_arenas()
    c_used, c_free = c_heap()
    return Sample(rss_mb(pid), sys.getallocatedblocks(), arenas, in_arenas, c_used, c_free)


async def run(results: Results) -> None:
    heading(f"a soak: {SWEEPS} sweeps of {CLUSTERS:,} clusters, the memory after each")
    kept_apart = keep_large_blocks_apart()  # as every clusterbot command does on start
    targets, fixtures = fleet(TARGETS, CLUSTERS)
    simulator = simulator_process(fixtures)
    del fixtures  # the simulator's, not the bot's: written to its file and let go
    folder = Path(tempfile.mkdtemp(prefix="clusterbot-soak-"))
    pid = os.getpid()
    seen: list[Sample] = []
    with simulator as (url, _simulator_pid):
        async with aiohttp.ClientSession() as session:
            service = await sweeping_service(
                session, url, targets, folder / "soak.db", latency_ms=LATENCY_MS
            )
        start = sample(pid)
        try:
            for _ in range(SWEEPS):
                report = await service.core.sweeper.sweep(alerts=False, force=True)
                assert report is not None and len(report.entries) == CLUSTERS, "a sweep missed"
                del report
                seen.append(sample(pid))
            pool = service.store.engine.pool
            held = pool.checkedin() + pool.checkedout()  # type: ignore[attr-defined]
        finally:
            await service.close_connections()
    before_trim = rss_mb(pid)
    trimmed = malloc_trim()
    after_trim = rss_mb(pid)
    rss = [s.rss for s in seen]
    half = SWEEPS // 2
    add = functools.partial(results.add, "soak")
    add(
        "sweeps of 10,000 clusters", len(seen), "sweeps", note=f"mmap threshold fixed: {kept_apart}"
    )
    add("RSS before the first sweep", start.rss, "MB")
    add("RSS after the first sweep", rss[0], "MB")
    add("RSS after the eighth sweep", rss[7], "MB")
    add(f"RSS after sweep {SWEEPS}", rss[-1], "MB")
    add("RSS, largest after a sweep", max(rss), "MB", at_most=200.0)
    add(
        f"RSS grown over the last {SWEEPS - half} sweeps",
        max(rss[half:]) - rss[half - 1],
        "MB",
        at_most=5.0,
    )
    add(
        f"live Python blocks grown, sweep 1 to {SWEEPS}", seen[-1].blocks - seen[0].blocks, "blocks"
    )
    for name, at in (
        ("before the first sweep", start),
        ("after the first", seen[0]),
        (f"after sweep {SWEEPS}", seen[-1]),
    ):
        add(
            f"Python arenas / blocks in use in them, {name}",
            at.arenas,
            "MB",
            note=f"{at.in_arenas:.1f} MB in use",
        )
        add(
            f"C heap in use / free but kept, {name}",
            at.c_used,
            "MB",
            note=f"{at.c_free:.1f} MB free",
        )
    add("database connections the pool holds", held, "conns", note="each a thread and a page cache")
    if trimmed:
        add("RSS given back by malloc_trim at the end", before_trim - after_trim, "MB")
    if os.environ.get("BENCH_SHOW_SAMPLES"):
        for field_name in ("rss", "arenas", "in_arenas", "c_used", "c_free"):
            print(f"  {field_name}:", " ".join(f"{getattr(x, field_name):.0f}" for x in seen))
