"""The roll-up of a burst of idle alerts (``handlers/owed/burst.py``): the clusters a sweep
found newly idle together, what they cost an hour, and the costliest by name."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.costs import money
from handlers.owed.burst import NAMED, rollup_end
from handlers.replies import Heading, Reply, Table, Text
from handlers.sweep.alert import IdleEntry
from handlers.words import duration

KIND = "idle-rollup"


def rollup_reply(entries: Sequence[IdleEntry], at: float) -> Reply:
    """The roll-up of the clusters a sweep found newly idle at ``at``: how many, what they
    cost an hour, what scaling them to zero would stop, and the costliest by name."""
    paid = sum(e.cost_hour or 0.0 for e in entries)
    freed = sum(e.freed_hour or 0.0 for e in entries)
    heading = f"Idle: {len(entries):,} clusters found idle together"
    reply = Reply(f"{heading}, {money(paid)}", public=True).add(
        Heading(heading),
        Text(
            f"They cost {money(paid)} while they do nothing; "
            f"scaling them to zero stops {money(freed)}."
        ),
    )
    ranked = sorted(entries, key=lambda e: (-(e.cost_hour or 0.0), e.cluster))
    rows = [
        (
            entry.cluster.rsplit("/", 1)[-1],
            money(entry.cost_hour),
            duration(at - entry.idle_since) if entry.idle_since is not None else "",
            entry.reason,
        )
        for entry in ranked[:NAMED]
    ]
    reply.add(Table.of(("cluster", "cost", "idle for", "why"), rows, frozenset({1, 2})))
    rest = [entry.cost_hour for entry in ranked[NAMED:]]
    return rollup_end(reply, rest, at, "remedies")
