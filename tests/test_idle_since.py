"""The last sweep's report as things stand now: clicks since the sweep show at once."""

from __future__ import annotations

from handlers.sweep.alert import IdleEntry
from handlers.sweep.since import AGAIN, as_now
from handlers.sweep.state import IdleRecord, Status

NAME = "projects/p/locations/r/modelDevelopmentClusters/cpu01"


def entry(status: Status, reason: str = "no jobs for 3 h", **fields: object) -> IdleEntry:
    return IdleEntry(NAME, "p/r", status, reason, "cpu: 4 x n2", 1.5, **fields)  # type: ignore[arg-type]


def test_a_keep_since_the_sweep_shows_at_once() -> None:
    [now] = as_now(
        [entry(Status.IDLE)], {NAME: IdleRecord(NAME, kept_by="U0ALICE", kept_at=5.0)}, 9.0
    )
    assert (now.status, now.reason, now.kept_by, now.kept_at) == (
        Status.EXEMPT,
        "kept",
        "U0ALICE",
        5.0,
    )


def test_stopping_a_keep_watches_it_again_until_the_next_sweep() -> None:
    kept = entry(Status.EXEMPT, "kept", kept_by="U0ALICE", kept_at=1.0)
    [now] = as_now([kept], {NAME: IdleRecord(NAME)}, 9.0)
    assert (now.status, now.reason, now.kept_by) == (Status.WAITING, AGAIN, None)
    labelled = entry(Status.EXEMPT, "label clusterbot-idle: exempt", kept_by="U0ALICE")
    [still] = as_now([labelled], {NAME: IdleRecord(NAME)}, 9.0)
    assert still.status == Status.EXEMPT and still.kept_by is None  # the label still exempts it


def test_a_snooze_since_the_sweep_and_its_end() -> None:
    record = IdleRecord(NAME, snoozed_until=100.0, snoozed_by="U0BOB")
    [now] = as_now([entry(Status.IDLE)], {NAME: record}, 50.0)
    assert (now.status, now.snoozed_by, now.snoozed_until) == (Status.SNOOZED, "U0BOB", 100.0)
    [ended] = as_now([entry(Status.SNOOZED, snoozed_until=100.0)], {NAME: record}, 150.0)
    assert ended.status == Status.WAITING and ended.reason == AGAIN


def test_what_the_clusters_do_is_the_sweep_s() -> None:
    busy = entry(Status.BUSY, "2 jobs running")
    assert as_now([busy], {NAME: IdleRecord(NAME, snoozed_until=100.0)}, 50.0) == [busy]
    assert as_now([busy], {}, 50.0) == [busy]
