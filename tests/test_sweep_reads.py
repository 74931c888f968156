"""What a sweep asks Slurm of a running cluster, counted in the stand-in's request log: its
nodes first, and its queue only where the nodes do not already show it busy, or where a
broken node may hold jobs up. A busy, healthy cluster costs one call; no cluster's
idleness or health is judged on less than it needs."""

from __future__ import annotations

from bot.vertex.client import VertexClient
from bot.vertex.slurm import SlurmReader
from handlers.costs import PriceBook
from handlers.sweep.observe import ActivityObserver, Swept
from handlers.sweep.rules import Observation
from tests.conftest import Simulator

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
H = 3600.0
# the demo's cpu01 has one node an administrator drained for an ECC error: healed here
HEALED = {"cpu01-cpu-3": {"state": ["IDLE"], "reason": ""}}


async def observe(client: VertexClient, simulator: Simulator) -> tuple[Observation, list[str]]:
    """One observation of cpu01, and the Slurm resources it read, once the reader knows the
    cluster's data parser (as it does from the database after a first sweep)."""
    reader = SlurmReader(vertex=client)
    await reader.get(CPU01, "partitions/", {})
    before = len(await simulator.requests(path=":callSlurmRestApi"))
    wall = simulator.clock.wall().timestamp
    observer = ActivityObserver(reader, lambda: wall(), 4, 2 * H)
    swept = Swept.of(await client.get_cluster(CPU01), PriceBook.with_overrides())
    seen = await observer.observe(swept, set())
    asked = (await simulator.requests(path=":callSlurmRestApi"))[before:]
    return seen, [str(r["body"]["path"]).split("/", 3)[3] for r in asked]


async def test_a_busy_healthy_cluster_is_read_in_one_call(
    client: VertexClient, simulator: Simulator
) -> None:
    await simulator.admin("POST", "nodes", {"cluster": "cpu01", "nodes": HEALED})
    simulator.state.set_jobs("cpu01", {"jobs": [{"job_id": 7, "node_count": 3}]})
    seen, asked = await observe(client, simulator)
    assert asked == ["nodes/"]
    assert seen.busy_reason() == "3 Slurm nodes allocated to jobs"
    assert not seen.jobs_read and not seen.jobs_hidden  # not read is not hidden
    assert seen.health is not None and not seen.health.nodes  # its health was judged


async def test_a_quiet_cluster_has_its_queue_read_too(
    client: VertexClient, simulator: Simulator
) -> None:
    """Idle nodes do not prove a cluster idle: a pending job that can start is demand."""
    await simulator.admin("POST", "nodes", {"cluster": "cpu01", "nodes": HEALED})
    simulator.state.set_jobs(
        "cpu01", {"jobs": [{"job_id": 8, "job_state": "PENDING", "state_reason": "Priority"}]}
    )
    seen, asked = await observe(client, simulator)
    assert asked == ["nodes/", "jobs/"]
    assert seen.jobs_read and seen.pending_jobs == 1
    assert seen.busy_reason() == "0 running and 1 pending Slurm jobs"


async def test_broken_nodes_have_the_queue_read_for_the_jobs_they_hold_up(
    client: VertexClient, simulator: Simulator
) -> None:
    simulator.state.set_jobs("cpu01", {"jobs": [{"job_id": 7, "node_count": 3}]})
    seen, asked = await observe(client, simulator)  # cpu01-cpu-3 is drained
    assert asked == ["nodes/", "jobs/"]
    assert seen.jobs_read and seen.running_jobs == 1
    assert seen.health is not None and [n.name for n in seen.health.nodes] == ["cpu01-cpu-3"]


async def test_hidden_jobs_are_still_told_when_the_queue_was_read(
    client: VertexClient, simulator: Simulator
) -> None:
    """PrivateData hides other users' jobs: a broken node has the queue read, it shows
    nothing, and the allocated nodes are reported as hidden jobs, as before."""
    bobs = {"job_id": 7, "node_count": 2, "user_name": "bob"}
    simulator.state.set_jobs("cpu01", {"jobs": [bobs]})
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "private_jobs": True})
    seen, asked = await observe(client, simulator)
    assert asked == ["nodes/", "jobs/"]
    assert seen.jobs_read and seen.jobs_hidden
    assert "hidden from its account" in (seen.busy_reason() or "")
