"""`/cluster jobs` and `/cluster fairshare`: Slurm's queue and fair-share tree read through
`:callSlurmRestApi` (GET /slurm/v0.0.42/jobs/ and /shares, no body), filtered, cut to what a
message holds, and honest when Slurm cannot be read."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.slack.render import render
from bot.vertex.slurm import listed, read_job, read_shares
from handlers.domain.errors import SlurmUnreadableError
from handlers.grammar import CommandError
from handlers.slurm.commands import Fairshare, Jobs
from handlers.slurm.jobs_view import SHOWN, jobs_reply
from tests.support.demo_stack import TRAIN01, Stack, demo_stack, text_of
from tests.support.words import parse
from tests.test_render import problems


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    # one sweep, at start: the Slurm calls a test counts are its own
    async with demo_stack(tmp_path, sweep_interval=3600) as running:
        await running.wait_for(running.service.core.sweeper.latest)
        yield running


async def proxied(stack: Stack) -> int:
    calls = await stack.requests("POST")
    return sum(1 for r in calls if r["path"].endswith("/train01:callSlurmRestApi"))


async def test_the_queue_shows_who_runs_and_why_the_rest_waits(stack: Stack) -> None:
    before = await proxied(stack)
    text = text_of(await stack.reply_to("carol", "/cluster jobs train01"))
    for fact in (
        "Jobs on train01",
        "1 running job, 1 pending.",
        "4101     llama-pretrain  alice  a4",
        "Resources`: it waits for nodes or GPUs to become free",
    ):
        assert fact in text, (fact, text)
    # tables, at the message pane's width: priority, bob's fair share (none used), why
    assert re.search(r"PENDING +NAME +USER +PARTITION +NODES +QUEUED +PRIO +FS +WHY\n", text)
    assert re.search(
        r"\n4102 +eval-sweep +bob +a4 +1 +10 min[ \d]*s? +4120 +1\.00 +Resources", text
    )
    # the jobs, then the shares for the pending job's fair share
    assert await proxied(stack) == before + 2

    only_bob = text_of(await stack.reply_to("carol", "/cluster jobs train01 user bob"))
    assert "0 running jobs, 1 pending (user bob)." in only_bob and "llama" not in only_bob
    running = text_of(await stack.reply_to("carol", "/cluster jobs train01 state RUNNING"))
    assert "1 running job, 0 pending (state running)." in running and "eval-sweep" not in running
    nobody = text_of(await stack.reply_to("carol", "/cluster jobs train01 partition gpu"))
    assert "No job matches." in nobody


async def test_fair_share_like_sshare(stack: Stack) -> None:
    text = text_of(await stack.reply_to("carol", "/cluster fairshare train01"))
    assert "Fair share on train01" in text
    # alice's running job holds every used node: her factor is 2^-(1/0.5) = 0.25; bob uses none
    assert "ACCOUNT   USER   RAW  NORM SHARES  NORM USAGE  EFFECTV USAGE  FAIRSHARE" in text
    assert "eval               1        0.500       0.000          0.000      1.000" in text
    assert "          bob      1        0.500       0.000          0.000      1.000" in text
    assert "          alice    1        0.500       1.000          1.000      0.250" in text


async def test_a_long_queue_is_cut_within_block_kit_limits(stack: Stack) -> None:
    jobs = [
        {
            "job_id": 5000 + i,
            "name": f"sweep-{i}",
            "user_name": "dana",
            "job_state": "PENDING",
            "state_reason": "QOSMaxGRESPerUser" if i % 2 else "Priority",
            "partition": "a4",
        }
        for i in range(120)
    ]
    stack.simulator.set_jobs("train01", {"jobs": jobs})
    message = await stack.reply_to("carol", "/cluster jobs train01 state pending")
    text = text_of(message)
    assert "0 running jobs, 120 pending (state pending)." in text
    assert f"{120 - SHOWN} more pending not shown; narrow with" in text
    assert "QOSMaxGRESPerUser`: its user runs as much as its QOS's limit allows" in text
    assert problems(message["blocks"]) == []


async def test_slurm_that_cannot_be_read_is_said_so(stack: Stack) -> None:
    status, _ = await stack.post("/vertex/_sim/slurm", {"cluster": "train01", "down": True})
    assert status == 200
    text = text_of(await stack.reply_to("carol", "/cluster jobs train01"))
    assert "Slurm on train01 could not be read: Slurm could not be reached" in text
    text = text_of(await stack.reply_to("carol", "/cluster fairshare train01"))
    assert "Slurm on train01 could not be read" in text


async def test_hidden_jobs_are_not_called_an_empty_queue(stack: Stack) -> None:
    status, _ = await stack.post("/vertex/_sim/slurm", {"cluster": "train01", "private_jobs": True})
    assert status == 200
    text = text_of(await stack.reply_to("carol", "/cluster jobs train01"))
    assert "PrivateData can hide other users' jobs" in text
    assert stack.simulator.jobs[TRAIN01]  # they are there, only hidden


def test_slurmrestd_shapes_old_and_new_are_read() -> None:
    # v0.0.42 numbers are {"set", "infinite", "number"}; older parsers sent bare numbers
    document = {
        "jobs": [
            {
                "job_id": 7,
                "name": "a",
                "user_name": "u",
                "job_state": ["PENDING"],
                "state_reason": "Dependency",
                "priority": {"set": True, "infinite": False, "number": 12},
                "node_count": {"set": True, "infinite": False, "number": 3},
                "submit_time": {"set": True, "infinite": False, "number": 1000},
            },
            {
                "job_id": 8,
                "name": "b",
                "user_name": "v",
                "job_state": "RUNNING",
                "priority": 5,
                "node_count": 1,
                "start_time": 900,
                "time_limit": {"set": False, "infinite": True, "number": 0},
            },
            "not a job",
        ]
    }
    first, second = [j for j in map(read_job, listed(document, "jobs", "job")) if j]
    assert (first.job_id, first.pending, first.priority, first.node_count) == (7, True, 12, 3)
    assert (first.reason, first.submitted, first.started) == ("Dependency", 1000, None)
    assert (second.pending, second.priority, second.started, second.reason) == (
        False,
        5,
        900,
        "None",
    )
    shares = read_shares(
        {
            "shares": {
                "shares": [
                    {
                        "name": "ml",
                        "parent": "root",
                        "type": ["ASSOCIATION"],
                        "shares": {"set": True, "infinite": False, "number": 10},
                        "fairshare": {"factor": {"set": True, "infinite": False, "number": 0.5}},
                    },
                    {
                        "name": "ann",
                        "parent": "ml",
                        "type": ["USER"],
                        "fairshare": {"factor": {"set": False, "infinite": False, "number": 0}},
                    },
                ],
                "total_shares": 2,
            }
        }
    )
    assert [(s.account, s.user, s.shares, s.fairshare) for s in shares] == [
        ("ml", None, 10, 0.5),
        ("ml", "ann", None, None),
    ]
    with pytest.raises(SlurmUnreadableError, match="no share list"):
        read_shares({"shares": []})


def test_an_empty_view_renders_within_limits() -> None:
    reply = jobs_reply("train01", [], None, 0.0)
    assert problems(render(reply)[1]) == []


def test_the_grammar() -> None:
    assert parse("jobs train01") == Jobs("train01")
    assert parse("jobs train01 state Pending user bob partition a4") == Jobs(
        "train01", "bob", "a4", "pending"
    )
    assert parse("fairshare train01") == Fairshare("train01")
    for bad, words in {
        "jobs": "jobs needs CLUSTER",
        "jobs train01 user": "'user' needs a value",
        "jobs train01 owner bob": "jobs does not take 'owner'",
        "jobs train01 state done": "state is running or pending, not 'done'",
        "jobs train01 user bob user carl": "user is given twice",
        "jobs train01 user Bob!": "is not a Linux user name",
    }.items():
        with pytest.raises(CommandError, match=words):
            parse(bad)
