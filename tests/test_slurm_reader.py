"""Slurm read through the control plane's proxy as manage-clusters-slurm documents it: the
data parser version found and remembered per cluster, a short deadline when Slurm is
unreachable, and nodes read so that hidden jobs cannot make a busy cluster look idle."""

from __future__ import annotations

import pytest

from bot.vertex.client import VertexClient
from bot.vertex.errors import SlurmUnreadableError
from bot.vertex.slurm import SlurmReader
from tests.conftest import RecordedSleeps, Simulator

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"


async def test_get_carries_no_body_and_uses_the_docs_version(
    client: VertexClient, simulator: Simulator
) -> None:
    reader = SlurmReader(client)
    activity = await reader.activity(TRAIN01)
    assert (activity.running_jobs, activity.pending_jobs) == (1, 1)
    assert activity.version == "v0.0.42"
    assert reader.known[TRAIN01] == "v0.0.42"


async def test_a_refused_version_is_replaced_and_remembered(
    client: VertexClient, simulator: Simulator
) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "versions": ["v0.0.40", "v0.0.41"]})
    reader = SlurmReader(client)
    activity = await reader.activity(CPU01)
    assert activity.version == "v0.0.41"
    first = len(await simulator.requests(path=":callSlurmRestApi"))
    assert first == 3  # jobs at v0.0.42 (slurmrestd's 404), jobs and nodes at v0.0.41
    await reader.activity(CPU01)
    assert len(await simulator.requests(path=":callSlurmRestApi")) == first + 2  # no retry


async def test_no_served_version_is_explained(client: VertexClient, simulator: Simulator) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "versions": ["v0.0.39"]})
    with pytest.raises(SlurmUnreadableError) as caught:
        await SlurmReader(client).activity(CPU01)
    assert "CLUSTERBOT_SLURM_API_VERSION" in caught.value.reason


async def test_unreachable_slurm_gives_up_within_the_short_deadline(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "down": True})
    with pytest.raises(SlurmUnreadableError) as caught:
        await SlurmReader(client, deadline=10.0).activity(CPU01)
    assert "Slurm could not be reached" in caught.value.reason
    assert "UNAVAILABLE" in caught.value.reason
    assert sum(sleeps.waits) <= 10.0  # not the 120 s a read may otherwise retry for


async def test_hidden_jobs_still_show_as_allocated_nodes(
    client: VertexClient, simulator: Simulator
) -> None:
    simulator.state.set_jobs("cpu01", {"jobs": [{"user_name": "bob", "node_count": 2}]})
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "private_jobs": True})
    activity = await SlurmReader(client).activity(CPU01)
    assert activity.running_jobs == 0 and activity.pending_jobs == 0  # PrivateData hides them
    assert activity.busy_nodes == 2 and activity.nodes == 4
    assert activity.jobs_hidden


async def test_queue_scaled_pool_follows_the_jobs(
    client: VertexClient, simulator: Simulator
) -> None:
    """A 0:2 pool has nodes only while jobs ask for them (Flex Start docs, dynamic nodes)."""
    cluster = simulator.state.clusters[CPU01]
    pool = next(p for p in cluster["nodePools"] if p["id"] == "cpu")
    pool["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 2}
    simulator.state.resettle(CPU01)
    read = await client.get_cluster(CPU01)
    assert read.nodes(read.pool("cpu")) == 0  # type: ignore[arg-type]
    simulator.state.set_jobs("cpu01", {"jobs": [{"job_state": "PENDING", "node_count": 2}]})
    read = await client.get_cluster(CPU01)
    assert read.nodes(read.pool("cpu")) == 2  # type: ignore[arg-type]
