"""Allocated but idle (handlers/sweep/gpus.py): the rules on the reply shapes Cloud Monitoring
documents (tests/fixtures/monitoring/), and on Slurm's job records."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.vertex.monitoring import read_series
from handlers.costs import PoolSeen
from handlers.domain.operations import SlurmJob
from handlers.spend.runs import advance
from handlers.sweep.gpus import (
    GpuIdleRules,
    GpuUse,
    NodeGpus,
    idle_allocations,
    idle_nodes,
    lengthened,
)

FIXTURE = Path(__file__).parent / "fixtures" / "monitoring" / "gpu_time_series.json"
NOON = datetime(2026, 12, 7, 12, 0, tzinfo=UTC).timestamp()
INSTANCES = {"4412337069283718291": "a3-0", "7720145583316021844": "a3-1"}
RULES = GpuIdleRules()  # 5 %, one hour


def job(job_id: int, nodes: str, *, started_ago: float = 3 * 3600, **values: Any) -> SlurmJob:
    fields: dict[str, Any] = {
        "job_id": job_id,
        "name": "notebook",
        "user": "alice",
        "account": "research",
        "partition": "a3",
        "states": frozenset({"RUNNING"}),
        "reason": "None",
        "priority": 1,
        "qos": "normal",
        "node_count": 1,
        "nodes": nodes,
        "submitted": int(NOON - started_ago - 60),
        "started": int(NOON - started_ago),
    }
    return SlurmJob(**{**fields, **values})


def documented() -> GpuUse:
    pages = json.loads(FIXTURE.read_text())["pages"]
    return GpuUse("agent.googleapis.com/gpu/utilization", read_series(pages, INSTANCES, 1.0))


def test_the_documented_reply_is_read_per_node_and_gpu_newest_first() -> None:
    use = documented()
    assert set(use.nodes) == {"a3-0", "a3-1"}
    first = use.nodes["a3-0"]
    assert first.slices == {"0": (0.0, 1.5, 0.0, 0.0), "1": (2.25, 0.0, 0.0)}
    assert first.newest == NOON and first.peak == 2.25
    assert use.nodes["a3-1"].slices == {"0": (97.0, 0.0, 0.0, 0.0)}  # int64Value, a string


def test_a_node_is_idle_only_when_every_gpu_stayed_under_the_threshold_all_window() -> None:
    use = documented()
    assert idle_nodes(use, RULES, NOON + 60) == {"a3-0"}  # a3-1 reached 97 % this slice
    assert idle_nodes(use, GpuIdleRules(threshold_percent=2), NOON) == set()  # 2.25 >= 2
    # data that stopped is not idleness: nothing newer than two slices and a few minutes
    assert idle_nodes(use, RULES, NOON + 45 * 60) == set()
    # a GPU with fewer slices than all but the newest is not known to be idle all along
    short = GpuUse("m", {"n": NodeGpus({"0": (0.0, 0.0)}, NOON)})
    assert idle_nodes(short, RULES, NOON) == set()


def test_an_allocation_is_idle_when_it_holds_idle_nodes_alone_for_the_window() -> None:
    use = documented()
    jobs = [job(7, "a3-0"), job(8, "a3-1", user="bob")]
    found = idle_allocations(jobs, use, RULES, NOON)
    assert [(a.job_id, a.user, a.nodes, a.gpus) for a in found] == [(7, "alice", ("a3-0",), 2)]
    assert found[0].utilization == 2.25 and found[0].idle_for_s == 3600
    assert found[0].to_dict() == {
        "job_id": 7,
        "user": "alice",
        "account": "research",
        "partition": "a3",
        "nodes": ["a3-0"],
        "gpus": 2,
        "utilization": 2.25,
        "idle_for_s": 3600,
    }


def test_no_allocation_is_called_idle_without_proof() -> None:
    use = documented()
    cases = {
        "a node it holds is busy": [job(7, "a3-[0-1]", node_count=2)],
        "a node it holds has no metrics": [job(7, "a3-[0,2]", node_count=2)],
        "the node is shared with another job": [job(7, "a3-0"), job(9, "a3-0", user="carol")],
        "it started within the window": [job(7, "a3-0", started_ago=1800)],
        "it is pending": [job(7, "a3-0", states=frozenset({"PENDING"}))],
        "its start is unknown": [job(7, "a3-0", started=None)],
    }
    for why, jobs in cases.items():
        assert idle_allocations(jobs, use, RULES, NOON) == [], why


def test_the_policy_exempts_users_accounts_partitions_and_short_jobs() -> None:
    use = documented()
    for rules, values in (
        (GpuIdleRules(exempt_users=("alice",)), {}),
        (GpuIdleRules(exempt_accounts=("research",)), {}),
        (GpuIdleRules(exempt_partitions=("a3",)), {}),
        (GpuIdleRules(short_limit_minutes=240), {"time_limit": 240}),
    ):
        assert idle_allocations([job(7, "a3-0", **values)], use, rules, NOON) == [], rules
    labelled = GpuIdleRules(exempt_labels=("env=dev", "scratch"))
    assert labelled.exempt_cluster([("team", "a"), ("env", "dev")])
    assert labelled.exempt_cluster([("scratch", "yes")])
    assert not labelled.exempt_cluster([("env", "prod")])
    # a limit longer than the short one, or none at all, is not exempt
    longer = GpuIdleRules(short_limit_minutes=240)
    assert idle_allocations([job(7, "a3-0", time_limit=480)], use, longer, NOON)
    assert idle_allocations([job(7, "a3-0")], use, longer, NOON)


def test_how_long_grows_from_when_it_was_first_found_never_past_its_run() -> None:
    found = idle_allocations([job(7, "a3-0", started_ago=3 * 3600)], documented(), RULES, NOON)
    grown, first = lengthened(found, {}, NOON, RULES.window)
    assert grown[0].idle_for_s == 3600 and first == {7: NOON}
    later, kept = lengthened(found, first, NOON + 5400, RULES.window)
    assert later[0].idle_for_s == 3600 + 5400 and kept == first
    capped, _ = lengthened(found, {7: NOON - 10 * 3600}, NOON, RULES.window)
    assert capped[0].idle_for_s == 3 * 3600  # never longer than it has run
    # a job no longer found idle is forgotten: found again later, its clock starts again
    _, forgotten = lengthened([], first, NOON + 60, RULES.window)
    assert forgotten == {}


def test_the_nodes_idle_allocations_hold_are_idle_spend_while_the_cluster_is_busy() -> None:
    pool = PoolSeen("a3", 4, 88.25)
    runs, closed = advance((), 0.0, [replace(pool, held_idle=1)], idle=False, interval=60)
    assert sorted((r.nodes, r.idle) for r in runs) == [(1, True), (3, False)] and closed == []
    # the allocation ends: its idle part closes, the busy part grows to every node
    runs, closed = advance(runs, 60.0, [pool], idle=False, interval=60)
    assert [(r.nodes, r.idle) for r in runs] == [(4, False)]
    assert sorted((r.nodes, r.idle, end) for r, end in closed) == [(1, True, 60), (3, False, 60)]
    # a cluster idle as a whole: one idle run of all its nodes, allocations or not
    runs, _ = advance((), 0.0, [replace(pool, held_idle=1)], idle=True, interval=60)
    assert [(r.nodes, r.idle) for r in runs] == [(4, True)]
    # the login pool is never idle
    login = PoolSeen("login", 1, 0.4, compute=False, held_idle=1)
    runs, _ = advance((), 0.0, [login], idle=False, interval=60)
    assert [(r.nodes, r.idle) for r in runs] == [(1, False)]
