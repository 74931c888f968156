"""The idle policy, rule by rule, with an injected clock and no sleeping; then a replayed week."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from handlers.sweep.history import DAY, recommend
from handlers.sweep.rules import IdleRecord, IdleRules, Observation, Status, assess

RULES = IdleRules()  # idle after 2 h, cooldown 24 h
H = 3600.0
T0 = datetime(2026, 11, 23, 0, 0, tzinfo=UTC).timestamp()  # a Monday


def quiet(at: float, **extra: object) -> Observation:
    return Observation(at=at, state="RUNNING", paying_nodes=4, **extra)  # type: ignore[arg-type]


def run(
    observations: list[Observation], record: IdleRecord | None = None, rules: IdleRules = RULES
):  # type: ignore[no-untyped-def]
    record = record or IdleRecord(cluster="c")
    verdicts = []
    for seen in observations:
        record, verdict = assess(record, seen, rules)
        verdicts.append(verdict)
    return record, verdicts


@pytest.mark.parametrize(
    ("seen", "status", "words"),
    [
        (
            Observation(at=T0, state="RUNNING", running_jobs=1, paying_nodes=4),
            Status.BUSY,
            "1 running",
        ),
        (
            Observation(at=T0, state="RUNNING", pending_jobs=3, paying_nodes=4),
            Status.BUSY,
            "3 pending",
        ),
        (Observation(at=T0, state="UPDATING", paying_nodes=4), Status.BUSY, "state is UPDATING"),
        (Observation(at=T0, state="PROVISIONING", paying_nodes=4), Status.BUSY, "PROVISIONING"),
        (Observation(at=T0, state="STOPPING", paying_nodes=4), Status.BUSY, "STOPPING"),
        (Observation(at=T0, state="ERROR", paying_nodes=4), Status.BUSY, "state is ERROR"),
        (
            Observation(at=T0, state="RUNNING", tracked_operation=True, paying_nodes=4),
            Status.BUSY,
            "a change from clusterbot",
        ),
        (
            Observation(at=T0, state="RUNNING", running_jobs=None, unknown_reason="slurmrestd 503"),
            Status.UNKNOWN,
            "slurmrestd 503",
        ),
        (quiet(T0), Status.WAITING, "no jobs for 0 s"),
        (  # a held job is no demand, and the quiet is said so as not to contradict the notes
            quiet(T0, queue_notes=(("1 job of dana held by its user",),)),
            Status.WAITING,
            "no jobs that can run for 0 s",
        ),
        (
            Observation(at=T0, state="RUNNING", busy_nodes=2, paying_nodes=4),
            Status.BUSY,
            "2 Slurm nodes allocated but no job visible",
        ),
        (
            Observation(at=T0, state="RUNNING", busy_nodes=1, paying_nodes=4),
            Status.BUSY,
            "1 Slurm node allocated",
        ),
    ],
)
def test_single_observation(seen: Observation, status: Status, words: str) -> None:
    _, verdict = assess(IdleRecord(cluster="c"), seen, RULES)
    assert verdict.status == status
    assert words in verdict.reason
    assert not verdict.alert


def test_busy_to_idle_alerts_once_then_after_cooldown() -> None:
    times = [T0 + i * 0.25 * H for i in range(0, 4 * 30)]  # every 15 min for 30 h
    observations = [Observation(at=T0, state="RUNNING", running_jobs=2, paying_nodes=4)]
    observations += [quiet(t) for t in times[1:]]
    record, verdicts = run(observations)
    alerts = [o.at for o, v in zip(observations, verdicts, strict=True) if v.alert]
    # the clock starts at the first quiet observation (T0 + 15 min), never before
    assert alerts == [T0 + 0.25 * H + 2 * H, T0 + 0.25 * H + 2 * H + 24 * H]
    assert record.idle_since == T0 + 0.25 * H
    assert verdicts[-1].status == Status.IDLE


def test_waiting_until_idle_after() -> None:
    _, verdicts = run([quiet(T0), quiet(T0 + 1.99 * H), quiet(T0 + 2 * H)])
    assert [v.status for v in verdicts] == [Status.WAITING, Status.WAITING, Status.IDLE]
    assert [v.alert for v in verdicts] == [False, False, True]


def test_activity_resets_the_clock() -> None:
    observations = [
        quiet(T0),
        quiet(T0 + 1.5 * H),
        Observation(at=T0 + 1.75 * H, state="RUNNING", pending_jobs=1, paying_nodes=4),
        quiet(T0 + 2 * H),
        quiet(T0 + 3.9 * H),
        quiet(T0 + 4 * H),
    ]
    record, verdicts = run(observations)
    assert [v.alert for v in verdicts] == [False] * 5 + [True]
    assert record.idle_since == T0 + 2 * H


def test_a_new_idle_period_gets_its_own_alert() -> None:
    observations = [quiet(T0), quiet(T0 + 2 * H)]
    observations += [Observation(at=T0 + 3 * H, state="RUNNING", running_jobs=1, paying_nodes=4)]
    observations += [quiet(T0 + 4 * H), quiet(T0 + 6 * H)]
    _, verdicts = run(observations)
    assert [v.alert for v in verdicts] == [False, True, False, False, True]
    assert verdicts[2].ended_alert is None  # no alert message was recorded as posted


def test_busy_again_ends_a_posted_alert() -> None:
    record, _ = run([quiet(T0), quiet(T0 + 2 * H)])
    record = replace(record, alert_message="111.222")
    _, verdict = assess(
        record, Observation(at=T0 + 3 * H, state="RUNNING", running_jobs=1, paying_nodes=4), RULES
    )
    assert verdict.ended_alert == "busy again: 1 running and 0 pending Slurm jobs"


def test_a_cluster_being_changed_keeps_its_alert_for_what_the_change_leaves() -> None:
    """A sweep that lists the cluster UPDATING before the bot has recorded its own change's
    operation, or STOPPING after a delete's operation ended but before the cluster is gone,
    must not close the alert: the remedy's end, or the next sweep, says how."""
    record, _ = run([quiet(T0), quiet(T0 + 2 * H)])
    record = replace(record, alert_message="111.222")
    for state in ("UPDATING", "PROVISIONING", "STOPPING"):
        seen = Observation(at=T0 + 3 * H, state=state, paying_nodes=4)
        _, verdict = assess(record, seen, RULES)
        assert verdict.status == Status.BUSY and verdict.ended_alert is None
    stopped = Observation(at=T0 + 3 * H, state="ERROR", paying_nodes=4)
    assert assess(record, stopped, RULES)[1].ended_alert == "busy again: state is ERROR"


def test_unknown_never_alerts_and_restarts_the_clock() -> None:
    unknown = Observation(
        at=T0 + 1.5 * H, state="RUNNING", running_jobs=None, unknown_reason="proxy failed"
    )
    record, verdicts = run(
        [quiet(T0), unknown, quiet(T0 + 2 * H), quiet(T0 + 3.5 * H), quiet(T0 + 4 * H)]
    )
    assert [v.status for v in verdicts] == [
        Status.WAITING,
        Status.UNKNOWN,
        Status.WAITING,
        Status.WAITING,
        Status.IDLE,
    ]
    assert record.idle_since == T0 + 2 * H


def test_free_clusters_are_not_alerted() -> None:
    """A cluster with no compute nodes is free at once, not "waiting" to become idle."""
    _, verdicts = run(
        [Observation(at=T0, state="RUNNING"), Observation(at=T0 + 3 * H, state="RUNNING")]
    )
    assert [v.status for v in verdicts] == [Status.FREE, Status.FREE]
    assert not any(v.alert for v in verdicts)
    assert all(v.recommendation is None for v in verdicts)


def test_no_recommendation_for_a_busy_cluster() -> None:
    _, verdicts = run([quiet(T0, running_jobs=2), quiet(T0 + 3 * H, running_jobs=1)])
    assert [v.status for v in verdicts] == [Status.BUSY, Status.BUSY]
    assert all(v.recommendation is None and not v.recommendation_reason for v in verdicts)


def test_allocated_nodes_with_no_visible_job_is_busy_and_hidden() -> None:
    seen = quiet(T0, busy_nodes=2)
    assert seen.jobs_hidden
    _, verdict = assess(IdleRecord(cluster="c"), seen, RULES)
    assert verdict.status == Status.BUSY and "PrivateData" in verdict.reason
    assert not quiet(T0, busy_nodes=2, running_jobs=1).jobs_hidden


def test_snooze_silences_until_then_alerts_again() -> None:
    record, verdicts = run([quiet(T0), quiet(T0 + 2 * H)])
    assert verdicts[-1].alert
    record = replace(record, snoozed_until=T0 + 10 * H, snoozed_by="U0BOB")
    record, verdicts = run([quiet(T0 + 5 * H), quiet(T0 + 9.9 * H), quiet(T0 + 10 * H)], record)
    assert [v.status for v in verdicts] == [Status.SNOOZED, Status.SNOOZED, Status.IDLE]
    assert [v.alert for v in verdicts] == [False, False, True]
    assert record.snoozed_until is None


def test_keep_and_the_exemption_label() -> None:
    kept = IdleRecord(cluster="c", kept_by="U0BOB", kept_at=T0)
    _, verdicts = run([quiet(T0), quiet(T0 + 30 * H)], kept)
    assert [v.status for v in verdicts] == [Status.EXEMPT, Status.EXEMPT]
    _, verdicts = run([quiet(T0, exempt_label=True), quiet(T0 + 30 * H, exempt_label=True)])
    assert [v.reason for v in verdicts] == ["label clusterbot-idle: exempt"] * 2
    assert not any(v.alert for v in verdicts)


def test_auto_action_is_announced_then_due_after_grace() -> None:
    rules = IdleRules(auto_action="scale_to_zero", grace_minutes=60)
    record, verdicts = run([quiet(T0), quiet(T0 + 2 * H)], rules=rules)
    assert verdicts[-1].alert and record.auto_action_at == T0 + 3 * H
    record, verdicts = run([quiet(T0 + 2.5 * H), quiet(T0 + 3 * H)], record, rules)
    assert [v.auto_action_due for v in verdicts] == [False, True]
    # a job cancels it
    record, verdicts = run(
        [Observation(at=T0 + 2.9 * H, state="RUNNING", running_jobs=1, paying_nodes=4)],
        replace(record, auto_action_at=T0 + 3 * H),
        rules,
    )
    assert record.auto_action_at is None


def test_recommendation_follows_use_over_seven_days() -> None:
    record, _ = run(
        [
            Observation(
                at=T0 + d * DAY + h * H,
                state="RUNNING",
                running_jobs=1 if h == 10 else 0,
                paying_nodes=4,
            )
            for d in range(7)
            for h in range(0, 24, 2)
        ]
    )
    advice, reason = recommend(record.history, T0 + 7 * DAY, RULES)
    assert advice == "scale_to_zero" and "used on 7 of the last 7 days" in reason
    record, _ = run([quiet(T0 + d * DAY) for d in range(8)])
    advice, reason = recommend(record.history, T0 + 7 * DAY, RULES)
    assert advice == "delete" and "used on 0 of the last 7 days" in reason


def test_history_is_compacted_to_a_week() -> None:
    observations = [quiet(T0 + i * 0.25 * H) for i in range(4 * 24 * 10)]  # ten quiet days
    record, _ = run(observations)
    assert len(record.history) == 1  # merged into one run
    assert record.history[0].end - record.history[0].start == pytest.approx(7 * DAY)


# -- a replayed week -------------------------------------------------------------------------------


def office_hours(t: float) -> int:
    """Jobs 09:00-17:00 on weekdays."""
    moment = datetime.fromtimestamp(t, UTC)
    return 1 if moment.weekday() < 5 and 9 <= moment.hour < 17 else 0


TRACE_CLUSTERS = {
    # name: (running jobs at time t, state at time t, paying nodes)
    "office": (office_hours, lambda t: "RUNNING", 4),
    "never": (lambda t: 0, lambda t: "RUNNING", 2),
    "always": (lambda t: 3, lambda t: "RUNNING", 8),
    "free": (lambda t: 0, lambda t: "RUNNING", 0),
    "updating": (
        lambda t: 0,
        lambda t: "UPDATING" if (t - T0) % (3 * H) < 1.5 * H else "RUNNING",
        2,
    ),
}


def expected_alerts(name: str) -> list[float]:
    """Written out by hand from the rules, not computed by them."""
    if name == "office":
        # Idle from 00:00 Monday (first sweep): alert at 02:00. Each weekday evening the jobs
        # end at 17:00, the alert comes at 19:00. Friday's lasts into the weekend: repeats 24 h
        # apart on Saturday and Sunday at 19:00.
        alerts = [T0 + 2 * H]
        alerts += [T0 + d * DAY + 19 * H for d in range(5)]
        alerts += [T0 + 5 * DAY + 19 * H, T0 + 6 * DAY + 19 * H]
        return alerts
    if name == "never":
        return [T0 + 2 * H + d * DAY for d in range(7)]
    return []  # always busy, free, or never RUNNING for 2 h in a row


def test_replayed_week_yields_exactly_the_expected_alerts() -> None:
    sweep = 0.25 * H
    for name, (jobs, state, paying) in TRACE_CLUSTERS.items():
        record = IdleRecord(cluster=name)
        alerts = []
        t = T0
        while t < T0 + 7 * DAY:
            seen = Observation(at=t, state=state(t), running_jobs=jobs(t), paying_nodes=paying)
            record, verdict = assess(record, seen, RULES)
            if verdict.alert:
                alerts.append(t)
            t += sweep
        assert alerts == expected_alerts(name), name


def test_delete_is_advised_only_after_a_week_of_history() -> None:
    record, _ = run([quiet(T0 + h * H) for h in range(0, 48, 2)])  # two quiet days
    advice, reason = recommend(record.history, T0 + 2 * DAY, RULES)
    assert advice == "scale_to_zero"
    assert reason.startswith("used on 0 days (watched for 2 days so far): scale to zero")


def test_plurals_and_durations_are_written_properly() -> None:
    from handlers.words import duration, plural

    assert plural(1, "day") == "1 day" and plural(2, "day") == "2 days"
    assert plural(0, "node") == "0 nodes"
    assert duration(0) == "0 s" and duration(59.6) == "1 min"
    assert duration(125) == "2 min 5 s" and duration(3600) == "1 h"
    assert duration(7260) == "2 h 1 min" and duration(86_400 * 2 + 3600) == "2 days 1 h"
    # one busy hour in five days of history: "used on 1 day", never "1 days" or "0.0 h"
    seen = [quiet(T0), quiet(T0 + H, running_jobs=1)]
    seen += [quiet(T0 + h * H) for h in range(2, 5 * 24, 6)]
    record, verdicts = run(seen)
    _advice, reason = recommend(record.history, T0 + 5 * DAY, RULES)
    assert reason.startswith("used on 1 day (watched for 5 days so far)"), reason
    assert verdicts[-1].reason == "no jobs for 4 days 18 h"
