"""A cluster's health over time, as episodes: pure functions of the last episode, what a
sweep saw and the time, so that a health alert is posted once per episode, edited as the
episode changes and when it heals, and posted again only after a quiet period.

- An episode opens at the first sweep that sees a problem (a broken node, the cluster out of
  RUNNING, jobs held up by unavailable nodes).
- While it lasts, each sweep that sees another set of problems changes it (worse when a
  problem is new, better when one went), and its alert is edited.
- The first sweep that sees none heals it: its alert is edited to say so.
- A problem that comes back within ``QUIET`` of the healing opens the same episode again
  (the same alert, edited); later, it is a new episode with an alert of its own.
- What it cost while broken is the broken nodes' VMs at their price: what a sweep saw holds
  until the next, as in the spend ledger, and a gap longer than ``MAX_GAP`` sweep intervals
  is counted as that many (the bot was down: nobody saw how long it lasted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from handlers.keeping import RecordKind
from handlers.sweep.health import ClusterHealth

QUIET = 3600.0  # seconds healed before a problem that returns is a new episode
MAX_GAP = 3  # sweep intervals between two sweeps that are counted as broken time


class Change(StrEnum):
    NONE = "none"
    OPENED = "opened"  # a new episode: post its alert
    WORSE = "worse"  # a new problem: edit the alert
    BETTER = "better"  # a problem went, others remain: edit the alert
    HEALED = "healed"  # none remain: edit the alert to say so
    REOPENED = "reopened"  # back within the quiet period: edit the same alert


@dataclass(frozen=True)
class Episode:
    cluster: str
    opened_at: float
    seen_at: float  # the last sweep that saw a problem
    problems: tuple[str, ...] = ()  # what is wrong now, each by its key
    first_seen: dict[str, float] = field(default_factory=dict)  # when each was first seen
    cost: float = 0.0  # dollars the broken nodes cost while broken, at list prices
    broken_hour: float | None = 0.0  # what was broken at the last sweep costs an hour
    healed_at: float | None = None
    alert_message: str | None = None  # its alert, once posted
    alert_channel: str | None = None
    owed: bool = False  # its alert is to be posted or drawn again (saved before it is)
    # its alert's post was sent (when), and may have arrived unrecorded; True: sent, time unkept
    posting: bool | float = False
    snoozed_until: float | None = None  # no new alert before then (the alert is still edited)
    health: dict[str, Any] | None = None  # the last sweep's health, to draw the alert again

    @property
    def open(self) -> bool:
        return self.healed_at is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["problems"] = tuple(values.get("problems", ()))
        return cls(**values)


@dataclass(frozen=True)
class HealthRecord:
    """Health's record of a cluster: its last episode, open or healed (None: never seen
    broken, or not since its record began)."""

    cluster: str
    episode: Episode | None = None


def _dump(record: HealthRecord) -> Mapping[str, Any]:
    return {"episode": record.episode.to_dict() if record.episode else None}


def _load(cluster: str, document: Mapping[str, Any]) -> HealthRecord:
    episode = document.get("episode")
    return HealthRecord(cluster, Episode.from_dict(episode) if isinstance(episode, dict) else None)


HEALTH_RECORD = RecordKind("health", HealthRecord, _dump, _load)


def problems_of(health: ClusterHealth) -> tuple[str, ...]:
    """What is wrong, each by a key that stays the same from one sweep to the next."""
    keys = [node.key for node in health.nodes]
    if health.trouble is not None:
        keys.append(f"state:{health.trouble.state}")
    keys += [f"job:{job.job_id}" for job in health.blocked]
    return tuple(sorted(keys))


def advance(
    episode: Episode | None,
    cluster: str,
    health: ClusterHealth,
    now: float,
    interval: float,
) -> tuple[Episode | None, Change]:
    """The episode after a sweep that saw ``health`` at ``now``, and what changed."""
    problems = problems_of(health)
    if episode is None or (
        not episode.open and problems and now - (episode.healed_at or 0) >= QUIET
    ):
        if not problems:
            return episode, Change.NONE
        first = {key: now for key in problems}
        fresh = Episode(cluster, now, now, problems, first, broken_hour=health.broken_hour)
        return fresh, Change.OPENED
    if not problems:
        if not episode.open:
            return episode, Change.NONE
        healed = replace(_costed(episode, now, interval), healed_at=now, problems=())
        return replace(healed, broken_hour=0.0), Change.HEALED
    first = {key: episode.first_seen.get(key, now) for key in problems}
    if not episode.open:  # back within the quiet period: the same episode, again
        again = replace(episode, seen_at=now, problems=problems, first_seen=first, healed_at=None)
        return replace(again, broken_hour=health.broken_hour), Change.REOPENED
    costed = _costed(episode, now, interval)
    moved = replace(
        costed, seen_at=now, problems=problems, first_seen=first, broken_hour=health.broken_hour
    )
    if problems == episode.problems:
        return moved, Change.NONE
    new = set(problems) - set(episode.problems)
    return moved, Change.WORSE if new else Change.BETTER


def _costed(episode: Episode, now: float, interval: float) -> Episode:
    """The episode with the time since its last sweep counted at what was broken then."""
    if episode.broken_hour is None:
        return episode
    since = min(max(0.0, now - episode.seen_at), MAX_GAP * interval)
    return replace(episode, cost=episode.cost + episode.broken_hour * since / 3600)
