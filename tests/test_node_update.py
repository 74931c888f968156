"""A Slurm node update through the control plane's proxy, ``POST /slurm/vX/node/NAME``, as
SchedMD's OpenAPI spec and slurmctld take it, answered by the simulator as slurmrestd does:
RESUME returns a drained or down node to service, DRAIN takes one out with its reason and
who gave it, and the refusals carry slurmrestd's words and status."""

from __future__ import annotations

import json

import pytest

from bot.vertex.client import VertexClient
from bot.vertex.slurm import SlurmReader
from handlers.domain.errors import SlurmRefusedError
from handlers.sweep.health import BrokenNode, NodeTrouble, broken_nodes
from tests.conftest import Simulator

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
NODE = "cpu01-cpu-1"


async def broken_here(reader: SlurmReader) -> list[BrokenNode]:
    """The node under test if it is out of service (the demo's cpu01 has another drained)."""
    return [b for b in broken_nodes(await reader.nodes(CPU01)) if b.name == NODE]


async def drained(simulator: Simulator) -> None:
    nodes = {NODE: {"state": ["IDLE", "DRAIN"], "reason": "Xid 79: GPU has fallen off the bus"}}
    await simulator.admin("POST", "nodes", {"cluster": "cpu01", "nodes": nodes})


async def test_resume_returns_a_drained_node_to_service(
    client: VertexClient, simulator: Simulator
) -> None:
    await drained(simulator)
    reader = SlurmReader(vertex=client)
    [broken] = await broken_here(reader)
    assert broken.trouble == NodeTrouble.DRAINED
    await reader.update_node(CPU01, NODE, ["RESUME"])
    assert await broken_here(reader) == []
    [sent] = [
        r
        for r in await simulator.requests(path=":callSlurmRestApi")
        if r["method"] == "POST" and r["body"]["method"] == "HTTP_METHOD_POST"
    ]
    assert sent["body"]["path"] == f"/slurm/v0.0.42/node/{NODE}"
    assert sent["body"]["body"] == {"state": ["RESUME"]}


async def test_drain_takes_a_node_out_with_its_reason_and_who(
    client: VertexClient, simulator: Simulator
) -> None:
    reader = SlurmReader(vertex=client)
    await reader.update_node(CPU01, NODE, ["DRAIN"], "prolog health check failed")
    [broken] = await broken_here(reader)
    assert (broken.name, broken.trouble, broken.reason) == (
        NODE,
        NodeTrouble.DRAINED,
        "prolog health check failed",
    )
    assert broken.by == "clusterbot" and broken.since is not None  # the bot's own account


@pytest.mark.parametrize(
    ("node", "states", "status", "words"),
    [
        (NODE, ["RESUME"], 422, "Invalid node state transition"),  # it is in service
        ("cpu01-gpu-9", ["RESUME"], 422, "Invalid node name specified"),
        (NODE, ["SOMETIMES"], 500, "Data parser unable to parse invalid flag"),
    ],
)
async def test_refusals_carry_slurmrestds_words(
    client: VertexClient,
    simulator: Simulator,
    node: str,
    states: list[str],
    status: int,
    words: str,
) -> None:
    reader = SlurmReader(vertex=client)
    with pytest.raises(SlurmRefusedError) as refused:
        await reader.update_node(CPU01, node, states)
    assert refused.value.status == status
    assert refused.value.reason == f"{words}: Failure to update node {node}"


async def test_the_reply_is_slurmrestds_openapi_resp(simulator: Simulator) -> None:
    """v0.0.42_openapi_resp: meta, errors and warnings, and nothing else."""
    await drained(simulator)
    body = {
        "method": "HTTP_METHOD_POST",
        "path": f"/slurm/v0.0.42/node/{NODE}",
        "body": {"state": ["RESUME"]},
    }
    url = f"{simulator.url}/v1beta1/{CPU01}:callSlurmRestApi"
    async with simulator.session.post(
        url, json=body, headers={"Authorization": "Bearer t"}
    ) as reply:
        answer = await reply.json()
    assert answer["status"] == 200
    assert set(json.loads(answer["body"])) == {"meta", "errors", "warnings"}
