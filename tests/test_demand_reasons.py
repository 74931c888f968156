"""Demand by Slurm's own reasons, as an allow-list: every reason slurmctld can set is known
here, only those Slurm documents as starting on their own keep a cluster busy, and a reason
never seen is shown as unknown, not counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.vertex.slurm import read_job
from handlers.slurm.reasons import EXACT, Wait, reason_of
from handlers.sweep.demand import Stall, queue_demand

SOURCE = Path(__file__).parent / "fixtures" / "slurm" / "job_state_reasons.txt"
SLURMS_REASONS = [
    line.strip() for line in SOURCE.read_text().splitlines() if line and not line.startswith("#")
]
NOW = 1_790_000_000.0
H = 3600.0


def _pending(reason: str, user: str = "dana", **more: object) -> dict[str, object]:
    job = {"job_id": 1, "user_name": user, "job_state": ["PENDING"], "state_reason": reason}
    return job | {"submit_time": {"number": int(NOW - H)}, "eligible_time": int(NOW - H)} | more


def _demand(*jobs: dict[str, object]):  # type: ignore[no-untyped-def]
    read = [read_job(job) for job in jobs]
    return queue_demand([j for j in read if j is not None], NOW, 2 * H)


def test_the_fixture_is_every_reason_of_slurmctld() -> None:
    assert len(SLURMS_REASONS) == len(set(SLURMS_REASONS)) == 216
    assert {"Resources", "Priority", "AssocGrpGRESMinutes", "MpiPortsBusy"} <= set(SLURMS_REASONS)


def test_every_reason_slurm_can_set_is_known_here() -> None:
    unknown = [name for name in SLURMS_REASONS if reason_of(name).wait == Wait.UNKNOWN]
    assert unknown == []
    assert set(EXACT) <= set(SLURMS_REASONS)  # no name here that Slurm does not have


def test_only_the_allow_list_is_demand() -> None:
    demand = {name for name in SLURMS_REASONS if reason_of(name).wait == Wait.DEMAND}
    assert demand == {
        "None",
        "Resources",
        "Priority",
        "Prolog",
        "BurstBufferStageIn",
        "Cleaning",
        "SchedDefer",
    }


@pytest.mark.parametrize(
    ("reason", "kind", "words"),
    [
        # a time limit longer than the partition's, the QOS's or the account's wall limit
        ("PartitionTimeLimit", Stall.NEVER, "its time limit exceeds its partition's"),
        ("QOSMaxWallDurationPerJobLimit", Stall.NEVER, "it asks more than its QOS's limit"),
        ("AssocMaxWallDurationPerJobLimit", Stall.NEVER, "it asks more than its account's"),
        # an account whose GPU-minutes budget is used up
        ("AssocGrpGRESMinutes", Stall.NEVER, "its account's budget of minutes is used up"),
        # limits on running work, a dependency, a license, a reservation
        ("AssocGrpGRESRunMinutes", Stall.OTHER, "its account's running work is at its limit"),
        ("QOSMaxGRESPerUser", Stall.OTHER, "its user runs as much as its QOS's limit allows"),
        ("Dependency", Stall.OTHER, "it waits for a job it depends on"),
        ("Licenses", Stall.OTHER, "it waits for a license"),
        ("Reservation", Stall.OTHER, "it waits for its reservation"),
        ("ReqNodeNotAvail", Stall.BLOCKED, "a node it needs is not available"),
        ("JobHoldMaxRequeue", Stall.HELD, "held after being requeued as often as allowed"),
        ("WaitingForTheMoon", Stall.UNKNOWN, "a reason not known here (WaitingForTheMoon)"),
    ],
)
def test_a_pending_job_slurm_will_not_start_is_not_demand(
    reason: str, kind: Stall, words: str
) -> None:
    demand = _demand(_pending(reason), _pending("Priority", user="erin"))
    assert (demand.running, demand.pending, demand.active) == (0, 1, True)
    [group] = demand.stalled
    assert (group.kind, group.user, group.cause, group.count) == (kind, "dana", reason, 1)
    assert words in "".join(group.words())
    alone = _demand(_pending(reason))
    assert not alone.active  # a paid cluster with only this job is idle


@pytest.mark.parametrize(
    "reason", ["None", "Resources", "Priority", "Prolog", "Cleaning", "SchedDefer"]
)
def test_a_job_that_starts_when_nodes_allow_is_demand(reason: str) -> None:
    demand = _demand(_pending(reason))
    assert (demand.pending, demand.stalled, demand.active) == (1, (), True)


def test_a_begin_time_slurm_does_not_give_is_not_guessed() -> None:
    job = _pending("BeginTime")
    del job["eligible_time"]
    [group] = _demand(job).stalled
    assert (group.kind, group.until) == (Stall.LATER, None)
    assert "not to start before later (BeginTime)" in "".join(group.words())


# slurmctld's words beside the reason, as job_scheduler.c and node_scheduler.c write them
NODES_OUT = (
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
)
MAINTENANCE = "ReqNodeNotAvail, Reserved for maintenance"


def test_resources_with_the_partitions_nodes_out_of_service_is_blocked_not_demand() -> None:
    [group] = _demand(_pending("Resources", state_description=NODES_OUT)).stalled
    assert (group.kind, group.cause) == (Stall.BLOCKED, "Resources")
    assert "blocked: nodes it needs are down, drained" in "".join(group.words())
    plain = _demand(_pending("Resources", state_description=""))
    assert (plain.pending, plain.stalled) == (1, ())  # nodes in service: demand


def test_a_maintenance_reservation_is_planned_not_broken() -> None:
    [group] = _demand(_pending("ReqNodeNotAvail", state_description=MAINTENANCE)).stalled
    assert (group.kind, group.cause) == (Stall.MAINTENANCE, "ReqNodeNotAvail")
    assert "reserved for maintenance" in "".join(group.words())


def test_health_counts_both_forms_of_a_stuck_queue_and_not_maintenance() -> None:
    from handlers.sweep.health import BrokenNode, ClusterHealth, NodeTrouble, blocked_jobs

    broken = [BrokenNode("gpu-1", NodeTrouble.DRAINED, "Xid 79", "root", None, ("gpu",))]
    jobs = [
        read_job(_pending("Resources", state_description=NODES_OUT, job_id=7, partition="gpu")),
        read_job(_pending("ReqNodeNotAvail", state_description=MAINTENANCE, job_id=8)),
        read_job(_pending("Resources", job_id=9, partition="gpu")),
    ]
    found = blocked_jobs([j for j in jobs if j is not None], broken, NOW + 2 * H)
    assert [(j.job_id, j.reason, j.nodes, j.text) for j in found] == [
        (7, "Resources", ("gpu-1",), NODES_OUT)
    ]
    # as `sweep --once --json` tells it
    shown = ClusterHealth(nodes=tuple(broken), blocked=tuple(found)).shown()
    assert [(n["name"], n["problem"], n["reason"]) for n in shown["nodes"]] == [
        ("gpu-1", "drained", "Xid 79")
    ]
    assert [(j["job_id"], j["reason"], j["slurm_says"]) for j in shown["blocked_jobs"]] == [
        (7, "Resources", NODES_OUT)
    ]
    assert shown["cluster"] is None


def test_a_job_held_after_its_launch_failed_is_not_told_to_be_released_blindly() -> None:
    held = _pending("JobHeldUser", hold=True, state_description="launch failed requeued held")
    [group] = _demand(held).stalled
    assert (group.kind, group.cause) == (Stall.HELD, "JobHeldUser")
    said = group.words()
    assert said[0].startswith("1 job of dana held by Slurm after its launch failed")
    assert "runs the same launch again" in said[0] and said[1] == "/cluster health"
    plain = _demand(_pending("JobHeldUser", hold=True)).stalled[0].words()
    assert plain[1:] == ("scontrol release", " lets it run")


def test_a_node_drained_for_a_reboot_someone_asked_for_is_not_broken() -> None:
    from bot.vertex.slurm import read_node
    from handlers.sweep.health import broken_nodes

    def node(name: str, *states: str, reason: str) -> object:
        return read_node({"name": name, "state": ["IDLE", *states], "reason": reason})

    nodes = [
        node("gpu-1", "DRAIN", "REBOOT_REQUESTED", reason="Reboot ASAP"),
        node("gpu-2", "DRAIN", "REBOOT_ISSUED", reason="Reboot ASAP"),
        node("gpu-3", "DRAIN", reason="Xid 79"),
        node("gpu-4", "DOWN", "REBOOT_ISSUED", reason="reboot timed out"),
    ]
    assert [n.name for n in broken_nodes(nodes)] == ["gpu-3", "gpu-4"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tasks", "count"),
    [("412-9999", 9588), ("1,3,5-7", 5), ("0-15:4", 4), ("0-99%10", 100), ("7", 1), ("x-y", 1)],
)
def test_an_arrays_task_string_counts_its_tasks(tasks: str, count: int) -> None:
    from handlers.domain.operations import task_count

    assert task_count(tasks) == count


@pytest.mark.parametrize(
    ("reason", "counted"),
    [
        ("QOSMaxGRESPerUser", "(GPUs or other GRES)"),
        ("AssocGrpCPUMinutesLimit", "(CPUs)"),
        ("QOSMaxWallDurationPerJobLimit", "(wall time)"),
        ("QOSMinMemory", "(memory)"),
        ("AssocGrpNodeLimit", "(nodes)"),
    ],
)
def test_a_limit_names_what_it_counts(reason: str, counted: str) -> None:
    assert reason in SLURMS_REASONS
    assert reason_of(reason).words.endswith(counted)


def test_every_limit_of_slurm_names_what_it_counts_or_is_not_a_resource_limit() -> None:
    limits = [n for n in SLURMS_REASONS if n.startswith(("Assoc", "QOS")) and "Unknown" not in n]
    unnamed = {n for n in limits if not reason_of(n).words.endswith(")")}
    # the older, coarser names of a limit, which do not say what they count
    assert unnamed == {
        "AssociationJobLimit",
        "AssociationResourceLimit",
        "AssociationTimeLimit",
        "QOSJobLimit",
        "QOSNotAllowed",
        "QOSResourceLimit",
        "QOSTimeLimit",
        "QOSUsageThreshold",
    }
