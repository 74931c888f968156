"""Slurm read through the control plane's proxy as manage-clusters-slurm documents it: the
data parser found newest first and kept in the database, a short deadline when Slurm is
unreachable, nodes read so that hidden jobs cannot make a busy cluster look idle, and the
simulator answering as the real slurmrestd captures do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.store.store import Store
from bot.vertex.client import VertexClient
from bot.vertex.slurm import READABLE_VERSIONS, SlurmReader
from handlers.domain.errors import SlurmUnreadableError
from handlers.sweep.rules import node_census, queue_demand
from tests.conftest import RecordedSleeps, Simulator

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
CAPTURES = Path(__file__).parent / "fixtures" / "slurmrestd"


def _paths(requests: list[dict[str, object]]) -> list[str]:
    return [str(r["body"]["path"]) for r in requests]  # type: ignore[index]


async def test_the_version_is_found_newest_first_then_kept(
    client: VertexClient, simulator: Simulator, tmp_path: Path
) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": "25.05"})
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path}/bot.db")
    await store.migrate()
    reader = SlurmReader(vertex=client, book=store)
    await reader.jobs(CPU01)
    assert _paths(await simulator.requests(path=":callSlurmRestApi")) == [
        "/slurm/v0.0.45/jobs/",  # slurmrestd's text 404: 25.05 ships v0.0.40 to v0.0.43
        "/slurm/v0.0.44/jobs/",
        "/slurm/v0.0.43/jobs/",
    ]
    assert await store.slurm_versions() == {CPU01: "v0.0.43"}
    again = SlurmReader(vertex=client, book=store)  # another replica, or the next sweep --once
    await again.nodes(CPU01)
    assert _paths(await simulator.requests(path=":callSlurmRestApi"))[-1:] == [
        "/slurm/v0.0.43/nodes/"
    ]
    assert len(await simulator.requests(path=":callSlurmRestApi")) == 4
    await store.close()


async def test_an_upgraded_cluster_is_found_again(
    client: VertexClient, simulator: Simulator
) -> None:
    reader = SlurmReader(vertex=client)
    reader.known[CPU01] = "v0.0.40"
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": "25.11"})
    await reader.jobs(CPU01)
    assert reader.known[CPU01] == "v0.0.44"


async def test_a_pinned_version_is_the_only_one_asked(
    client: VertexClient, simulator: Simulator
) -> None:
    reader = SlurmReader(vertex=client, pinned="v0.0.42")
    await reader.jobs(CPU01)
    assert _paths(await simulator.requests(path=":callSlurmRestApi")) == ["/slurm/v0.0.42/jobs/"]
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": "26.05"})
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "versions": ["v0.0.45"]})
    with pytest.raises(SlurmUnreadableError) as caught:
        await reader.jobs(CPU01)
    assert "does not serve v0.0.42, which CLUSTERBOT_SLURM_API_VERSION pins" in caught.value.reason


async def test_no_served_version_is_explained(client: VertexClient, simulator: Simulator) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "versions": ["v0.0.39"]})
    with pytest.raises(SlurmUnreadableError) as caught:
        await SlurmReader(vertex=client).jobs(CPU01)
    assert "CLUSTERBOT_SLURM_API_VERSION" in caught.value.reason
    assert len(await simulator.requests(path=":callSlurmRestApi")) == len(READABLE_VERSIONS)


async def test_unreachable_slurm_gives_up_within_the_short_deadline(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "down": True})
    with pytest.raises(SlurmUnreadableError) as caught:
        await SlurmReader(vertex=client, deadline=10.0).jobs(CPU01)
    assert "Slurm could not be reached" in caught.value.reason
    assert "UNAVAILABLE" in caught.value.reason
    assert sum(sleeps.waits) <= 10.0  # not the 120 s a read may otherwise retry for


async def test_hidden_jobs_still_show_as_allocated_nodes(
    client: VertexClient, simulator: Simulator
) -> None:
    simulator.state.set_jobs("cpu01", {"jobs": [{"user_name": "bob", "node_count": 2}]})
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "private_jobs": True})
    reader = SlurmReader(vertex=client)
    assert await reader.jobs(CPU01) == []  # PrivateData hides them
    census = node_census(await reader.nodes(CPU01))
    assert (census.working, census.total) == (2, 4)


async def test_the_simulator_speaks_like_the_captures(
    client: VertexClient, simulator: Simulator
) -> None:
    """Whole objects with the captured keys, hostlists of its own node names, the release's
    data parser in ``meta``, and slurmrestd's text 404."""
    simulator.state.set_jobs(
        "cpu01",
        {"jobs": [{"job_id": 7, "node_count": 3}, {"job_id": 8, "job_state": "PENDING"}]},
    )
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": "25.11"})
    for version, capture in (("v0.0.42", "24.11_v0.0.42"), ("v0.0.44", "25.11_v0.0.44")):
        real = json.loads(
            json.loads((CAPTURES / f"slurmweb_{capture}_slurm-jobs.json").read_text())["body"]
        )
        real_nodes = json.loads(
            json.loads((CAPTURES / f"slurmweb_{capture}_slurm-nodes.json").read_text())["body"]
        )
        jobs = json.loads((await client.call_slurm_rest_api(CPU01, f"/slurm/{version}/jobs/")).body)
        nodes = json.loads(
            (await client.call_slurm_rest_api(CPU01, f"/slurm/{version}/nodes/")).body
        )
        assert set(jobs) == set(real) and set(nodes) == set(real_nodes)
        assert all(set(j) == set(real["jobs"][0]) for j in jobs["jobs"])
        assert all(set(n) == set(real_nodes["nodes"][0]) for n in nodes["nodes"])
        assert jobs["meta"]["plugin"]["data_parser"] == f"data_parser/{version}"
        assert jobs["meta"]["slurm"]["release"] == "25.11.0"
        running, pending = jobs["jobs"]
        assert running["nodes"] == "cpu01-cpu-[0-2]" and running["batch_host"] == "cpu01-cpu-0"
        allocated = [n["name"] for n in nodes["nodes"] if n["state"] == ["ALLOCATED"]]
        assert allocated == ["cpu01-cpu-0", "cpu01-cpu-1", "cpu01-cpu-2"]
        assert pending["nodes"] == "" and pending["start_time"]["number"] > 0  # a forecast
    missing = await client.call_slurm_rest_api(CPU01, "/slurm/v0.0.40/jobs/")
    real_404 = json.loads((CAPTURES / "slurmweb_25.11_v0.0.42_slurm-not-found.json").read_text())
    assert (missing.status, missing.body) == (404, real_404["body"])


async def test_held_and_future_jobs_are_served_as_slurm_lists_them(
    client: VertexClient, simulator: Simulator
) -> None:
    now = simulator.clock.wall().timestamp()
    simulator.state.set_jobs(
        "cpu01",
        {
            "jobs": [
                {"job_id": 1, "user_name": "dana", "job_state": "PENDING", "hold": True},
                {"job_id": 2, "user_name": "dana", "job_state": ["PENDING", "REQUEUE_HOLD"]},
                {
                    "job_id": 3,
                    "user_name": "erin",
                    "job_state": "PENDING",
                    "begin_time": now + 86_400,
                },
                {
                    "job_id": 4,
                    "job_state": "PENDING",
                    "state_reason": "DependencyNeverSatisfied",
                },
            ]
        },
    )
    jobs = await SlurmReader(vertex=client).jobs(CPU01)
    assert [(j.reason, j.hold, j.priority) for j in jobs[:2]] == [
        ("JobHeldUser", True, 0),
        ("JobHeldUser", True, 0),
    ]
    assert jobs[2].reason == "BeginTime" and jobs[2].eligible == int(now + 86_400)
    demand = queue_demand(jobs, now, 7200)
    assert (demand.running, demand.pending) == (0, 0)
    assert [(g.kind, g.user, g.count) for g in demand.stalled] == [
        ("held", "dana", 1),
        ("held", "dana", 1),
        ("later", "erin", 1),
        ("never", "researcher", 1),
    ]


async def test_node_states_are_set_per_node(client: VertexClient, simulator: Simulator) -> None:
    await simulator.admin(
        "POST",
        "nodes",
        {
            "cluster": "cpu01",
            "nodes": {
                "cpu01-cpu-0": {"state": ["IDLE", "DRAIN"], "reason": "ECC memory error"},
                "cpu01-cpu-1": {"state": "DOWN", "reason": "CPU dead"},
                "cpu01-cpu-3": None,  # the demo's drained node, cleared
            },
        },
    )
    simulator.state.set_jobs("cpu01", {"jobs": [{"node_count": 1}]})
    nodes = {n.name: n for n in await SlurmReader(vertex=client).nodes(CPU01)}
    assert nodes["cpu01-cpu-0"].states == {"IDLE", "DRAIN"}
    assert nodes["cpu01-cpu-0"].reason == "ECC memory error"
    assert nodes["cpu01-cpu-2"].states == {"ALLOCATED"}  # the job went to a usable node
    census = node_census(nodes.values())
    assert census.out_of_service == (("down", "CPU dead", 1), ("drained", "ECC memory error", 1))
    async with simulator.session.post(
        f"{simulator.url}/_sim/nodes",
        json={"cluster": "cpu01", "nodes": {"x": {"state": "ASLEEP"}}},
    ) as refused:
        assert refused.status == 400 and "ASLEEP" in await refused.text()


async def test_queue_scaled_pool_grows_only_for_jobs_that_can_run(
    client: VertexClient, simulator: Simulator
) -> None:
    """A 0:2 pool has nodes only while jobs that can start ask for them (Flex Start docs,
    dynamic nodes; Slurm's power_save guide: nodes resume for the jobs allocated to them)."""
    cluster = simulator.state.clusters[CPU01]
    pool = next(p for p in cluster["nodePools"] if p["id"] == "cpu")
    pool["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 2}
    simulator.state.resettle(CPU01)
    read = await client.get_cluster(CPU01)
    assert read.nodes(read.pool("cpu")) == 0  # type: ignore[arg-type]
    held = {"job_state": "PENDING", "node_count": 2, "hold": True}
    simulator.state.set_jobs("cpu01", {"jobs": [held]})
    read = await client.get_cluster(CPU01)
    assert read.nodes(read.pool("cpu")) == 0  # type: ignore[arg-type]
    simulator.state.set_jobs("cpu01", {"jobs": [{"job_state": "PENDING", "node_count": 2}]})
    read = await client.get_cluster(CPU01)
    assert read.nodes(read.pool("cpu")) == 2  # type: ignore[arg-type]
