"""`/cluster slurm CLUSTER`: the Slurm spec in full, through the bot and piece by piece."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from handlers.domain.models import Cluster
from handlers.slurm.view import SCRIPT_LINES, script_digest, slurm_reply
from tests.support.demo_stack import Stack, demo_stack, text_of
from tests.support.factories import cluster_doc
from tests.support.text_adapter import text as plain


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


def shown(cluster: Cluster) -> str:
    return plain(slurm_reply(cluster))


async def test_slurm_shows_the_spec_of_a_demo_cluster(stack: Stack) -> None:
    reply = await stack.reply_to("carol", "/cluster slurm train01")  # a viewer may read it
    assert reply["ephemeral_to"] == "U0CAROL"
    text = text_of(reply)
    for fact in (
        "train01: Slurm settings",
        "a4 (default)",
        "home-fs",
        "PriorityWeightFairshare  10000",
        "prolog 1 · 2 lines · 38 bytes · sha256 `9a4b4c2057d7`",
        "nvidia-smi -L",
        "*Epilog scripts*: none",
    ):
        assert fact in text, fact
    refused = text_of(await stack.reply_to("carol", "/cluster slurm"))
    assert "slurm needs CLUSTER" in refused and "Usage: /cluster slurm CLUSTER" in refused


def test_a_long_script_shows_its_first_lines_and_what_is_left() -> None:
    script = "\n".join(f"echo step {n}" for n in range(1, 11)) + "\n"
    document = cluster_doc(cluster_id="c1", nodes=2)
    document["orchestratorSpec"] = {
        "slurmSpec": {
            "loginNodePoolId": "login",
            "partitions": [{"id": "batch", "nodePoolIds": ["gpu", "gone"]}, {"id": "debug"}],
            "epilogBashScripts": [script],
        }
    }
    text = shown(Cluster.model_validate(document))
    assert f"sha256 `{script_digest(script)}`" in text and "10 lines" in text
    assert "echo step 3" in text and "echo step 4" not in text
    assert f"… {10 - SCRIPT_LINES} lines more" in text
    # no defaultPartitionId: the first partition is the default; a pool that is not there
    assert "`batch (the first partition)`" in text
    assert "batch (default)" in text and "gpu, gone (missing: gone)" in text
    assert "Slurm's defaults" in text and "*Prolog scripts*: none" in text
