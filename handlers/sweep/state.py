"""What the idle policy (``handlers/sweep/rules.py``) reads and writes: its rules from the policy
file, what it remembers of a cluster between sweeps, and what it decides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from handlers.keeping import RecordKind
from handlers.policy import Section
from handlers.sweep.history import Recommendation, Run


class AutoAction(StrEnum):
    OFF = "off"
    SCALE_TO_ZERO = "scale_to_zero"
    DELETE = "delete"


class IdleRules(BaseModel):
    """The ``[idle]`` section of the policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    idle_after_minutes: float = Field(120.0, gt=0)
    cooldown_hours: float = Field(24.0, gt=0)
    often_days: int = Field(2, ge=1, le=7)
    auto_action: AutoAction = AutoAction.OFF
    grace_minutes: float = Field(240.0, gt=0)

    @property
    def idle_after(self) -> float:
        return self.idle_after_minutes * 60

    @property
    def cooldown(self) -> float:
        return self.cooldown_hours * 3600

    @property
    def grace(self) -> float:
        return self.grace_minutes * 60


class Status(StrEnum):
    BUSY = "busy"
    WAITING = "waiting"  # not busy, not yet for idle_after
    IDLE = "idle"
    FREE = "free"  # idle, but its compute pools have no nodes
    EXEMPT = "exempt"
    SNOOZED = "snoozed"
    UNKNOWN = "unknown"


IDLE_RULES: Section[IdleRules] = Section("idle", TypeAdapter(IdleRules), IdleRules)


@dataclass(frozen=True)
class IdleRecord:
    """What the bot remembers of one cluster between sweeps."""

    cluster: str
    idle_since: float | None = None
    last_seen: float | None = None
    alerted_at: float | None = None  # last alert in the current idle period
    alert_message: str | None = None  # the alert message, while it is current
    alert_channel: str | None = None
    alert_thread: str | None = None  # the roll-up whose thread holds the alert (a burst's)
    snoozed_until: float | None = None
    snoozed_by: str | None = None
    kept_by: str | None = None
    kept_at: float | None = None
    auto_action_at: float | None = None
    history: tuple[Run, ...] = ()
    remedy: str | None = None  # the request a click on the alert started, while it is open
    alert: dict[str, object] | None = None  # what the alert showed, to draw it again
    alert_open: bool = False  # the alert shows its remedies (not closed by a click or an end)
    gpu_idle: tuple[tuple[int, float], ...] = ()  # (job, first found an idle allocation)


_RECORD_FIELDS = {f.name for f in fields(IdleRecord)}

# The document keeps the keys it was first written with, which replicas of an earlier release
# read during a rolling upgrade: the record's name for a key, and the key stored.
_STORED_AS = {"alert_message": "alert_ts"}


def _dump(record: IdleRecord) -> Mapping[str, Any]:
    document = {_STORED_AS.get(name, name): getattr(record, name) for name in _RECORD_FIELDS}
    document["history"] = [[r.start, r.end, r.busy] for r in record.history]
    return document


def _load(cluster: str, document: Mapping[str, Any]) -> IdleRecord:
    values = dict(document)
    for name, stored in _STORED_AS.items():
        if stored in values:
            values[name] = values.pop(stored)
    values["history"] = tuple(Run(*run) for run in values.get("history", []))
    values["gpu_idle"] = tuple((int(j), float(t)) for j, t in values.get("gpu_idle") or ())
    values["cluster"] = cluster
    # A record written by another version may carry fields this one does not know (the
    # spend runs and the health episode it kept before they had records of their own).
    return IdleRecord(**{k: v for k, v in values.items() if k in _RECORD_FIELDS})


IDLE_RECORD = RecordKind("idle", IdleRecord, _dump, _load)


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str
    alert: bool = False  # post an alert now
    auto_action_due: bool = False
    idle_since: float | None = None
    ended_alert: str | None = None  # why a current alert no longer applies (busy, free, ...)
    recommendation: Recommendation | None = None  # only for a quiet cluster that pays
    recommendation_reason: str = ""
