"""The code against shapes nobody on the project wrote: every create body of the
training-cluster docs through the simulator and the models, real-shaped replies through a
round-trip PATCH, a sweep over Filestore, Lustre, Flex Start and reservation pools, and the
Slurm Job API requests the docs show. Sources are in each fixture (tests/fixtures/)."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app import ClusterbotService
from bot.settings import Settings
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.summary import ClusterSummary
from handlers.costs import PriceBook
from handlers.domain.errors import MalformedReplyError
from handlers.domain.facts import ClusterFacts
from handlers.domain.models import Cluster
from handlers.domain.names import Target
from handlers.domain.operations import Operation
from handlers.domain.pools import ProvisioningModel
from handlers.policy import Policy
from handlers.sweep.rules import Status
from tests.conftest import RecordedSleeps, Simulator

FIXTURES = Path(__file__).with_name("fixtures") / "docs"
CREATES = sorted(FIXTURES.glob("create_*.json"))
US = Target("demo-project", "us-central1")
IDS = {  # cluster ids: 1-10 lowercase letters and digits
    "create_cpu_advanced_slurm": "cpuslurm",
    "create_cpu_only": "cpuonly",
    "create_flex_start": "flexstart",
    "create_gpu_filestore": "gpufs",
    "create_gpu_filestore_lustre": "gpulustre",
    "create_gpu_startup_script": "gpustart",
}


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name).read_text()))


async def create(simulator: Simulator, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST the docs' body as the docs do (snake_case, gcurl -d @file), and let it finish."""
    url = (
        f"{simulator.url}/v1beta1/projects/demo-project/locations/us-central1/"
        f"modelDevelopmentClusters?model_development_cluster_id={cluster_id}"
    )
    async with simulator.session.post(
        url, json=body, headers={"Authorization": "Bearer t"}
    ) as reply:
        answer = await reply.json()
        assert reply.status == 200, answer
    simulator.clock.advance(61)
    return dict(answer)


@pytest.mark.parametrize("path", CREATES, ids=[p.stem for p in CREATES])
async def test_every_create_body_in_the_docs_is_accepted_read_and_patched(
    path: Path, client: VertexClient, simulator: Simulator
) -> None:
    cluster_id = IDS[path.stem]
    answer = await create(simulator, cluster_id, fixture(path.name)["body"])
    operation = Operation.model_validate(answer)
    assert not operation.done and operation.metadata is not None
    cluster = await client.get_cluster(f"{US.parent}/modelDevelopmentClusters/{cluster_id}")
    assert cluster.state == "RUNNING"
    for pool in cluster.node_pools:
        for mount in [*(pool.filestores or []), *(pool.lustres or [])]:
            assert isinstance(mount, str) and mount.startswith("projects/")
    # the login pool has its node; every pool is counted from the nodes that exist
    login = cluster.pool("login")
    assert login is not None and cluster.nodes(login) == 1
    # a read-modify-PATCH of the whole resource goes through unchanged
    before = simulator.state.clusters[cluster.name or ""]
    patched = await client.update_cluster(cluster, ["node_pools"])
    assert patched.name
    simulator.clock.advance(30)
    after = simulator.state.clusters[cluster.name or ""]
    assert {p["id"]: p for p in after["nodePools"]} == {p["id"]: p for p in before["nodePools"]}


async def test_replies_are_proto3_and_pools_come_back_in_another_order(
    client: VertexClient, simulator: Simulator
) -> None:
    await create(simulator, "flexvm", fixture("create_flex_start.json")["body"])
    name = f"{US.parent}/modelDevelopmentClusters/flexvm"
    async with simulator.session.get(
        f"{simulator.url}/v1beta1/{name}", headers={"Authorization": "Bearer t"}
    ) as reply:
        raw = await reply.json()
    flex = next(p for p in raw["nodePools"] if p["id"] == "a3u")
    assert "minNodeCount" not in flex["scalingSpec"]  # zero is left out
    assert [p["id"] for p in raw["nodePools"]] == ["a3u", "login"]  # sent as login, a3u
    cluster = Cluster.model_validate(raw)
    pool = cluster.pool("a3u")
    assert pool is not None and pool.min_nodes == 0 and pool.max_nodes == 2
    assert pool.provisioning_model == ProvisioningModel.FLEX_START
    assert pool.flex_start_max_duration == "604800s" and cluster.nodes(pool) == 0
    assert pool.scales_with_queue and pool.bounds == "0:2"


async def test_the_docs_update_body_resizes_a_cpu_cluster(
    client: VertexClient, simulator: Simulator
) -> None:
    await create(simulator, "cpuonly", fixture("create_cpu_only.json")["body"])
    name = f"{US.parent}/modelDevelopmentClusters/cpuonly"
    body = fixture("update_cpu_only.json")["body"]
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{name}",
        params={"updateMask": "node_pools", "updateMode": "USER_AND_SERVICE"},
        json=body,
        headers={"Authorization": "Bearer t"},
    ) as reply:
        assert reply.status == 200, await reply.text()
    simulator.clock.advance(30)
    cluster = await client.get_cluster(name)
    cpu = cluster.pool("cpu")
    assert cpu is not None and (cpu.min_nodes, cpu.max_nodes) == (2, 2)
    assert cluster.nodes(cpu) == 2


def test_the_operation_a_create_answers_with() -> None:
    operation = Operation.model_validate(fixture("operation_create.json")["body"])
    assert not operation.done  # "done" is absent while it runs
    assert operation.progress_message and "provisioning" in operation.progress_message
    assert operation.create_time is not None and operation.create_time.year == 2025


async def test_slurm_job_api_requests_from_the_docs(
    client: VertexClient, simulator: Simulator
) -> None:
    requests = fixture("slurm_proxy.json")["requests"]
    train01 = f"{US.parent}/modelDevelopmentClusters/train01"
    listed = await client.call_slurm_rest_api(train01, requests["list_jobs"]["path"])
    assert listed.status == 200 and len(json.loads(listed.body)["jobs"]) == 2
    sent = (await simulator.requests(path=":callSlurmRestApi"))[-1]
    assert sent["status"] == 200
    # job 4101 runs on the demo's train01: GET /job/{id} lists it alone
    status = await client.call_slurm_rest_api(train01, requests["job_status"]["path"])
    assert status.status == 200 and [j["job_id"] for j in json.loads(status.body)["jobs"]] == [4101]
    # a job not in the queue: slurmrestd's JSON 404, as captured, not an API error
    unknown = await client.call_slurm_rest_api(train01, "/slurm/v0.0.42/job/999")
    assert unknown.status == 404
    assert json.loads(unknown.body)["errors"][0]["error"] == "Invalid job id specified"
    submitted = await client.call_slurm_rest_api(
        train01, requests["submit"]["path"], method="POST", body=requests["submit"]["body"]
    )
    assert submitted.status in (200, 404)


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/jobs/", "body": ""}, "Struct"),
        ({"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/jobs/", "body": {}}, "omitted"),
        ({"method": "HTTP_METHOD_POST", "path": "/slurm/v0.0.42/job/submit"}, "required"),
        ({"method": "HTTP_METHOD_GET", "path": "/api/jobs"}, "not a valid Slurm path"),
        ({"method": "GET", "path": "/slurm/v0.0.42/jobs/"}, "HTTP_METHOD_GET"),
    ],
)
async def test_slurm_proxy_refuses_what_the_docs_refuse(
    simulator: Simulator, payload: dict[str, Any], words: str
) -> None:
    url = f"{simulator.url}/v1beta1/{US.parent}/modelDevelopmentClusters/train01:callSlurmRestApi"
    async with simulator.session.post(
        url, json=payload, headers={"Authorization": "Bearer t"}
    ) as reply:
        error = (await reply.json())["error"]
    assert reply.status == 400 and error["status"] == "INVALID_ARGUMENT"
    assert words in error["message"]


async def test_a_cluster_that_cannot_be_read_hides_nothing_else(
    client: VertexClient, simulator: Simulator
) -> None:
    broken = json.loads(
        json.dumps(simulator.state.clusters[f"{US.parent}/modelDevelopmentClusters/cpu01"])
    )
    broken["name"] = f"{US.parent}/modelDevelopmentClusters/odd01"
    broken["nodePools"][0]["filestores"] = [{"name": "an object, not a resource name"}]
    simulator.state.clusters[broken["name"]] = broken
    listing = await client.list_target(US)
    assert sorted(c.cluster_id for c in listing.clusters) == ["cpu01", "train01"]
    [bad] = listing.unreadable
    assert bad.name.endswith("/odd01") and ".filestores.0: Input should be" in bad.problem
    with pytest.raises(MalformedReplyError) as caught:  # a typed error, never a crash
        await client.get_cluster(broken["name"])
    assert "cluster odd01" in str(caught.value) and ".filestores.0" in str(caught.value)


async def test_bad_create_bodies_are_refused_like_the_api(simulator: Simulator) -> None:
    body = fixture("create_gpu_filestore.json")["body"]
    body["node_pools"][1]["provisioning_model"] = "ON_DEMAND"  # and a reservation: refused
    url = (
        f"{simulator.url}/v1beta1/{US.parent}/modelDevelopmentClusters"
        "?model_development_cluster_id=bad01"
    )
    async with simulator.session.post(url, json=body, headers={"Authorization": "Bearer t"}) as r:
        assert r.status == 400
        assert "must not be set for the ON_DEMAND" in (await r.json())["error"]["message"]


@pytest.fixture
async def sweeping(simulator: Simulator, tmp_path: Path) -> AsyncIterator[ClusterbotService]:
    settings = Settings(
        targets=[US],
        vertex_api_url=simulator.url,
        vertex_static_token=SecretStr("t"),
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        vertex_retry_deadline=1.0,
    )
    service = ClusterbotService(
        settings, Policy.model_validate({"idle": {"idle_after_minutes": 1}})
    )
    await service.store.migrate()
    yield service
    await service.vertex.aclose()
    await service.store.close()


async def test_sweep_over_filestore_lustre_flex_start_and_reserved_pools(
    simulator: Simulator, sweeping: ClusterbotService
) -> None:
    for path in CREATES:
        await create(simulator, IDS[path.stem], fixture(path.name)["body"])
    report = await sweeping.core.sweeper.sweep(alerts=False, force=True)
    assert report is not None
    by_id = {e.cluster_id: e for e in report.entries}
    assert len(by_id) == 2 + len(CREATES) and not report.failures
    # Flex Start at 0:2 with no job: no compute node exists, so it is free at once
    assert by_id["flexstart"].status == Status.FREE
    # reserved capacity is paid for: its cost shows, but scaling to zero saves nothing
    reserved = by_id["gpufs"]
    assert reserved.cost_hour and reserved.cost_hour > 200
    assert reserved.freed_hour == 0.0 and reserved.reservations == ("b200-res",)
    cpu = by_id["cpuonly"]
    assert cpu.freed_hour == cpu.cost_hour and cpu.cost_hour


def facts(cluster: ClusterFacts) -> tuple[object, ...]:
    """Everything a listing or a sweep reads of a cluster."""
    return (
        cluster.name,
        cluster.cluster_id,
        cluster.target,
        cluster.state,
        cluster.labels,
        cluster.login_pool_id,
        [p.id for p in cluster.compute_pools()],
        [
            (p.id, p.machine_description, p.bounds, p.reserved, cluster.nodes(p))
            for p in cluster.node_pools
        ],
        cluster.reports_nodes,
        PriceBook.with_overrides().cluster_hour(cluster),
    )


async def test_a_listing_reads_what_the_whole_resource_says(
    client: VertexClient, simulator: Simulator
) -> None:
    for path in CREATES:
        await create(simulator, IDS[path.stem], fixture(path.name)["body"])
    simulator.state.clusters[f"{US.parent}/modelDevelopmentClusters/cpuonly"]["labels"] = {
        "team": "a"
    }
    [whole] = await client.list_targets([US])
    [summary] = await client.list_kept([US], lambda cluster: cluster)
    assert len(whole.clusters) == 2 + len(CREATES) and not whole.unreadable
    assert [facts(c) for c in summary.kept] == [facts(c) for c in whole.clusters]
    # the pages read are not trivial: logins, nodes counted, labels, costs
    assert sum(1 for c in summary.kept if c.login_pool_id and c.reports_nodes) >= len(CREATES)
    assert any(c.labels for c in summary.kept)
    # a pool that cannot be read names its cluster in a summary too; a field a summary does
    # not read (an event) does not hide the cluster from the list
    broken = json.loads(
        json.dumps(simulator.state.clusters[f"{US.parent}/modelDevelopmentClusters/cpu01"])
    )
    broken["name"] = f"{US.parent}/modelDevelopmentClusters/odd01"
    broken["nodePools"][0]["scalingSpec"] = {"minNodeCount": "many"}
    simulator.state.clusters[broken["name"]] = broken
    events = simulator.state.clusters[f"{US.parent}/modelDevelopmentClusters/gpufs"]
    events["clusterEvents"] = [{"eventTime": "not a time"}]
    [summary] = await client.list_kept([US], lambda cluster: cluster.cluster_id)
    [bad] = summary.unreadable
    assert bad.name.endswith("/odd01") and "scalingSpec.minNodeCount" in bad.problem
    assert "gpufs" in summary.kept and "odd01" not in summary.kept


async def test_what_a_listing_does_not_keep_is_freed_page_by_page(
    simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    """Each page is read into summaries, reduced by ``keep`` and freed while the collector is
    paused: the summaries of an earlier page are never alive, and the collector never walks
    one."""

    read: list[weakref.ref[ClusterSummary]] = []

    def alive() -> int:
        return sum(1 for r in read if r() is not None)

    calls: list[tuple[bool, int]] = []

    def keep(cluster: ClusterSummary) -> str:
        read.append(weakref.ref(cluster))
        calls.append((gc.isenabled(), alive()))
        return cluster.cluster_id

    collections: list[int] = []

    def collecting(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(alive())

    threshold = gc.get_threshold()
    gc.set_threshold(1)  # a collection at every allocation the collector may run at
    gc.callbacks.append(collecting)
    try:
        async with VertexClient(
            StaticToken("t"), base_url=simulator.url, page_size=1, sleep=sleeps
        ) as client:
            [listing] = await client.list_kept([US], keep)
    finally:
        gc.callbacks.remove(collecting)
        gc.set_threshold(*threshold)
    assert sorted(listing.kept) == ["cpu01", "train01"] and len(calls) == 2
    assert calls == [(False, 1), (False, 1)]  # kept while paused, one page at a time
    assert collections and set(collections) == {0}  # never walked a summary
    assert alive() == 0 and gc.isenabled()
