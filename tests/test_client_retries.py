"""Retries under injected faults: what is retried, how long it waits, what is never replayed."""

from __future__ import annotations

import random
import socket

import pytest

from bot.sandbox.controlplane.rpc import LOST_REPLY_STATUSES
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.retry import RetryPolicy
from handlers.domain.errors import (
    AppliedWithoutReplyError,
    NotFoundError,
    OutcomeUnknownError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TransportError,
    UnavailableError,
    VertexError,
)
from handlers.domain.models import Cluster
from tests.conftest import RecordedSleeps, Simulator

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"


def scaled(cluster: Cluster, nodes: int) -> Cluster:
    changed = cluster.model_copy(deep=True)
    for pool in changed.compute_pools():
        assert pool.scaling_spec is not None
        pool.scaling_spec.min_node_count = pool.scaling_spec.max_node_count = nodes
    return changed


async def test_get_retries_unavailable_then_succeeds(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.fault(method="GET", status=503, count=2)
    cluster = await client.get_cluster(TRAIN01)
    assert cluster.cluster_id == "train01"
    statuses = [r["status"] for r in await simulator.requests(method="GET")]
    assert statuses == [503, 503, 200]
    assert len(sleeps.waits) == 2
    assert 0 <= sleeps.waits[0] <= 1.0 and 0 <= sleeps.waits[1] <= 2.0  # full jitter, x2


async def test_429_honours_retry_after(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.fault(method="GET", status=429, count=1, retry_after=7)
    assert (await client.get_cluster(TRAIN01)).cluster_id == "train01"
    assert len(sleeps.waits) == 1 and sleeps.waits[0] >= 7


async def test_500_is_retried_on_reads(client: VertexClient, simulator: Simulator) -> None:
    await simulator.fault(method="GET", status=500, count=1)
    assert len(await client.list_clusters(Cluster.model_validate({"name": TRAIN01}).target)) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, "INVALID_ARGUMENT"), (403, "PERMISSION_DENIED"), (404, "NOT_FOUND")],
)
async def test_client_errors_are_not_retried(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps, status: int, error: str
) -> None:
    await simulator.fault(method="GET", status=status, count=5, message="denied by policy")
    with pytest.raises(VertexError) as caught:
        await client.get_cluster(TRAIN01)
    assert getattr(caught.value, "status", None) == error
    assert "denied by policy" in str(caught.value)
    assert len(await simulator.requests(method="GET")) == 1
    assert sleeps.waits == []


async def test_gives_up_at_the_deadline(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.fault(method="GET", status=503)  # fails for ever
    with pytest.raises(UnavailableError):
        await client.get_cluster(TRAIN01)
    assert sum(sleeps.waits) <= 120
    assert len(await simulator.requests(method="GET")) == len(sleeps.waits) + 1
    assert all(w <= 60 for w in sleeps.waits)


async def test_retry_after_beyond_deadline_stops_at_once(
    client: VertexClient, simulator: Simulator, sleeps: RecordedSleeps
) -> None:
    await simulator.fault(method="GET", status=429, retry_after=600)
    with pytest.raises(ResourceExhaustedError) as caught:
        await client.get_cluster(TRAIN01)
    assert caught.value.retry_after == 600
    assert sleeps.waits == []


# Every status the simulator can answer after applying a change (it refuses any other): the
# reply is lost, the change is not. Each must lead to the look-up, and none to a replay or a
# "not applied".
LOST_REPLIES = sorted(LOST_REPLY_STATUSES)


@pytest.mark.parametrize("status", LOST_REPLIES)
async def test_patch_applied_but_reply_lost_is_followed_not_replayed(
    client: VertexClient, simulator: Simulator, status: int
) -> None:
    await simulator.fault(method="PATCH", status=status, when="after", count=1)
    cluster = await client.get_cluster(CPU01)
    with pytest.raises(AppliedWithoutReplyError) as caught:
        await client.update_cluster(scaled(cluster, 0), ["node_pools"])
    assert "applied or in progress" in str(caught.value)
    assert len(await simulator.requests(method="PATCH")) == 1
    assert simulator.state.clusters[CPU01]["clusterStatus"]["state"] == "UPDATING"


async def test_a_refusal_cannot_follow_an_applied_change(simulator: Simulator) -> None:
    spec = {"method": "PATCH", "status": 400, "when": "after"}
    async with simulator.session.post(f"{simulator.url}/_sim/faults", json=spec) as reply:
        assert reply.status == 400
        assert "429, 500, 501, 502, 503, 504" in (await reply.json())["error"]["message"]


@pytest.mark.parametrize("when", ["after", "before"])
async def test_a_broken_connection_is_looked_up(
    client: VertexClient, simulator: Simulator, when: str
) -> None:
    """The connection breaks with no reply: the request was sent, so only a look-up tells."""
    await simulator.fault(method="PATCH", drop=True, when=when, count=1)
    cluster = await client.get_cluster(CPU01)
    await simulator.admin("DELETE", "requests")
    if when == "after":
        with pytest.raises(AppliedWithoutReplyError):
            await client.update_cluster(scaled(cluster, 0), ["node_pools"])
        log = [(r["method"], r["status"]) for r in await simulator.requests()]
        assert log == [("PATCH", 0), ("GET", 200)]  # never sent again
    else:
        operation = await client.update_cluster(scaled(cluster, 1), ["node_pools"])
        assert operation.name
        log = [(r["method"], r["status"]) for r in await simulator.requests()]
        assert log == [("PATCH", 0), ("GET", 200), ("PATCH", 200)]  # visibly not applied


async def test_a_reply_too_late_after_the_change_is_looked_up(simulator: Simulator) -> None:
    """The change is made and the reply outlasts the request timeout."""
    async with VertexClient(
        StaticToken("t"), base_url=simulator.url, request_timeout=0.5, clock=simulator.clock
    ) as vertex:
        await simulator.fault(method="PATCH", latency_ms=3000, when="after", count=1)
        cluster = await vertex.get_cluster(CPU01)
        with pytest.raises(AppliedWithoutReplyError):
            await vertex.update_cluster(scaled(cluster, 0), ["node_pools"])
    assert len(await simulator.requests(method="PATCH")) == 1


@pytest.mark.parametrize("status", [s for s in LOST_REPLIES if s != 501])
async def test_patch_refused_before_applying_is_replayed_once(
    client: VertexClient, simulator: Simulator, status: int
) -> None:
    """A failure that left the cluster untouched (checked with a GET) is safe to send again."""
    await simulator.fault(method="PATCH", status=status, when="before", count=1)
    cluster = await client.get_cluster(CPU01)
    await simulator.admin("DELETE", "requests")
    operation = await client.update_cluster(scaled(cluster, 1), ["node_pools"])
    assert operation.name
    log = [(r["method"], r["status"]) for r in await simulator.requests()]
    assert log == [("PATCH", status), ("GET", 200), ("PATCH", 200)]


async def test_unimplemented_is_looked_up_and_not_sent_again(
    client: VertexClient, simulator: Simulator
) -> None:
    """501 may follow a change like any 5xx, so it is looked up; sending it again would not
    help, so a change that visibly did not apply is reported, not replayed."""
    await simulator.fault(method="PATCH", status=501, count=1)
    cluster = await client.get_cluster(CPU01)
    await simulator.admin("DELETE", "requests")
    with pytest.raises(VertexError) as caught:
        await client.update_cluster(scaled(cluster, 1), ["node_pools"])
    assert caught.value.status == "UNIMPLEMENTED"
    log = [(r["method"], r["status"]) for r in await simulator.requests()]
    assert log == [("PATCH", 501), ("GET", 200)]


async def test_lost_reply_and_failed_look_up_is_outcome_unknown(
    client: VertexClient, simulator: Simulator
) -> None:
    cluster = await client.get_cluster(CPU01)
    await simulator.fault(method="PATCH", status=503, when="after", count=1)
    await simulator.fault(method="GET", status=403, count=1)
    with pytest.raises(OutcomeUnknownError) as caught:
        await client.update_cluster(scaled(cluster, 0), ["node_pools"])
    assert "may have been applied" in str(caught.value)
    assert len(await simulator.requests(method="PATCH")) == 1


@pytest.mark.parametrize("status", [400, 403, 404, 409])
async def test_patch_refusals_are_final(
    client: VertexClient, simulator: Simulator, status: int
) -> None:
    """A refusal on purpose is not applied: no look-up, no retry."""
    await simulator.fault(method="PATCH", status=status, count=1)
    cluster = await client.get_cluster(CPU01)
    await simulator.admin("DELETE", "requests")
    with pytest.raises(VertexError) as caught:
        await client.update_cluster(scaled(cluster, 1), ["node_pools"])
    assert not isinstance(caught.value, AppliedWithoutReplyError | OutcomeUnknownError)
    assert [r["method"] for r in await simulator.requests()] == ["PATCH"]


@pytest.mark.parametrize("status", LOST_REPLIES)
async def test_delete_reply_lost_is_followed_not_replayed(
    client: VertexClient, simulator: Simulator, status: int
) -> None:
    await simulator.fault(method="DELETE", status=status, when="after", count=1)
    with pytest.raises(AppliedWithoutReplyError):
        await client.delete_cluster(CPU01)
    assert len(await simulator.requests(method="DELETE")) == 1
    simulator.clock.advance(31)
    with pytest.raises(NotFoundError):
        await client.get_cluster(CPU01)


async def test_delete_refused_before_applying_is_replayed(
    client: VertexClient, simulator: Simulator
) -> None:
    await simulator.fault(method="DELETE", status=503, when="before", count=1)
    operation = await client.delete_cluster(CPU01)
    assert operation.name
    assert [r["status"] for r in await simulator.requests(method="DELETE")] == [503, 200]


async def test_slurm_get_is_retried_like_a_read(client: VertexClient, simulator: Simulator) -> None:
    await simulator.fault(path=":callSlurmRestApi", status=500, count=1)
    assert (await client.call_slurm_rest_api(TRAIN01, "/slurm/v0.0.42/jobs/")).status == 200


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_unreachable_control_plane(sleeps: RecordedSleeps) -> None:
    """A refused connection never left the process: even a PATCH may be sent again."""
    policy = RetryPolicy(deadline=10)
    async with VertexClient(
        StaticToken("t"),
        base_url=f"http://127.0.0.1:{_closed_port()}",
        retry=policy,
        sleep=sleeps,
        clock=sleeps.clock,
        rng=random.Random(1),
    ) as vertex:
        with pytest.raises(TransportError) as caught:
            await vertex.update_cluster(Cluster.model_validate({"name": CPU01}), ["node_pools"])
    assert not caught.value.sent
    assert "could not connect to the control plane" in str(caught.value)
    assert len(sleeps.waits) >= 2  # retried until the deadline


async def test_error_messages_never_carry_credentials(
    client: VertexClient, simulator: Simulator
) -> None:
    await simulator.fault(
        method="GET",
        status=403,
        message="caller Bearer ya29.a0AfH6SMBsecretsecret with token ya29.zzz is not allowed",
    )
    with pytest.raises(PermissionDeniedError) as caught:
        await client.get_cluster(TRAIN01)
    text = str(caught.value)
    assert "ya29" not in text and "secret" not in text
    assert "is not allowed" in text


async def test_non_json_error_body_is_not_shown(simulator: Simulator) -> None:
    from handlers.domain.errors import error_from_response

    error = error_from_response(502, b"<html><body>upstream connect error</body></html>")
    assert error.status == "UNAVAILABLE"
    assert "<html>" not in str(error) and "502" in str(error)


async def test_observer_counts_calls(simulator: Simulator) -> None:
    seen: list[tuple[str, str]] = []
    await simulator.fault(method="GET", status=503, count=1)
    async with VertexClient(
        StaticToken("t"),
        base_url=simulator.url,
        observer=lambda call, outcome: seen.append((call, outcome)),
        retry=RetryPolicy(initial=0.001, maximum=0.001),
    ) as vertex:
        await vertex.get_cluster(TRAIN01)
    assert seen == [("get", "UNAVAILABLE"), ("get", "ok")]
