"""Model round-trips: the docs' snake_case examples in, camelCase out, unknown fields kept."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.vertex.transport import read_model_json
from handlers.domain.errors import MalformedReplyError
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName, Target
from handlers.domain.operations import Operation
from tests.support.factories import cluster_doc

# An Operation as the reference shows it, with a field this code does not model.
OPERATION_DONE = {
    "name": "projects/123/locations/us-central1/operations/456",
    "metadata": {
        "@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1."
        "UpdateModelDevelopmentClusterOperationMetadata",
        "genericMetadata": {
            "createTime": "2026-11-30T09:00:00Z",
            "updateTime": "2026-11-30T09:01:00Z",
        },
        "progressMessage": "done",
    },
    "done": True,
    "error": {"code": 9, "message": "pool busy", "details": [{"@type": "x", "reason": "R"}]},
}


def test_snake_case_example_reads_and_emits_camel_case() -> None:
    cluster = Cluster.model_validate(cluster_doc(snake=True))
    assert cluster.cluster_id == "extra01"
    assert cluster.pool("gpu").machine_spec.accelerator_count == 8  # type: ignore[union-attr]
    assert cluster.slurm.login_node_pool_id == "login"
    emitted = cluster.to_api()
    assert emitted == cluster_doc(snake=False)
    assert "node_pools" not in json.dumps(emitted)


def test_camel_case_round_trip_is_exact() -> None:
    document = cluster_doc()
    assert Cluster.model_validate(document).to_api() == document


def test_unknown_fields_are_preserved_at_every_level() -> None:
    document = cluster_doc()
    document["newTopLevel"] = {"nested": [1, 2, 3]}
    document["nodePools"][0]["futurePoolField"] = "x"
    document["nodePools"][0]["machineSpec"]["gpuPartitionSize"] = "1g.10gb"
    document["orchestratorSpec"]["slurmSpec"]["futureSets"] = [{"id": "s1"}]
    document["clusterStatus"] = {"state": "RUNNING", "newStatusField": True}
    emitted = Cluster.model_validate(document).to_api()
    assert emitted["newTopLevel"] == {"nested": [1, 2, 3]}
    assert emitted["nodePools"][0]["futurePoolField"] == "x"
    assert emitted["nodePools"][0]["machineSpec"]["gpuPartitionSize"] == "1g.10gb"
    assert emitted["orchestratorSpec"]["slurmSpec"]["futureSets"] == [{"id": "s1"}]
    assert emitted["clusterStatus"]["newStatusField"] is True


def test_map_keys_are_not_renamed() -> None:
    document = cluster_doc(snake=True)
    document["labels"] = {"cost_center": "ml_research"}
    document["orchestrator_spec"]["slurm_spec"]["config"] = {"priority_weight_age": "10"}
    emitted = Cluster.model_validate(document).to_api()
    assert emitted["labels"] == {"cost_center": "ml_research"}
    assert emitted["orchestratorSpec"]["slurmSpec"]["config"] == {"priority_weight_age": "10"}


def test_int64_counts_given_as_strings_are_numbers() -> None:
    document = cluster_doc()
    document["nodePools"][0]["scalingSpec"] = {"minNodeCount": "3", "maxNodeCount": "3"}
    assert Cluster.model_validate(document).pool("gpu").min_nodes == 3  # type: ignore[union-attr]


def test_operation_done_with_error() -> None:
    operation = Operation.model_validate(OPERATION_DONE)
    assert operation.done and not operation.succeeded
    assert operation.error is not None and operation.error.code == 9
    assert operation.progress_message == "done"
    assert operation.to_api() == OPERATION_DONE


def test_operation_running_has_no_done_field() -> None:
    operation = Operation.model_validate({"name": "projects/1/locations/r/operations/2"})
    assert operation.done is False and operation.response is None


def test_names_and_targets() -> None:
    name = ClusterName.parse("projects/p-1234/locations/us-central1/modelDevelopmentClusters/c1")
    assert (name.project, name.region, name.cluster_id) == ("p-1234", "us-central1", "c1")
    assert str(name.target) == "p-1234/us-central1"
    assert Target.parse(" demo-project/europe-west4 ") == Target("demo-project", "europe-west4")
    for bad in ("demo-project", "demo-project/", "/us-central1", "Demo/us-central1", "a/b/c"):
        with pytest.raises(ValueError, match="is not a target"):
            Target.parse(bad)
    with pytest.raises(ValueError, match="not a cluster resource name"):
        ClusterName.parse("clusters/c1")


@given(
    nodes=st.integers(min_value=0, max_value=10_000),
    label=st.text(min_size=1, max_size=20),
    extra=st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), max_size=3),
)
def test_round_trip_property(nodes: int, label: str, extra: dict[str, int]) -> None:
    document = cluster_doc(nodes=nodes)
    document["labels"] = {label: label}
    document["nodePools"][0]["unmodelled"] = extra
    assert Cluster.model_validate(document).to_api() == document


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "a reply that is not JSON"),
        (b"[1, 2]", "a reply that is not a JSON object"),
        (b'{"done": true}', "an operation that clusterbot cannot read (name: Field required)"),
        (b'{"name": "n", "done": "maybe"}', "cannot read (done: Input should be a valid boolean"),
    ],
)
def test_an_operation_read_from_bytes_names_what_is_wrong(body: bytes, words: str) -> None:
    with pytest.raises(MalformedReplyError) as caught:
        read_model_json(Operation, body, "an operation")
    assert words in str(caught.value)


def test_an_operation_read_from_bytes_is_the_one_read_from_json() -> None:
    body = json.dumps(OPERATION_DONE).encode()
    assert read_model_json(Operation, body, "an operation") == Operation.model_validate(
        OPERATION_DONE
    )
