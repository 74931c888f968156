"""The health rules on the real slurmrestd captures (tests/fixtures/slurmrestd, each with
its source): which nodes are broken, why, by whom and since when; a cluster out of RUNNING;
pending jobs held up by unavailable nodes."""

from __future__ import annotations

import dataclasses

import pytest

from handlers.sweep.health import (
    BrokenNode,
    NodeTrouble,
    blocked_jobs,
    broken_nodes,
    cluster_trouble,
)
from tests.test_slurm_captures import _jobs, _nodes

H = 3600.0


async def test_a_down_node_with_its_reason_who_and_since() -> None:
    found = broken_nodes(await _nodes("slurmweb_24.11_v0.0.42_slurm-node-down.json"))
    assert found == [
        BrokenNode("cn1", NodeTrouble.DOWN, "CPU dead", "root", 1762942786.0, ("standard",))
    ]


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        ("slurmweb_24.11_v0.0.42_slurm-node-drain.json", [("cn4", "drained", "ECC memory error")]),
        # MIXED + DRAIN: a job still runs on it; it takes no new one
        (
            "slurmweb_24.05_v0.0.41_slurm-node-draining.json",
            [("cn1", "draining", "ECC memory error")],
        ),
        (
            "slurmweb_25.11_v0.0.44_slurm-nodes.json",
            [("cn1", "drained", "ECC memory error"), ("cn2", "down", "CPU dead")],
        ),
        (
            "slurmweb_24.11_v0.0.42_slurm-nodes.json",
            [("cn3", "down", "CPU dead"), ("cn4", "drained", "ECC memory error")],
        ),
        ("slurmweb_24.11_v0.0.42_slurm-node-with-gpus-model-idle.json", []),
    ],
)
async def test_broken_nodes_in_the_captures(
    capture: str, expected: list[tuple[str, str, str]]
) -> None:
    found = broken_nodes(await _nodes(capture))
    assert [(b.name, str(b.trouble), b.reason) for b in found] == expected


async def test_power_saving_is_no_fault_but_a_node_that_failed_to_resume_is() -> None:
    found = broken_nodes(await _nodes("constructed_v0.0.42_nodes_power_saving.json"))
    # cn4 keeps a stale reason but is only powered down; cn3 is DOWN and powered down
    assert [(b.name, str(b.trouble), b.billed) for b in found] == [
        ("cn3", "down", False),
        ("ia1", "down", True),
    ]


def test_a_cluster_out_of_running() -> None:
    stuck = dict(followed=False, stuck_after=2 * H)
    assert cluster_trouble("RUNNING", "", changing_for=None, **stuck) is None
    assert cluster_trouble("STOPPING", "", changing_for=9 * H, **stuck) is None  # a delete
    error = cluster_trouble("ERROR", "Slurm controller unreachable", changing_for=None, **stuck)
    assert error is not None and error.message == "Slurm controller unreachable"
    assert cluster_trouble("UPDATING", "", changing_for=1 * H, **stuck) is None
    late = cluster_trouble("UPDATING", "", changing_for=3 * H, **stuck)
    assert late is not None and "UPDATING for 3.0 h" in late.message
    assert (
        cluster_trouble("UPDATING", "", changing_for=3 * H, followed=True, stuck_after=2 * H)
        is None
    )
    unknown = cluster_trouble("STATE_UNSPECIFIED", "", changing_for=None, **stuck)
    assert unknown is not None


async def test_jobs_blocked_by_unavailable_nodes() -> None:
    """The 24.11 capture's pending job (waiting on Resources) as Slurm shows it when the
    nodes it needs are down: ReqNodeNotAvail with the nodes named, or NodeDown without."""
    jobs, _ = await _jobs("slurmweb_24.11_v0.0.42_slurm-jobs.json")
    [pending] = [j for j in jobs if j.pending and j.reason == "Resources"]
    broken = broken_nodes(await _nodes("slurmweb_24.11_v0.0.42_slurm-nodes.json"))
    named = dataclasses.replace(
        pending,
        reason="ReqNodeNotAvail",
        reason_text="ReqNodeNotAvail, UnavailableNodes:cn[3-4]",
    )
    unnamed = dataclasses.replace(pending, job_id=pending.job_id + 1, reason="NodeDown")
    ranged = dataclasses.replace(
        named,
        job_id=pending.job_id + 2,
        reason_text="ReqNodeNotAvail, UnavailableNodes:cn[1,3-4],gpu1",  # a host list
    )
    assert pending.submitted is not None
    soon = pending.submitted + 1 * H
    assert blocked_jobs([named, unnamed], broken, soon) == []  # not for long yet
    later = pending.submitted + 3 * H
    found = blocked_jobs([named, unnamed, pending, ranged], broken, later)
    assert [(j.job_id, j.reason, j.nodes) for j in found] == [
        (named.job_id, "ReqNodeNotAvail", ("cn[3-4]",)),
        (unnamed.job_id, "NodeDown", ("cn3", "cn4")),  # the broken nodes of its partition
        (ranged.job_id, "ReqNodeNotAvail", ("cn[1,3-4]", "gpu1")),
    ]
