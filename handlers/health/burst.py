"""The roll-up of a burst of health alerts (``handlers/owed/burst.py``): the clusters a sweep
found broken together (a zone's outage, a bad image rolled out), what their broken nodes cost
an hour, and the costliest by name."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.costs import money
from handlers.health.alert import summary
from handlers.health.episodes import Episode
from handlers.owed.burst import NAMED, rollup_end
from handlers.replies import Heading, Reply, Table, Text
from handlers.sweep.health import ClusterHealth

KIND = "health-rollup"


def rollup_reply(episodes: Sequence[Episode], at: float) -> Reply:
    """The roll-up of the episodes a sweep at ``at`` opened together in one channel."""
    healths = {e.cluster: ClusterHealth.from_dict(e.health or {}) for e in episodes}
    broken = sum(h.broken_hour or 0.0 for h in healths.values())
    heading = f"Health: {len(episodes):,} clusters found broken together"
    reply = Reply(f"{heading}, {money(broken)}", public=True).add(
        Heading(heading),
        Text(f"Their broken nodes cost {money(broken)} and run nothing."),
    )
    ranked = sorted(episodes, key=lambda e: (-(healths[e.cluster].broken_hour or 0.0), e.cluster))
    rows = [
        (
            e.cluster.rsplit("/", 1)[-1],
            money(healths[e.cluster].broken_hour),
            summary(healths[e.cluster]),
        )
        for e in ranked[:NAMED]
    ]
    reply.add(Table.of(("cluster", "broken nodes cost", "what"), rows, frozenset({1})))
    rest = [healths[e.cluster].broken_hour for e in ranked[NAMED:]]
    return rollup_end(reply, rest, at, "Resume and Drain")
