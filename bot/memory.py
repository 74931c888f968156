"""glibc's allocator, told to keep large blocks out of its heap; Python's cycle collector, told
to run less often.

By default glibc raises its mmap threshold each time a large block is freed (up to 32 MB on
64-bit, mallopt(3) M_MMAP_THRESHOLD), so the large temporaries of every later sweep (the
report's text, lists of 10,000 clusters) are carved from the heap instead, where they leave
holes the process keeps. Measured by ``python -m benchmarks soak``, 8 sweeps of 10,000
clusters: RSS rose to 230 MB with 53 MB of the C heap free but kept; with the threshold fixed
at 128 KiB, 185 MB with 5 MB kept, the Python objects alive being the same. Setting the
threshold also turns the adjustment off. An operator's ``MALLOC_MMAP_THRESHOLD_`` wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

M_MMAP_THRESHOLD = -3  # malloc.h
THRESHOLD = 128 * 1024  # glibc's own starting value, kept fixed


class MallInfo(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (malloc.h): ``uordblks`` in use, ``fordblks`` free but
    kept, ``hblks`` and ``hblkhd`` the blocks mapped on their own and their bytes."""

    _fields_ = [
        (field, ctypes.c_size_t)
        for field in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "mallopt") else None


def mallinfo() -> MallInfo | None:
    """glibc's account of its heap now (glibc 2.33 and later), else None."""
    libc = glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = MallInfo
    info: MallInfo = libc.mallinfo2()
    return info


def keep_large_blocks_apart(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold; False where the C library is not glibc, or the operator
    set it in the environment."""
    libc = glibc()
    if libc is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))


# When the cycle collector runs: after 20,000 more objects made than freed (Python's default
# is 700), the middle generation every 20 of those passes, the whole heap every 100 of
# these (and only once a quarter of it is new, as always). Following a thousand changes
# keeps thousands of objects alive for a poll's 50 to 100 ms (its request, its attempt,
# its rows); with the default, a pass ran several times a second and walked them again each
# time, 3 to 8 ms on the event loop while a Slack request waited behind it. The young pass
# now walks the same few thousand objects far less often. A sweep's child keeps as many
# alive (every cluster's observation, until the sweep ends): with the default, a pass of the
# whole heap could hold a sweep of 1,000 clusters up for 80 ms.
COLLECT_AFTER = (20_000, 20, 100)


def collect_rarely() -> None:
    """The cycle collector's thresholds for a process that keeps many objects alive at once
    (``COLLECT_AFTER``)."""
    gc.set_threshold(*COLLECT_AFTER)
