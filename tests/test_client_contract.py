"""The client against the simulator over loopback HTTP: reads, paging, the operation lifecycle."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from handlers.domain.errors import NotFoundError, UnauthenticatedError
from handlers.domain.models import Cluster
from handlers.domain.names import Target
from tests.conftest import Simulator
from tests.support.factories import cluster_doc

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
US = Target("demo-project", "us-central1")
EU = Target("demo-project", "europe-west4")


def resized(cluster: Cluster, pool_id: str, nodes: int) -> Cluster:
    changed = cluster.model_copy(deep=True)
    pool = changed.pool(pool_id)
    assert pool is not None and pool.scaling_spec is not None
    pool.scaling_spec.min_node_count = nodes
    pool.scaling_spec.max_node_count = nodes
    return changed


async def test_list_returns_demo_clusters(client: VertexClient) -> None:
    clusters = await client.list_clusters(US)
    assert sorted(c.cluster_id for c in clusters) == ["cpu01", "train01"]
    train = next(c for c in clusters if c.cluster_id == "train01")
    pool = train.pool("a4")
    assert pool is not None and pool.machine_spec is not None
    assert pool.machine_spec.accelerator_type == "NVIDIA_B200"
    assert pool.min_nodes == 2
    assert train.login_pool_id == "login"
    assert [p.id for p in train.compute_pools()] == ["a4"]


async def test_paging_follows_every_page(client: VertexClient, simulator: Simulator) -> None:
    simulator.state.load_fixtures(
        {"clusters": [cluster_doc(cluster_id=f"page{i:02d}") for i in range(7)]}
    )
    await simulator.admin("POST", "config", {"page_max": 2})
    clusters = await client.list_clusters(US)
    assert len(clusters) == 9  # the two demo clusters and seven more
    assert len({c.name for c in clusters}) == 9
    lists = await simulator.requests(method="GET", path="/modelDevelopmentClusters")
    assert len(lists) == 5  # ceil(9 / 2) pages
    assert "pageToken" not in lists[0]["query"]
    assert all("pageToken" in r["query"] for r in lists[1:])


async def test_either_list_key_is_accepted(client: VertexClient, simulator: Simulator) -> None:
    await simulator.admin("POST", "config", {"list_key": "clusters"})
    assert len(await client.list_clusters(US)) == 2


async def test_empty_target_lists_nothing(client: VertexClient) -> None:
    assert await client.list_clusters(Target("other-project", "asia-east1")) == []


async def test_list_targets_concurrently(client: VertexClient, simulator: Simulator) -> None:
    targets = [Target(f"team-{n}-project", "us-east5") for n in range(6)]
    simulator.state.load_fixtures(
        {
            "clusters": [
                cluster_doc(t.project, t.region, f"c{n}{k}")
                for n, t in enumerate(targets)
                for k in range(3)
            ]
        }
    )
    # Each list call waits 100 ms at the server, so overlapping calls are visible there.
    await simulator.fault(method="GET", path="modelDevelopmentClusters$", latency_ms=100)
    await simulator.admin("DELETE", "requests")
    listings = await client.list_targets([*targets, US, EU])
    assert [listing.target for listing in listings] == [*targets, US, EU]
    assert all(listing.error is None for listing in listings)
    assert sum(len(listing.clusters) for listing in listings) == 6 * 3 + 3
    peak = (await simulator.admin("GET", "requests"))["peak_in_flight"]
    assert peak == 8  # every target at once: concurrency 8 bounds it


async def test_list_targets_respects_the_bound(simulator: Simulator) -> None:
    targets = [Target(f"team-{n}-project", "us-east5") for n in range(6)]
    await simulator.fault(method="GET", latency_ms=50)
    async with VertexClient(StaticToken("t"), base_url=simulator.url, concurrency=2) as vertex:
        listings = await vertex.list_targets(targets)
    assert len(listings) == 6
    assert (await simulator.admin("GET", "requests"))["peak_in_flight"] == 2


async def test_one_failing_target_does_not_hide_others(
    client: VertexClient, simulator: Simulator
) -> None:
    await simulator.fault(path="locations/europe-west4/", status=403, message="no access")
    us, eu = await client.list_targets([US, EU])
    assert len(us.clusters) == 2 and us.error is None
    assert eu.clusters == [] and eu.error is not None
    assert eu.error.status == "PERMISSION_DENIED"


async def test_get_and_unknown_cluster(client: VertexClient) -> None:
    cluster = await client.get_cluster(TRAIN01)
    assert cluster.name == TRAIN01 and cluster.state == "RUNNING"
    assert cluster.slurm.default_partition_id == "a4"
    with pytest.raises(NotFoundError) as caught:
        await client.get_cluster(TRAIN01.replace("train01", "nothere"))
    assert "nothere" in str(caught.value)


async def test_missing_token_is_unauthenticated(simulator: Simulator) -> None:
    async with VertexClient(StaticToken(""), base_url=simulator.url) as vertex:
        with pytest.raises(UnauthenticatedError):
            await vertex.get_cluster(TRAIN01)
    async with simulator.session.get(f"{simulator.url}/v1beta1/{TRAIN01}") as reply:
        assert reply.status == 401
        body = await reply.json()
    assert body["error"]["status"] == "UNAUTHENTICATED" and body["error"]["code"] == 401


async def test_required_token_is_checked(simulator: Simulator) -> None:
    simulator.state.required_token = "right"
    async with VertexClient(StaticToken("wrong"), base_url=simulator.url) as vertex:
        with pytest.raises(UnauthenticatedError):
            await vertex.get_cluster(TRAIN01)
    async with VertexClient(StaticToken("right"), base_url=simulator.url) as vertex:
        assert (await vertex.get_cluster(TRAIN01)).cluster_id == "train01"


async def test_update_lifecycle(client: VertexClient, simulator: Simulator) -> None:
    before = await client.get_cluster(TRAIN01)
    operation = await client.update_cluster(resized(before, "a4", 3), ["node_pools"])
    assert operation.name.startswith("projects/123456789012/locations/us-central1/operations/")
    assert not operation.done and operation.progress_message
    raw = await simulator.session.get(
        f"{simulator.url}/v1/{operation.name}", headers={"Authorization": "Bearer t"}
    )
    assert "done" not in await raw.json()  # absent, not false, while running
    during = await client.get_cluster(TRAIN01)
    assert during.state == "UPDATING"
    preparing = [n for n in during.cluster_status.nodes_status or [] if n.node_state == "PREPARING"]
    assert [n.instance_name for n in preparing] == ["train01-a4-2"]

    simulator.clock.advance(10)
    halfway = await client.get_operation(operation.name)
    assert not halfway.done and "50%" in (halfway.progress_message or "")

    simulator.clock.advance(11)
    finished = await client.get_operation(operation.name)
    assert finished.succeeded and finished.response is not None
    assert finished.metadata is not None
    assert finished.metadata["@type"].endswith("UpdateModelDevelopmentClusterOperationMetadata")
    after = await client.get_cluster(TRAIN01)
    assert after.state == "RUNNING"
    pool = after.pool("a4")
    assert pool is not None and pool.min_nodes == 3 and pool.max_nodes == 3
    nodes = [n for n in after.cluster_status.nodes_status or [] if n.node_pool_id == "a4"]
    assert len(nodes) == 3 and {n.node_state for n in nodes} == {"RUNNING"}


async def test_update_preserves_fields_the_bot_does_not_model(
    client: VertexClient, simulator: Simulator
) -> None:
    simulator.state.clusters[CPU01]["nodePools"][0]["futureField"] = {"keep": [1, 2]}
    simulator.state.clusters[CPU01]["someNewTopLevel"] = "stay"
    cluster = await client.get_cluster(CPU01)
    await client.update_cluster(resized(cluster, "cpu", 0), ["node_pools"])
    patch = (await simulator.requests(method="PATCH"))[0]
    assert patch["query"] == {"updateMask": "node_pools"}
    stored = simulator.state.clusters[CPU01]
    cpu = next(p for p in stored["nodePools"] if p["id"] == "cpu")
    assert cpu["futureField"] == {"keep": [1, 2]}
    assert cpu["scalingSpec"] == {"minNodeCount": 0, "maxNodeCount": 0}
    assert stored["someNewTopLevel"] == "stay"


async def test_mask_limits_what_changes(client: VertexClient, simulator: Simulator) -> None:
    cluster = await client.get_cluster(CPU01)
    changed = resized(cluster, "cpu", 1)
    changed.display_name = "renamed"
    await client.update_cluster(changed, ["display_name"])
    stored = simulator.state.clusters[CPU01]
    assert stored["displayName"] == "renamed"
    assert (
        next(p for p in stored["nodePools"] if p["id"] == "cpu")["scalingSpec"]["minNodeCount"] == 4
    )  # not in the mask


async def test_repeated_fields_are_replaced_whole(
    client: VertexClient, simulator: Simulator
) -> None:
    cluster = await client.get_cluster(TRAIN01)
    changed = cluster.model_copy(deep=True)
    changed.slurm.prolog_bash_scripts = ["echo one", "echo two"]
    await client.update_cluster(changed, ["orchestrator_spec.slurm_spec.prolog_bash_scripts"])
    simulator.clock.advance(30)
    after = await client.get_cluster(TRAIN01)
    assert after.slurm.prolog_bash_scripts == ["echo one", "echo two"]


async def test_delete_then_not_found(client: VertexClient, simulator: Simulator) -> None:
    operation = await client.delete_cluster(CPU01)
    assert (await client.get_cluster(CPU01)).state == "STOPPING"
    simulator.clock.advance(31)
    done = await client.get_operation(operation.name)
    assert done.succeeded
    assert done.response == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    with pytest.raises(NotFoundError):
        await client.get_cluster(CPU01)
    assert [c.cluster_id for c in await client.list_clusters(US)] == ["train01"]


async def test_create_accepts_snake_case_and_provisions(
    client: VertexClient, simulator: Simulator
) -> None:
    body = cluster_doc(cluster_id="new01", snake=True)
    body.pop("name")
    async with simulator.session.post(
        f"{simulator.url}/v1beta1/projects/demo-project/locations/us-central1/"
        "modelDevelopmentClusters?model_development_cluster_id=new01",
        json=body,
        headers={"Authorization": "Bearer t"},
    ) as reply:
        assert reply.status == 200, await reply.text()
        operation = await reply.json()
    created = await client.get_cluster(TRAIN01.replace("train01", "new01"))
    assert created.state == "PROVISIONING"
    assert created.pool("gpu") is not None
    simulator.clock.advance(31)
    assert (await client.get_operation(operation["name"])).succeeded
    ready = await client.get_cluster(TRAIN01.replace("train01", "new01"))
    assert ready.state == "RUNNING"
    assert len(ready.cluster_status.nodes_status or []) == 3


async def test_create_through_the_client(client: VertexClient, simulator: Simulator) -> None:
    cluster = Cluster.model_validate(cluster_doc(cluster_id="made01"))
    operation = await client.create_cluster(US, "made01", cluster)
    assert not operation.done
    assert (await simulator.requests(method="POST"))[0]["query"] == {
        "modelDevelopmentClusterId": "made01"
    }


async def test_injected_operation_failure(client: VertexClient, simulator: Simulator) -> None:
    await simulator.fault(
        method="PATCH", operation_error={"code": 9, "message": "reservation b200-res is full"}
    )
    before = await client.get_cluster(TRAIN01)
    operation = await client.update_cluster(resized(before, "a4", 4), ["node_pools"])
    simulator.clock.advance(21)
    finished = await client.get_operation(operation.name)
    assert finished.done and not finished.succeeded
    assert finished.error is not None and finished.error.code == 9
    assert finished.error.message == "reservation b200-res is full"
    after = await client.get_cluster(TRAIN01)
    assert after.state == "RUNNING"
    pool = after.pool("a4")
    assert pool is not None and pool.min_nodes == 2  # rolled back


async def test_slurm_jobs_through_the_proxy(client: VertexClient, simulator: Simulator) -> None:
    reply = await client.call_slurm_rest_api(TRAIN01, "/slurm/v0.0.42/jobs/")
    assert reply.status == 200
    jobs = json.loads(reply.body)["jobs"]
    assert sorted(j["job_state"][0] for j in jobs) == ["PENDING", "RUNNING"]
    listed = json.loads((await client.call_slurm_rest_api(CPU01, "/slurm/v0.0.42/jobs/")).body)
    held, waiting = listed["jobs"]  # the demo's held job, and one waiting for a reservation
    assert (held["hold"], held["state_reason"]) == (True, "JobHeldUser")
    assert (waiting["state_reason"], waiting["resv_name"]) == ("Reservation", "quarter-end")

    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "running": 2, "pending": 3})
    body = json.loads((await client.call_slurm_rest_api(CPU01, "/slurm/v0.0.42/jobs/")).body)
    states = [j["job_state"] for j in body["jobs"]]
    assert states.count(["RUNNING"]) == 2 and states.count(["PENDING"]) == 3
    assert body["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42"

    missing = await client.call_slurm_rest_api(CPU01, "/slurm/v0.0.42/nodes/nowhere")
    assert missing.status == 404 and missing.body.startswith("Unable find requested URL")
    request = (await simulator.requests(method="POST", path=":callSlurmRestApi"))[-1]
    assert request["path"].endswith("cpu01:callSlurmRestApi")


async def test_concurrent_reads_share_one_client(client: VertexClient) -> None:
    results = await asyncio.gather(*(client.get_cluster(TRAIN01) for _ in range(20)))
    assert {r.name for r in results} == {TRAIN01}


async def test_operation_not_found(client: VertexClient) -> None:
    with pytest.raises(NotFoundError):
        await client.get_operation("projects/123456789012/locations/us-central1/operations/999")


def test_cluster_copy_is_independent() -> None:
    cluster = Cluster.model_validate(cluster_doc())
    copied = resized(cluster, "gpu", 5)
    assert cluster.pool("gpu").min_nodes == 2  # type: ignore[union-attr]
    assert copied.pool("gpu").min_nodes == 5  # type: ignore[union-attr]
    assert copy.deepcopy(cluster) == cluster
