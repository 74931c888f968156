"""Ports handed out to one test process are never handed to another run's beside it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ports


def test_a_port_another_test_process_holds_is_not_handed_out() -> None:
    held = ports.free_port()
    # another process (a second test run beside this one) asks for that port: refused
    code = f"from tests.support import ports; print(ports._hold({held}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "False"
    # and a port nobody holds (below every run's range) is its to take
    free = ports.FIRST - 1 - os.getpid() % 1000
    code = f"from tests.support import ports; print(ports._hold({free}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "True"
