"""The last sweep's report as things stand now: a click since the sweep (Keep, Stop keeping,
Snooze, Un-snooze) shows in `/cluster idle` at once, not at the next sweep, which may be a
quarter of an hour away. Only what a click changes is taken from the records; what the
cluster does is the sweep's, and a cluster watched again is *waiting* until the next sweep
looks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from handlers.sweep.alert import IdleEntry
from handlers.sweep.state import IdleRecord, Status

LABELLED = "label clusterbot-idle: exempt"
AGAIN = "watched again since the sweep; the next sweep decides"


def as_now(
    entries: Sequence[IdleEntry], records: Mapping[str, IdleRecord], now: float
) -> list[IdleEntry]:
    return [_now(e, records.get(e.cluster), now) for e in entries]


def _now(entry: IdleEntry, record: IdleRecord | None, now: float) -> IdleEntry:
    if record is None:
        return entry
    if record.kept_by:
        if entry.status == Status.EXEMPT and entry.kept_by == record.kept_by:
            return entry
        return replace(
            entry,
            status=Status.EXEMPT,
            reason="kept",
            kept_by=record.kept_by,
            kept_at=record.kept_at,
        )
    if entry.kept_by:  # kept at the sweep, no longer
        status = Status.EXEMPT if entry.reason == LABELLED else Status.WAITING
        reason = entry.reason if entry.reason == LABELLED else AGAIN
        return replace(entry, status=status, reason=reason, kept_by=None, kept_at=None)
    snoozed = record.snoozed_until is not None and now < record.snoozed_until
    if snoozed and entry.status in (Status.IDLE, Status.WAITING):
        return replace(
            entry,
            status=Status.SNOOZED,
            snoozed_by=record.snoozed_by,
            snoozed_until=record.snoozed_until,
        )
    if not snoozed and entry.status == Status.SNOOZED:
        return replace(entry, status=Status.WAITING, reason=AGAIN, snoozed_until=None)
    return entry
