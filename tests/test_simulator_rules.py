"""Every validation rule of the control plane, as the simulator enforces it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bot.vertex.client import VertexClient
from handlers.domain.errors import (
    AbortedError,
    AlreadyExistsError,
    InvalidArgumentError,
    error_from_response,
)
from handlers.domain.models import Cluster
from handlers.domain.names import Target
from handlers.domain.shortage import Shortage, shortage_of
from tests.conftest import DEMO_FIXTURES, Simulator
from tests.support.factories import cluster_doc

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
US = Target("demo-project", "us-central1")
SLURM = "orchestrator_spec.slurm_spec"


def edit(doc: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    change(doc)
    return doc


def pools(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["nodePools"])


def slurm(doc: dict[str, Any]) -> dict[str, Any]:
    return dict(doc["orchestratorSpec"]["slurmSpec"])


def set_slurm(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["orchestratorSpec"]["slurmSpec"].__setitem__(key, value)


def set_scaling(low: Any, high: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["nodePools"][0].__setitem__(
        "scalingSpec", {"minNodeCount": low, "maxNodeCount": high}
    )


UPDATE_CASES = [
    # (mask, change to the cluster document, words the error must contain)
    ("network", lambda d: None, "Invalid update_mask path: 'network'"),
    ("node_pools,home", lambda d: None, "Invalid update_mask path: 'home'"),
    ("node_pools", set_scaling(3, 2), "0 <= min_node_count <= max_node_count"),
    ("node_pools", set_scaling(-1, 2), "0 <= min_node_count <= max_node_count"),
    ("node_pools", set_scaling("two", 2), "must be an integer"),
    (
        "node_pools",
        lambda d: d["nodePools"][0]["machineSpec"].__setitem__("machineType", "a3-highgpu-8g"),
        "machine_spec is immutable",
    ),
    (
        "node_pools",
        lambda d: d["nodePools"][0].__setitem__("provisioningModel", "SPOT"),
        "provisioning_model is immutable",
    ),
    (
        "node_pools",
        lambda d: d["nodePools"].append(next(dict(p) for p in d["nodePools"] if p["id"] == "a4")),
        "'a4' appears twice",
    ),
    ("node_pools", lambda d: d.__setitem__("nodePools", []), "at least one node pool"),
    (
        "node_pools",
        lambda d: d.__setitem__("nodePools", [p for p in d["nodePools"] if p["id"] != "login"]),
        "login_node_pool_id 'login' names no node pool",
    ),
    (
        "node_pools",
        lambda d: d.__setitem__("nodePools", [p for p in d["nodePools"] if p["id"] != "a4"]),
        "names node pool 'a4', which does not exist",
    ),
    (
        f"{SLURM}.partitions",
        set_slurm("partitions", [{"id": "p", "nodePoolIds": ["ghost"]}]),
        "names node pool 'ghost'",
    ),
    (
        f"{SLURM}.partitions",
        set_slurm("partitions", [{"id": "p", "nodePoolIds": []}]),
        "must name at least one node pool",
    ),
    (
        f"{SLURM}.partitions",
        set_slurm("partitions", [{"id": "p", "nodePoolIds": ["a4"]}] * 2),
        "'p' appears twice",
    ),
    (
        f"{SLURM}.default_partition_id",
        set_slurm("defaultPartitionId", "nosuch"),
        "default_partition_id 'nosuch' names no partition",
    ),
    (
        f"{SLURM}.login_node_pool_id",
        set_slurm("loginNodePoolId", "nosuch"),
        "login_node_pool_id 'nosuch' names no node pool",
    ),
    (f"{SLURM}.config", set_slurm("config", {"Prolog": "/x"}), "'Prolog' is managed"),
    (
        f"{SLURM}.config",
        set_slurm("config", {"health_check_program": "/x"}),
        "'health_check_program' is managed",
    ),
    (f"{SLURM}.config", set_slurm("config", {"REQUEUEEXIT": "1"}), "'REQUEUEEXIT' is managed"),
    (
        f"{SLURM}.config",
        set_slurm("config", {"AccountingStorageHost": "db"}),
        "'AccountingStorageHost' is managed",
    ),
    (
        f"{SLURM}.prolog_bash_scripts",
        set_slurm("prologBashScripts", [1, 2]),
        "must be a list of text",
    ),
    # schema config: slurmdbd settings and misspelled keys are refused, naming the key
    (f"{SLURM}.config", set_slurm("config", {"PurgeJobAfter": "12"}), "'PurgeJobAfter' is managed"),
    (
        f"{SLURM}.config",
        set_slurm("config", {"PriorityWieghtAge": "1000"}),
        "'PriorityWieghtAge' is not a supported slurm.conf parameter",
    ),
    # schema config supersedes scheduling/accounting: both together are refused
    (
        f"{SLURM}.config,{SLURM}.scheduling",
        lambda d: (
            set_slurm("config", {"PriorityType": "priority/multifactor"})(d),
            set_slurm("scheduling", {"priorityType": "priority/basic"})(d),
        ),
        "cannot be set together with scheduling or accounting",
    ),
    # schema nodeSets: keyed by a node pool that exists; the login pool runs no jobs
    (
        f"{SLURM}.node_sets",
        set_slurm("nodeSets", [{"nodePoolId": "login", "config": {"Weight": "1"}}]),
        "'login' is the login node pool",
    ),
    (
        f"{SLURM}.node_sets",
        set_slurm("nodeSets", [{"nodePoolId": "ghost", "config": {"Weight": "1"}}]),
        "node pool 'ghost' does not exist",
    ),
    (
        f"{SLURM}.partitions",
        set_slurm(
            "partitions", [{"id": "a4", "nodePoolIds": ["a4"], "config": {"Default": "YES"}}]
        ),
        "'Default' is not allowed",
    ),
    # schema displayName: up to 128 characters; labels: lowercase, digits, _ and -
    ("display_name", lambda d: d.__setitem__("displayName", "x" * 129), "at most 128 are allowed"),
    ("labels", lambda d: d.__setitem__("labels", {"Team": "a"}), "label key 'Team' is invalid"),
    ("labels", lambda d: d.__setitem__("labels", {"k" * 65: "a"}), "is invalid"),
    ("labels", lambda d: d.__setitem__("labels", {"team": "Research"}), "label value 'Research'"),
    # create-cluster: the login pool's min and max node counts are equal
    (
        "node_pools",
        lambda d: pool_by_id(d, "login").__setitem__(
            "scalingSpec", {"minNodeCount": 1, "maxNodeCount": 2}
        ),
        "must be equal (got 1 and 2)",
    ),
]


def pool_by_id(doc: dict[str, Any], pool_id: str) -> dict[str, Any]:
    return next(p for p in doc["nodePools"] if p["id"] == pool_id)


CREATE_CASES = [
    # schema provisioningModel: a GPU pool needs a model or a reservation ...
    (
        lambda p: (p.pop("provisioningModel"), p["machineSpec"].pop("reservationAffinity")),
        "explicit provisioning_model",
    ),
    # ... RESERVATION needs an affinity, and the others must not have one
    (
        lambda p: p.__setitem__("provisioningModel", "ON_DEMAND"),
        "must not be set for the ON_DEMAND",
    ),
    (lambda p: p.__setitem__("provisioningModel", "SPOT"), "must not be set for the SPOT"),
    (lambda p: p["machineSpec"].pop("reservationAffinity"), "must be set for the RESERVATION"),
    # unknown enumeration values
    (lambda p: p.__setitem__("provisioningModel", "CHEAP"), "'CHEAP' is not one of"),
    (lambda p: p.__setitem__("bootDisk", {"bootDiskType": "nvme"}), "'nvme' is not one of"),
    (lambda p: p["machineSpec"].__setitem__("acceleratorType", "NVIDIA_X1"), "'NVIDIA_X1'"),
]


@pytest.mark.parametrize(("change", "words"), CREATE_CASES)
async def test_create_refused_like_the_api(
    client: VertexClient, change: Callable[[dict[str, Any]], Any], words: str
) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    change(pool_by_id(document, "a4"))
    with pytest.raises(InvalidArgumentError) as caught:
        await client.create_cluster(US, "new01", Cluster.model_validate(document))
    assert words in caught.value.message


PROVIDER_MASK_PATHS = [
    "display_name",
    "labels",
    "node_pools",
    "lustre_export_config",
    *(
        f"{SLURM}.{p}"
        for p in (
            "config",
            "scheduling",
            "accounting",
            "partitions",
            "default_partition_id",
            "node_sets",
            "prolog_bash_scripts",
            "epilog_bash_scripts",
            "login_node_pool_id",
        )
    ),
]


@pytest.mark.parametrize("path", PROVIDER_MASK_PATHS)
async def test_every_mask_path_the_provider_sends_is_accepted(
    client: VertexClient, simulator: Simulator, path: str
) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    if path.endswith("scheduling") or path.endswith("accounting"):
        document["orchestratorSpec"]["slurmSpec"].pop("config", None)  # superseded by config
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{TRAIN01}",
        params={"updateMask": path, "updateMode": "USER_ONLY"},
        json=document,
        headers={"Authorization": "Bearer t"},
    ) as reply:
        assert reply.status == 200, await reply.text()


async def test_patch_without_a_mask_updates_what_the_body_carries(
    client: VertexClient, simulator: Simulator
) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    document["displayName"] = "renamed"
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{TRAIN01}", json=document, headers={"Authorization": "Bearer t"}
    ) as reply:
        assert reply.status == 200, await reply.text()
    assert simulator.state.clusters[TRAIN01]["displayName"] == "renamed"


async def test_unknown_update_mode_is_refused(client: VertexClient, simulator: Simulator) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{TRAIN01}",
        params={"updateMask": "node_pools", "updateMode": "SOMETIMES"},
        json=document,
        headers={"Authorization": "Bearer t"},
    ) as reply:
        assert reply.status == 400
        assert "update_mode" in (await reply.json())["error"]["message"]


@pytest.mark.parametrize(("mask", "change", "words"), UPDATE_CASES)
async def test_update_refused(
    client: VertexClient,
    simulator: Simulator,
    mask: str,
    change: Callable[[dict[str, Any]], None],
    words: str,
) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    change(document)
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{TRAIN01}",
        params={"updateMask": mask},
        json=document,
        headers={"Authorization": "Bearer t"},
    ) as reply:
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    assert words in error["message"]
    assert simulator.state.clusters[TRAIN01]["clusterStatus"]["state"] == "RUNNING"


async def test_client_reports_refusal_once(client: VertexClient, simulator: Simulator) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    document["nodePools"][0]["scalingSpec"] = {"minNodeCount": 5, "maxNodeCount": 2}
    with pytest.raises(InvalidArgumentError) as caught:
        await client.update_cluster(Cluster.model_validate(document), ["node_pools"])
    assert "min 5, max 2" in str(caught.value)
    assert caught.value.http_status == 400
    assert len(await simulator.requests(method="PATCH")) == 1  # never retried


async def test_allowed_slurm_settings_are_accepted(client: VertexClient) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    document["orchestratorSpec"]["slurmSpec"]["config"] = {
        "PreemptType": "preempt/partition_prio",
        "PreemptMode": "REQUEUE",
        "PriorityWeightAge": "1000",
    }
    operation = await client.update_cluster(Cluster.model_validate(document), [f"{SLURM}.config"])
    assert operation.name


async def test_camel_case_mask_paths_are_accepted(
    client: VertexClient, simulator: Simulator
) -> None:
    document = (await client.get_cluster(TRAIN01)).to_api()
    document["orchestratorSpec"]["slurmSpec"]["defaultPartitionId"] = "a4"
    await client.update_cluster(
        Cluster.model_validate(document), ["orchestratorSpec.slurmSpec.defaultPartitionId"]
    )
    assert simulator.state.clusters[TRAIN01]["clusterStatus"]["state"] == "UPDATING"


async def test_second_operation_is_aborted(client: VertexClient, simulator: Simulator) -> None:
    cluster = await client.get_cluster(TRAIN01)
    await client.update_cluster(cluster, ["node_pools"])
    with pytest.raises(AbortedError) as caught:
        await client.update_cluster(cluster, ["node_pools"])
    assert caught.value.http_status == 409
    with pytest.raises(AbortedError):
        await client.delete_cluster(TRAIN01)
    simulator.clock.advance(21)
    assert (await client.update_cluster(cluster, ["node_pools"])).name


@pytest.mark.parametrize(
    ("cluster_id", "words"),
    [
        ("Train01", "is invalid"),
        ("train-01", "is invalid"),
        ("1train", "is invalid"),
        ("abcdefghijk", "is invalid"),
    ],
)
async def test_create_refuses_bad_cluster_ids(
    client: VertexClient, cluster_id: str, words: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await client.create_cluster(US, cluster_id, Cluster.model_validate(cluster_doc()))
    assert words in caught.value.message


async def test_create_needs_home_storage_and_refuses_duplicates(client: VertexClient) -> None:
    document = cluster_doc()
    del document["orchestratorSpec"]["slurmSpec"]["homeDirectoryStorage"]
    with pytest.raises(InvalidArgumentError) as caught:
        await client.create_cluster(US, "nohome", Cluster.model_validate(document))
    assert "home_directory_storage is required" in caught.value.message
    with pytest.raises(AlreadyExistsError):
        await client.create_cluster(US, "train01", Cluster.model_validate(cluster_doc()))


async def test_invalid_page_token_and_size(simulator: Simulator) -> None:
    url = f"{simulator.url}/v1beta1/{US.parent}/modelDevelopmentClusters"
    headers = {"Authorization": "Bearer t"}
    for query in ("pageToken=bogus", "pageSize=-1", "pageSize=many"):
        async with simulator.session.get(f"{url}?{query}", headers=headers) as reply:
            assert reply.status == 400, query
            assert (await reply.json())["error"]["status"] == "INVALID_ARGUMENT"
    # A token from one parent is not valid for another.
    await simulator.admin("POST", "config", {"page_max": 1})
    async with simulator.session.get(url, headers=headers) as reply:
        token = (await reply.json())["nextPageToken"]
    other = url.replace("us-central1", "europe-west4")
    async with simulator.session.get(f"{other}?pageToken={token}", headers=headers) as reply:
        assert reply.status == 400


async def test_unknown_paths_and_bad_json_are_aip193(simulator: Simulator) -> None:
    headers = {"Authorization": "Bearer t"}
    async with simulator.session.get(f"{simulator.url}/v1beta1/nothing", headers=headers) as r:
        assert r.status == 404
        assert (await r.json())["error"]["status"] == "NOT_FOUND"
    async with simulator.session.patch(
        f"{simulator.url}/v1beta1/{TRAIN01}?updateMask=node_pools",
        data=b"{not json",
        headers=headers,
    ) as r:
        assert r.status == 400
        assert "Invalid JSON" in (await r.json())["error"]["message"]


async def test_changes_past_the_request_quota_are_refused_as_google_refuses_them(
    simulator: Simulator,
) -> None:
    """Two changes a minute per project and region: the third there is refused unapplied,
    429 RESOURCE_EXHAUSTED with RATE_LIMIT_EXCEEDED, which the bot reads as a rate limit;
    other projects and regions have their own, and the next minute has room again."""
    assert (await simulator.admin("GET", "quota"))["writes_per_minute"] == 600
    await simulator.admin("POST", "quota", {"writes_per_minute": 2})
    headers = {"Authorization": "Bearer test"}

    async def patch(cluster: str, nodes: int) -> tuple[int, bytes]:
        url = f"{simulator.url}/v1beta1/{cluster}"
        async with simulator.session.get(url, headers=headers) as reply:
            doc = await reply.json()
        doc["nodePools"][0]["scalingSpec"] = {"minNodeCount": nodes, "maxNodeCount": nodes}
        params = {"updateMask": "node_pools"}
        async with simulator.session.patch(url, json=doc, params=params, headers=headers) as reply:
            return reply.status, await reply.read()

    names = [c["name"] for c in json.loads(DEMO_FIXTURES.read_text())["clusters"]]
    train01, cpu01, eval01, side01 = names
    answers = [await patch(c, 3) for c in (train01, cpu01, eval01, side01, cpu01)]
    assert [status for status, _ in answers] == [200, 200, 200, 200, 429], answers
    said = shortage_of(error_from_response(429, answers[-1][1], None))
    assert said is not None and said.kind == Shortage.RATE
    simulator.clock.advance(61)
    assert (await patch(cpu01, 5))[0] == 200
    assert (await simulator.admin("GET", "quota"))["refused"] == 1
