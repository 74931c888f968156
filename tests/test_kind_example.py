"""The worked example of docs/ARCHITECTURE.md is true: its kind of change, taken from the
page and registered with one entry, is asked for, approved, sent and recovered by the same
approval service and executor as every other kind, against the simulator."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.store import Store
from bot.vertex.client import VertexClient
from handlers.capabilities import CAPABILITIES
from handlers.changes.approval_card import request_card
from handlers.changes.capability import CHANGES
from handlers.changes.effects import Next
from handlers.changes.kinds import kind_of
from handlers.costs import PriceBook
from handlers.entities import RequestState
from handlers.policy import Role
from handlers.reading.audit import change_words
from handlers.registry import Registry
from tests.conftest import ManualClock, Simulator
from tests.support.fakes import FakeMessenger
from tests.support.page import module_from_page
from tests.support.text_adapter import text
from tests.test_approvals_unit import service

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"


def test_the_page_counts_the_files_it_touches() -> None:
    text = PAGE.read_text()
    assert "capability's `kinds` (its `capability.py`): **2 files**" in text
    declared = (ROOT / "handlers" / "changes" / "capability.py").read_text()
    [line] = [ln for ln in declared.splitlines() if ln.strip().startswith("kinds=(")]
    assert line.replace(")", ", LABELS)") in text  # the entry is one name more


@pytest.fixture
async def labels(tmp_path: Path) -> AsyncIterator[Any]:
    module = module_from_page("# handlers/changes/labels.py", "labels_example", tmp_path)
    yield module
    sys.modules.pop("labels_example", None)


async def test_the_example_kind_runs_through_the_same_flows(
    labels: Any, tmp_path: Path, client: VertexClient, simulator: Simulator, clock: ManualClock
) -> None:
    # the one entry: the changes capability declares the kind beside its own (in place of
    # one of its name a project that has the example already declares)
    changes = replace(CHANGES, kinds=(*CHANGES.kinds, labels.LABELS))
    shipped = [
        replace(c, kinds=tuple(k for k in c.kinds if k.name != "labels")) for c in CAPABILITIES
    ]
    registry = Registry([changes if c.name == CHANGES.name else c for c in shipped])
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}", registry.read_plan)
    await store.migrate()
    approvals = service(store, client, clock, FakeMessenger())  # as the unit tests build it
    try:
        cluster = await client.get_cluster(TRAIN01)
        plan = labels.plan_label(cluster, "team", "ml", PriceBook.with_overrides())
        request = await approvals.submit("U0ALICE", "C0X", plan)
        card = text(request_card(request))
        assert "Label request: train01" in card and "team   research  ml" in card
        assert "updateMask `labels`" in card
        stored = await store.get_request(request.id)  # read back as its own kind
        assert stored is not None and isinstance(stored.plan.detail, labels.LabelsDetail)
        assert change_words(stored.plan) == "team=ml"
        assert await approvals.decide("U0BOB", Role.APPROVER, request.id, True) is None
        [patch] = [r for r in simulator.state.requests if r["method"] == "PATCH"]
        assert patch["query"] == {"updateMask": "labels"}
        assert patch["body"]["labels"] == {**(cluster.labels or {}), "team": "ml"}
        done = await store.get_request(request.id)
        assert done is not None and done.state == RequestState.RUNNING
        now = await client.get_cluster(TRAIN01)
        kind = kind_of(done.plan)
        assert kind.effect.look(kind, done.plan, now).next == Next.FOLLOW  # recovery: applied
    finally:
        await store.close()
