"""Restore after delete: the spec kept before the DELETE, **Restore** on the finished delete,
`/cluster restore CLUSTER [as NEW_ID]` and `/cluster deleted`, the create followed to the end,
and the crash between keeping the spec and sending the delete."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from handlers.domain.models import Cluster
from handlers.sweep.alert import IdleEntry, alert_card
from handlers.sweep.rules import AutoAction, Recommendation, Status
from tests.support.demo_stack import CPU01, Stack, demo_stack, is_card, text_of, thread_of
from tests.support.text_adapter import text

CPU02 = CPU01.replace("/cpu01", "/cpu02")


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


def spec_of(document: dict[str, Any]) -> dict[str, Any]:
    """A live cluster as a create body: what the bot keeps (pools by id: the API may return
    them in another order than sent)."""
    spec = Cluster.model_validate(json.loads(json.dumps(document))).spec()
    spec["nodePools"] = sorted(spec["nodePools"], key=lambda p: p["id"])
    return spec


async def finished(stack: Stack, card: dict[str, Any]) -> None:
    await stack.wait(lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), 20)


async def test_a_deleted_cluster_is_restored_as_it_was(stack: Stack) -> None:
    before = spec_of(stack.simulator.clusters[CPU01])
    card = await stack.card("alice", "/cluster delete cpu01")
    await stack.click("bob", card["ts"], "approve")
    await finished(stack, card)
    assert CPU01 not in stack.simulator.clusters
    done = next(m for m in await stack.messages() if m["ts"] == card["ts"])
    assert "Restore" in text_of(done) and "/cluster restore cpu01" in text_of(done)

    listed = text_of(await stack.reply_to("carol", "/cluster deleted"))
    assert "cpu01" in listed and "demo-project/us-central1" in listed and "cpu 4" in listed

    # Restore on the finished delete: the same request as /cluster restore, in its channel
    seen = {m["ts"] for m in await stack.messages()}
    await stack.click("alice", card["ts"], "restore")
    messages = await stack.wait(lambda ms: any(is_card(m) and m["ts"] not in seen for m in ms))
    restore = next(m for m in messages if is_card(m) and m["ts"] not in seen)
    text = text_of(restore)
    for fact in (
        "Restore request: cpu01",
        "asks to create *cpu01* again",
        "cpu    n2-standard-8      4  ~$1.55",
        "partitions cpu (default cpu), login pool login",
        "modelDevelopmentClusterId=cpu01",
    ):
        assert fact in text, (fact, text)
    await stack.click("bob", restore["ts"], "approve")
    await finished(stack, restore)
    posts = await stack.requests("POST")
    [create] = [r for r in posts if r["path"].endswith("/modelDevelopmentClusters")]
    assert create["query"] == {"modelDevelopmentClusterId": "cpu01"}
    after = spec_of(stack.simulator.clusters[CPU01])
    assert after == before  # pools, Slurm settings, storage and labels as they were


async def test_restore_refuses_before_any_card(stack: Stack) -> None:
    nothing = text_of(await stack.reply_to("alice", "/cluster restore cpu01"))
    assert "clusterbot kept no spec of a deleted cluster cpu01" in nothing
    card = await stack.card("alice", "/cluster delete cpu01")
    await stack.click("bob", card["ts"], "approve")
    await finished(stack, card)
    bad = text_of(await stack.reply_to("alice", "/cluster restore cpu01 as Cpu-2"))
    assert "'Cpu-2' is not a cluster id" in bad
    viewer = text_of(await stack.reply_to("carol", "/cluster restore cpu01"))
    assert "needs the operator role" in viewer
    taken = text_of(await stack.reply_to("alice", "/cluster restore cpu01 as train01"))
    assert "train01 exists now; restore it under another id" in taken

    copy = await stack.card("alice", "/cluster restore cpu01 as cpu02")
    await stack.click("bob", copy["ts"], "approve")
    await finished(stack, copy)
    assert CPU02 in stack.simulator.clusters and CPU01 not in stack.simulator.clusters


def test_an_alert_that_recommends_delete_says_it_can_be_undone() -> None:
    entry = IdleEntry(
        cluster=CPU01,
        target="demo-project/us-central1",
        status=Status.IDLE,
        reason="no Slurm jobs",
        nodes="cpu: 4 x n2-standard-8",
        cost_hour=1.55,
        recommendation=Recommendation.DELETE,
        recommendation_reason="used on 0 of the last 7 days",
    )
    assert "/cluster restore cpu01" in text(alert_card(entry, 0.0, AutoAction.OFF))
    scale = dataclasses.replace(entry, recommendation=Recommendation.SCALE_TO_ZERO)
    assert "/cluster restore" not in text(alert_card(scale, 0.0, AutoAction.OFF))


async def test_restore_clicked_while_the_control_plane_fails_says_so(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster delete cpu01")
    await stack.click("bob", card["ts"], "approve")
    await finished(stack, card)
    await stack.fault(method="GET", path="modelDevelopmentClusters", status=503, count=100)
    await stack.click("alice", card["ts"], "restore")
    messages = await stack.wait(
        lambda ms: any(m["ephemeral_to"] == "U0ALICE" and "Not restored" in text_of(m) for m in ms)
    )
    told = next(m for m in messages if "Not restored" in text_of(m))
    assert "internal error" not in text_of(told).lower()
    assert "control plane" in text_of(told).lower() or "unavailable" in text_of(told).lower()
