"""Prolog and epilog scripts: one shown whole, removed or reordered through approval with the
whole list sent under its own mask, and what is refused before any card."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from handlers.grammar import CommandError
from handlers.slurm.commands import SlurmScripts
from handlers.slurm.view import script_digest
from tests.support.demo_stack import TRAIN01, Stack, demo_stack, text_of, thread_of
from tests.support.words import parse

SCRIPTS = [
    "#!/bin/bash\nnvidia-smi -L > /dev/null\n",
    "#!/bin/bash\n# clean scratch\nrm -rf /scratch/$SLURM_JOB_ID\n",
    "#!/bin/bash\nlogger job $SLURM_JOB_ID starting\n",
]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        spec = running.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
        spec["prologBashScripts"] = list(SCRIPTS)
        yield running


async def test_a_script_is_shown_whole(stack: Stack) -> None:
    text = text_of(await stack.reply_to("carol", "/cluster slurm train01 prolog show 2"))
    assert "train01 prolog 2" in text
    assert "# clean scratch\nrm -rf /scratch/$SLURM_JOB_ID" in text
    assert script_digest(SCRIPTS[1]) in text
    missing = text_of(await stack.reply_to("carol", "/cluster slurm train01 prolog show 4"))
    assert "train01 has prolog scripts 1 to 3, not 4" in missing


async def test_scripts_are_reordered_and_removed_by_approval(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster slurm train01 prolog move 3 1")
    text = text_of(card)
    assert "Slurm scripts request: train01" in text and "move prolog 3 to place 1" in text
    assert f"1  {script_digest(SCRIPTS[0])}" in text
    await stack.click("bob", card["ts"], "approve")
    await stack.wait(lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), 20)
    [patch] = await stack.requests("PATCH")
    assert patch["query"] == {"updateMask": "orchestrator_spec.slurm_spec.prolog_bash_scripts"}
    spec = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
    assert spec["prologBashScripts"] == [SCRIPTS[2], SCRIPTS[0], SCRIPTS[1]]

    card = await stack.card("alice", "/cluster slurm train01 prolog remove 3")
    assert f"remove prolog 3 (sha256 {script_digest(SCRIPTS[1])})" in text_of(card)
    await stack.click("bob", card["ts"], "approve")
    await stack.wait(lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), 20)
    spec = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
    assert spec["prologBashScripts"] == [SCRIPTS[2], SCRIPTS[0]]
    assert spec["config"]["PriorityType"] == "priority/multifactor"  # the rest is untouched


async def test_refusals_come_before_any_card(stack: Stack) -> None:
    refusals = {
        "epilog remove 1": "train01 has no epilog scripts",
        "prolog remove 7": "train01 has prolog scripts 1 to 3, not 7",
        "prolog move 2 2": "prolog 2 is already in place 2",
        "prolog move 1 9": "not 9",
        "prolog drop 1": "slurm prolog needs what to do",
        "prolog remove x": "N counts from 1",
        "prolog remove 0": "scripts are counted from 1",
    }
    for words, reason in refusals.items():
        reply = text_of(await stack.reply_to("alice", f"/cluster slurm train01 {words}"))
        assert reason in reply, (words, reply)
    viewer = text_of(await stack.reply_to("carol", "/cluster slurm train01 prolog remove 1"))
    assert "needs the operator role; you are viewer" in viewer
    assert await stack.requests("PATCH") == []


def test_the_grammar() -> None:
    assert parse("slurm train01 prolog show 2") == SlurmScripts("train01", "prolog", "show", 2)
    assert parse("slurm train01 EPILOG Move 2 1") == SlurmScripts("train01", "epilog", "move", 2, 1)
    with pytest.raises(CommandError, match="use prolog show N"):
        parse("slurm train01 prolog move 2")
