"""Every real slurmrestd reply in ``tests/fixtures/slurmrestd/`` through the reader and the idle
rules, each classified the way its source says (the ``.source.txt`` beside it).

The replies are read as the bot reads them: the control plane's ``{"status", "body"}`` reply
read as a long one arrives, a piece at a time (``read_slurm_bytes``), and every capture is
checked to read the same as one whole decode of it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bot.vertex.paced import Keep, SlurmAnswer, answer_of, read_slurm_bytes
from bot.vertex.slurm import listed, read_job, read_node, read_reply
from handlers.domain.errors import SlurmUnreadableError
from handlers.domain.operations import SlurmJob, SlurmNode, SlurmResponse
from handlers.sweep.rules import (
    NodeCensus,
    Observation,
    QueueDemand,
    Stall,
    node_census,
    queue_demand,
)

CAPTURES = Path(__file__).parent / "fixtures" / "slurmrestd"
H = 3600.0


SLICE = 999  # bytes a piece: odd, so pieces split escapes, numbers and UTF-8 sequences


async def _read(name: str, lists: dict[str, Keep] | None = None) -> SlurmAnswer:
    """The capture read a piece at a time, checked against one whole decode of it."""
    raw = (CAPTURES / name).read_bytes()
    streamed = await read_slurm_bytes(raw, lists or {}, SLICE)
    whole = answer_of(SlurmResponse.model_validate_json(raw), lists or {})
    assert (streamed.status, streamed.document) == (whole.status, whole.document)
    assert whole.text.startswith(streamed.text)
    return streamed


async def _jobs(name: str) -> tuple[list[SlurmJob], dict[str, Any]]:
    document = read_reply(await _read(name, {"jobs": read_job}), "job")
    return listed(document, "jobs", "job"), document


async def _nodes(name: str) -> list[SlurmNode]:
    document = read_reply(await _read(name, {"nodes": read_node}), "node")
    return listed(document, "nodes", "node")


def test_every_capture_is_listed_here() -> None:
    covered = {n for n, *_ in JOB_CAPTURES} | {n for n, *_ in NODE_CAPTURES}
    covered |= ERROR_CAPTURES.keys() | {"slurmweb_24.11_v0.0.42_slurm-node-unfound.json"}
    # read by tests/test_reservations.py: the simulator's partitions and diag have their fields
    covered |= {"lcrownover_23.11_v0.0.40_partitions.json", "lcrownover_23.11_v0.0.40_diag.json"}
    on_disk = {p.name for p in CAPTURES.glob("*.json")}
    assert on_disk == covered
    assert all((CAPTURES / n.replace(".json", ".source.txt")).exists() for n in on_disk)


# (file, running, pending demand, stalled groups as (kind, user, cause, count)), at the
# moment the capture was taken (its last_update) with a 30-minute idle threshold: each
# capture's BeginTime job begins 59 minutes later, so it is not demand yet
def _later(user: str) -> list[tuple[Stall, str, str, int]]:
    return [(Stall.LATER, user, "BeginTime", 1)]


JOB_CAPTURES = [
    ("slurmweb_24.05_v0.0.41_slurm-jobs.json", 3, 0, _later("tmcgrath")),
    ("slurmweb_24.11_v0.0.42_slurm-jobs.json", 7, 1, _later("jbeck")),
    ("slurmweb_25.05_v0.0.42_slurm-jobs.json", 4, 5, _later("rcarson")),
    ("slurmweb_25.05_v0.0.43_slurm-jobs.json", 6, 1, _later("progers")),
    ("slurmweb_25.11_v0.0.42_slurm-jobs.json", 2, 8, _later("sevans")),
    ("slurmweb_25.11_v0.0.44_slurm-jobs.json", 4, 0, _later("vhartman")),
    ("derived_24.11_v0.0.42_jobs_begintime_only.json", 0, 0, _later("jbeck")),
    ("derived_24.11_v0.0.42_jobs_finished_only.json", 0, 0, []),
    (
        "heldjobs_26.05_v0.0.44_trimmed.json",
        0,
        0,
        [(Stall.HELD, "bridge", "JobHeldAdmin", 1), (Stall.HELD, "bridge", "JobHeldUser", 1)],
    ),
    # Slurm 23.11: one task of an array runs; the array's meta record stands for its 9,588
    # tasks not yet started (array_task_string "412-9999"), waiting on Resources
    ("lcrownover_23.11_v0.0.40_jobs_array.json", 1, 9588, []),
]


@pytest.mark.parametrize(("name", "running", "pending", "stalled"), JOB_CAPTURES)
async def test_job_captures_are_counted_as_slurm_means_them(
    name: str, running: int, pending: int, stalled: list[tuple[Stall, str, str, int]]
) -> None:
    jobs, document = await _jobs(name)
    plain = json.loads(json.loads((CAPTURES / name).read_text())["body"])
    assert len(jobs) == len(plain["jobs"])  # the paced read keeps every job
    assert [j.job_id for j in jobs] == [j["job_id"] for j in plain["jobs"]]
    moment = float((document.get("last_update") or {}).get("number") or 0) or max(
        j.submitted or 0 for j in jobs
    )
    demand = queue_demand(jobs, moment, 0.5 * H)
    assert (demand.running, demand.pending) == (running, pending)
    assert [(g.kind, g.user, g.cause, g.count) for g in demand.stalled] == stalled
    # with the default two hours, a begin time an hour ahead is near: demand again
    near = queue_demand(jobs, moment, 2 * H)
    begins = sum(g.count for g in demand.stalled if g.kind == Stall.LATER)
    assert (near.running, near.pending) == (running, pending + begins)


def test_the_captures_say_what_the_counts_above_rest_on() -> None:
    """The expectations come from the captures' own fields, not from our simulator."""
    held = json.loads(
        json.loads((CAPTURES / "heldjobs_26.05_v0.0.44_trimmed.json").read_text())["body"]
    )
    assert [(j["hold"], j["state_reason"], j["priority"]["number"]) for j in held["jobs"]] == [
        (True, "JobHeldUser", 0),
        (True, "JobHeldAdmin", 0),
    ]
    for name, *_ in JOB_CAPTURES[:-3]:
        capture = json.loads(json.loads((CAPTURES / name).read_text())["body"])
        [later] = [j for j in capture["jobs"] if j["state_reason"] == "BeginTime"]
        ahead = later["eligible_time"]["number"] - capture["last_update"]["number"]
        assert 0.5 * H < ahead < 2 * H


async def test_a_begin_time_counts_once_it_comes_near() -> None:
    jobs, _ = await _jobs("derived_24.11_v0.0.42_jobs_begintime_only.json")
    [job] = [j for j in jobs if j.pending]
    assert job.reason == "BeginTime" and job.eligible is not None
    assert queue_demand(jobs, job.eligible - 3 * H, 2 * H).pending == 0  # not yet
    later = queue_demand(jobs, job.eligible - 3 * H, 2 * H).stalled[0]
    assert later.kind == Stall.LATER and later.until == job.eligible
    assert queue_demand(jobs, job.eligible - 1 * H, 2 * H).pending == 1  # near: demand again


# (file, working, completing, out of service as (state, reason, count), powered down, total)
NODE_CAPTURES = [
    (
        "lcrownover_23.11_v0.0.40_nodes.json",
        8,
        0,
        [
            ("down", "Not responding", 2),
            ("drained", "Kill task failed", 1),
            ("drained", "gpu_board", 1),
        ],
        0,
        12,
    ),
    ("slurmweb_24.05_v0.0.41_slurm-nodes.json", 0, 0, [], 0, 100),
    ("slurmweb_24.05_v0.0.41_slurm-node-draining.json", 1, 0, [], 0, 1),
    (
        "slurmweb_24.11_v0.0.42_slurm-nodes.json",
        0,
        1,
        [("down", "CPU dead", 1), ("drained", "ECC memory error", 1)],
        0,
        6,
    ),
    ("slurmweb_24.11_v0.0.42_slurm-node-down.json", 0, 0, [("down", "CPU dead", 1)], 0, 1),
    (
        "slurmweb_24.11_v0.0.42_slurm-node-drain.json",
        0,
        0,
        [("drained", "ECC memory error", 1)],
        0,
        1,
    ),
    ("slurmweb_24.11_v0.0.42_slurm-node-with-gpus-model-idle.json", 0, 1, [], 0, 1),
    (
        "slurmweb_25.05_v0.0.42_slurm-nodes.json",
        2,
        0,
        [("down", "CPU dead", 1), ("drained", "ECC memory error", 1)],
        0,
        6,
    ),
    (
        "slurmweb_25.05_v0.0.43_slurm-nodes.json",
        0,
        1,
        [("down", "CPU dead", 1), ("drained", "ECC memory error", 1)],
        0,
        6,
    ),
    ("slurmweb_25.05_v0.0.43_slurm-node-planned.json", 1, 0, [], 0, 1),
    (
        "slurmweb_25.11_v0.0.42_slurm-nodes.json",
        0,
        0,
        [("down", "CPU dead", 1), ("drained", "ECC memory error", 1)],
        0,
        8,
    ),
    (
        "slurmweb_25.11_v0.0.44_slurm-nodes.json",
        2,
        0,
        [("down", "CPU dead", 1), ("drained", "ECC memory error", 1)],
        0,
        8,
    ),
    ("constructed_v0.0.42_nodes_power_saving.json", 0, 0, [("down", "no reason given", 1)], 5, 6),
]


@pytest.mark.parametrize(
    ("name", "working", "completing", "broken", "powered_down", "total"), NODE_CAPTURES
)
async def test_node_captures_are_counted_as_slurm_means_them(
    name: str,
    working: int,
    completing: int,
    broken: list[tuple[str, str, int]],
    powered_down: int,
    total: int,
) -> None:
    census = node_census(await _nodes(name))
    assert census == NodeCensus(working, completing, tuple(broken), powered_down, total)


async def test_a_completing_node_is_an_epilog_not_hidden_jobs() -> None:
    census = node_census(
        await _nodes("slurmweb_24.11_v0.0.42_slurm-node-with-gpus-model-idle.json")
    )
    seen = Observation(at=0.0, state="RUNNING", paying_nodes=1).with_slurm(QueueDemand(), census)
    assert seen.busy_reason() == "1 Slurm node completing a job (its epilog runs)"
    assert not seen.jobs_hidden


async def test_nodes_out_of_service_are_named_with_their_reasons() -> None:
    census = node_census(await _nodes("slurmweb_25.11_v0.0.42_slurm-nodes.json"))
    seen = Observation(at=0.0, state="RUNNING", paying_nodes=8).with_slurm(QueueDemand(), census)
    assert seen.busy_reason() is None  # a DOWN and a drained node run nothing
    assert seen.node_notes == (
        (
            "2 nodes out of service, paid for, running nothing: 1 down (CPU dead), "
            "1 drained (ECC memory error)",
        ),
    )


async def test_powered_down_nodes_are_no_vms_and_a_disagreement_is_said() -> None:
    census = node_census(await _nodes("constructed_v0.0.42_nodes_power_saving.json"))
    assert census.powered_up == 1
    seen = Observation(at=0.0, state="RUNNING", paying_nodes=3).with_slurm(QueueDemand(), census)
    assert seen.node_notes[-1] == (
        "Slurm counts 1 node powered up where the control plane lists 3 compute VMs; the cost "
        "is that of the VMs",
    )
    agreed = Observation(at=0.0, state="RUNNING", paying_nodes=1).with_slurm(QueueDemand(), census)
    assert all("Slurm counts" not in note[0] for note in agreed.node_notes)


def _held(job_id: int) -> SlurmJob:
    job = read_job({"job_id": job_id, "user_name": "dana", "job_state": ["PENDING"], "hold": True})
    assert job is not None
    return dataclasses.replace(job, reason="JobHeldUser")


def test_held_jobs_are_named_with_the_command_that_releases_them() -> None:
    [group] = queue_demand([_held(1), _held(2)], 0.0, 0.0).stalled
    assert (group.kind, group.user, group.cause, group.count) == (
        Stall.HELD,
        "dana",
        "JobHeldUser",
        2,
    )
    assert group.words() == (
        "2 jobs of dana held by its user (JobHeldUser): ",
        "scontrol release",
        " lets them run",
    )


# file -> the words of the error the sweep reports, or None for slurmrestd's "no such URL"
ERROR_CAPTURES = {
    "slurmweb_24.11_v0.0.42_slurm-jwt-invalid-headers.json": (
        "slurmrestd answered HTTP 401 to the job query: Authentication failure"
    ),
    "slurmweb_25.11_v0.0.42_slurm-jwt-invalid-headers.json": (
        "slurmrestd answered HTTP 500 to the job query: Authentication does not apply to request"
    ),
    "slurmweb_24.11_v0.0.42_slurm-jwt-invalid-token.json": (
        "slurmrestd answered HTTP 511 to the job query: Protocol authentication error: "
        "Unable to query jobs"
    ),
    "slurmweb_24.11_v0.0.42_slurm-job-unfound.json": (
        "slurmrestd answered HTTP 404 to the job query: Invalid job id specified: "
        "Unable to query JobId=12740"
    ),
    "slurmweb_24.11_v0.0.42_slurm-not-found.json": None,
    "slurmweb_25.11_v0.0.42_slurm-not-found.json": None,
}


@pytest.mark.parametrize(("name", "words"), ERROR_CAPTURES.items())
async def test_errors_keep_their_status_and_slurmrestds_words(name: str, words: str | None) -> None:
    from bot.vertex.slurm import _unknown_url

    reply = await _read(name, {"jobs": read_job})
    assert _unknown_url(reply) is (words is None)
    if words is not None:
        with pytest.raises(SlurmUnreadableError) as caught:
            read_reply(reply, "job")
        assert caught.value.reason == words


async def test_a_reply_with_no_list_says_slurmrestds_error() -> None:
    with pytest.raises(SlurmUnreadableError) as caught:
        await _nodes("slurmweb_24.11_v0.0.42_slurm-node-unfound.json")
    assert caught.value.reason == (
        "slurmrestd's node reply has no node list: No error: Failure to query node unexisting-node"
    )


async def test_a_reply_cut_short_is_unreadable_not_a_crash() -> None:
    raw = (CAPTURES / "slurmweb_24.11_v0.0.42_slurm-jobs.json").read_bytes()
    data = json.loads(raw)
    cut = SlurmResponse(status=200, body=data["body"][: len(data["body"]) // 2])
    streamed = await read_slurm_bytes(cut.model_dump_json().encode(), {"jobs": read_job}, SLICE)
    for reply in (streamed, answer_of(cut, {"jobs": read_job})):
        with pytest.raises(SlurmUnreadableError) as caught:
            read_reply(reply, "job")
        assert caught.value.reason.startswith("slurmrestd sent a job reply that is")


async def test_a_nodes_reason_comes_with_who_set_it_and_since_when() -> None:
    """NODE's reason_set_by_user and reason_changed_at (a slurmrestd number), as the
    captures give them: what a health alert says of a broken node."""
    [down] = [n for n in await _nodes("slurmweb_24.11_v0.0.42_slurm-node-down.json")]
    assert (down.name, down.reason, down.reason_by) == ("cn1", "CPU dead", "root")
    assert down.reason_at == 1762942786.0
    nodes = {n.name: n for n in await _nodes("slurmweb_25.11_v0.0.44_slurm-nodes.json")}
    assert (nodes["cn1"].reason, nodes["cn1"].reason_by) == ("ECC memory error", "slurm")
    healthy = [n for n in nodes.values() if not n.reason]
    assert healthy and all(n.reason_at is None and n.reason_by == "" for n in healthy)


async def test_an_arrays_waiting_tasks_are_counted_and_shown_as_squeue_shows_them() -> None:
    jobs, _ = await _jobs("lcrownover_23.11_v0.0.40_jobs_array.json")
    assert [(j.shown_id, j.tasks, j.pending) for j in jobs] == [
        ("7725337_411", 1, False),
        ("7725337_[412-9999]", 9588, True),
    ]
