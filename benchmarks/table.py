"""The README's benchmark table from ``bench.json``: ``python -m benchmarks.table``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.harness import ROOT


def shown(value: float) -> str:
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def table(document: dict[str, object]) -> str:
    machine = document["machine"]
    assert isinstance(machine, dict)
    lines = [
        f"Run on {str(document['date'])[:10]}: {machine['cpus']} cores, Python "
        f"{machine['python']}, {machine['platform']}.",
        "",
        "| benchmark | figure | value | goal | |",
        "|---|---|---:|---|---|",
    ]
    figures = document["figures"]
    assert isinstance(figures, list)
    for f in figures:
        verdict = {True: "met", False: "**not met**", None: ""}[f["met"]]
        value = f"{shown(f['value'])} {f['unit']}".strip()
        lines.append(f"| {f['benchmark']} | {f['name']} | {value} | {f['goal']} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench.json"
    print(table(json.loads(path.read_text())))
