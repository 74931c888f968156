"""glibc's allocator, told to keep large blocks out of its heap.

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
