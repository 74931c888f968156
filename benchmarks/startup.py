"""How long ``clusterbot --help`` takes against a bare interpreter: rounds interleaved,
the median of each (goal: at most 3x)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks.harness import Results, heading

ROUNDS = 15


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    return elapsed


def run(results: Results) -> None:
    heading(f"startup: clusterbot --help against a bare interpreter, {ROUNDS} rounds interleaved")
    bare_command = [sys.executable, "-c", "pass"]
    help_command = [sys.executable, "-m", "bot", "--help"]
    out = subprocess.run(help_command, capture_output=True, text=True, check=True).stdout
    assert "check-config" in out and "migrate" in out  # the help was really printed
    bare, help_ = [], []
    for _ in range(ROUNDS):
        bare.append(timed(bare_command))
        help_.append(timed(help_command))
    b, h = statistics.median(bare), statistics.median(help_)
    results.add("startup", "bare interpreter (median)", b * 1000, "ms")
    results.add("startup", "clusterbot --help (median)", h * 1000, "ms")
    results.add("startup", "clusterbot --help / bare interpreter", h / b, "x", at_most=3.0)
