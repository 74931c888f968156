"""glibc's mmap threshold stays fixed (``bot/memory.py``): after a large block is freed, the
next large one is still mapped on its own, not carved from the heap where it leaves a hole.
Each case runs in a fresh interpreter, as a clusterbot process starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bot.memory import mallinfo

PROBE = """
import json, sys
from bot.memory import keep_large_blocks_apart, mallinfo
fixed = keep_large_blocks_apart() if sys.argv[1] == "fixed" else False
big = bytearray(8_000_000)   # mapped on its own at any threshold
del big                      # by default this raises the threshold to 8 MB
before = mallinfo().hblks
block = bytearray(1_000_000)
print(json.dumps({"fixed": fixed, "mapped": mallinfo().hblks - before}))
"""

pytestmark = pytest.mark.skipif(mallinfo() is None, reason="the C library is not glibc 2.33+")


def _probe(mode: str, **env: str) -> dict[str, object]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environment, **env},
        check=True,
    )
    return dict(json.loads(result.stdout))


def test_a_large_block_is_mapped_apart_once_the_threshold_is_fixed() -> None:
    assert _probe("default") == {"fixed": False, "mapped": 0}  # glibc's adjustment: in the heap
    assert _probe("fixed") == {"fixed": True, "mapped": 1}


def test_an_operators_setting_wins() -> None:
    assert _probe("fixed", MALLOC_MMAP_THRESHOLD_="4194304")["fixed"] is False


def test_every_command_fixes_it_before_it_runs() -> None:
    """A command run first (``check-config``, with no settings, refuses), then the probe."""
    command = (
        "import bot.cli\ntry:\n    bot.cli.main(['check-config'])\nexcept SystemExit:\n    pass\n"
    )
    probe = PROBE.replace("fixed = keep_large_blocks_apart() if", "fixed = True if")
    result = subprocess.run(
        [sys.executable, "-c", command + probe, "default"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "CLUSTERBOT_"))},
        check=True,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1])["mapped"] == 1
