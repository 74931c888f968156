"""A sweep's report, as the read side shows it and the store keeps it: when it ran, what it
found of each cluster, what it could not read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from handlers.pacing import paced
from handlers.sweep.alert import IdleEntry


@dataclass
class SweepReport:
    started: float
    finished: float
    entries: list[IdleEntry]
    failures: list[str]
    alerts: int = 0
    targets: int = 0
    unreadable_targets: dict[str, str] = field(default_factory=dict)  # target -> why
    # what the listeners noted of its clusters, counted: {name: {mark: clusters}}
    tallies: dict[str, dict[str, int]] = field(default_factory=dict)

    def head(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "finished": self.finished,
            "alerts": self.alerts,
            "failures": list(self.failures),
            "targets": self.targets,
            "unreadable_targets": dict(self.unreadable_targets),
            "tallies": {name: dict(marks) for name, marks in self.tallies.items()},
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.head(), "entries": [e.to_dict() for e in self.entries]}

    async def to_json(self) -> str:
        """The report as JSON text, its entries written a few hundred at a time with the
        event loop given back in between (a sweep of 10,000 makes megabytes)."""
        head = json.dumps(self.head(), separators=(",", ":"))
        parts = []
        async for start in paced(range(0, len(self.entries), CHUNK)):
            chunk = [e.to_dict() for e in self.entries[start : start + CHUNK]]
            parts.append(json.dumps(chunk, separators=(",", ":"))[1:-1])
        return head[:-1] + ',"entries":[' + ",".join(p for p in parts if p) + "]}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepReport:
        return cls(
            started=float(data["started"]),
            finished=float(data["finished"]),
            entries=[IdleEntry.from_dict(e) for e in data.get("entries", [])],
            failures=[str(f) for f in data.get("failures", [])],
            alerts=int(data.get("alerts", 0)),
            targets=int(data.get("targets", 0)),
            unreadable_targets={
                str(k): str(v) for k, v in dict(data.get("unreadable_targets", {})).items()
            },
            tallies={
                str(name): {str(k): int(v) for k, v in dict(marks).items()}
                for name, marks in dict(data.get("tallies", {})).items()
            },
        )


CHUNK = 25  # report entries written at once (well under the pacing's turn)
