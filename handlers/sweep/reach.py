"""Whether the idle sweep can read its targets at all.

A sweep that lists no target looks like a sweep of an empty fleet: no clusters, no alerts.
So each sweep records which targets it could not list and why, and since when no target at
all could be; `/readyz` and `clusterbot check-config` say so once that has lasted a whole
sweep interval, and the metrics count it from the first sweep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from handlers.words import duration

REACH = "reach"  # the name it is kept under, beside the latest report


@dataclass(frozen=True)
class Reach:
    at: float  # when the sweep finished
    targets: int
    unreadable: dict[str, str] = field(default_factory=dict)  # target -> why, in words
    blind_since: float | None = None  # the first of the sweeps in a row that read no target

    @property
    def blind(self) -> bool:
        return self.targets > 0 and len(self.unreadable) >= self.targets

    def then(self, at: float, targets: int, unreadable: dict[str, str]) -> Reach:
        """The reach after the next sweep."""
        following = Reach(at, targets, dict(unreadable))
        if not following.blind:
            return following
        since = self.blind_since if self.blind and self.blind_since is not None else at
        return Reach(at, targets, dict(unreadable), since)

    def problem(self, now: float, interval: float) -> str | None:
        """What is wrong, once no target has been readable for a whole sweep interval."""
        if not self.blind or self.blind_since is None or now - self.blind_since < interval:
            return None
        shown = sorted(self.unreadable.items())
        reasons = "; ".join(f"{target}: {why}" for target, why in shown[:3])
        more = f"; and {len(shown) - 3} more" if len(shown) > 3 else ""
        count = "the target" if self.targets == 1 else f"any of the {self.targets} targets"
        return (
            f"the idle sweep has not read {count} for {duration(now - self.blind_since)} "
            f"({reasons}{more})"
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "at": self.at,
                "targets": self.targets,
                "unreadable": self.unreadable,
                "blind_since": self.blind_since,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Reach:
        data: dict[str, Any] = json.loads(text)
        since = data.get("blind_since")
        return cls(
            at=float(data["at"]),
            targets=int(data["targets"]),
            unreadable={str(k): str(v) for k, v in dict(data.get("unreadable", {})).items()},
            blind_since=float(since) if since is not None else None,
        )
