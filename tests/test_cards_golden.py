"""Golden files pin the Block Kit of every approval-card state, the tracker's messages and
the Slurm settings view.

Regenerate after an intended change with: UPDATE_GOLDEN=1 make test, then review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.controlplane import DEMO_FIXTURES
from bot.sandbox.slack.blockkit import problems
from bot.slack.render import render
from handlers.changes.approval_card import request_card, thread_reply
from handlers.changes.delete import plan_delete
from handlers.changes.layout import plan_slurm_layout
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import plan_resize
from handlers.changes.settings import plan_slurm_config
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.entities import ApprovalRequest, RequestState
from handlers.replies import Code, Reply
from handlers.slurm.layout import LayoutAction
from handlers.slurm.view import slurm_reply
from tests.support.golden import assert_golden

GOLDEN = Path(__file__).with_name("golden")
CREATED = 1_796_000_000.0  # 2026-11-30 00:53:20 UTC


def demo_cluster(cluster_id: str) -> Cluster:
    fixtures = json.loads(DEMO_FIXTURES.read_text())
    document = next(c for c in fixtures["clusters"] if c["name"].endswith(f"/{cluster_id}"))
    document["clusterStatus"] = {"state": "RUNNING"}
    return Cluster.model_validate(document)


def asked(request_id: str, plan: ChangePlan[Any]) -> ApprovalRequest:
    """A pending request of alice's in #ml-infra, made at ``CREATED``."""
    return ApprovalRequest(
        id=request_id,
        plan=plan,
        requester="U0ALICE",
        channel="C0MLINFRA",
        created_at=CREATED,
        expires_at=CREATED + 3600,
    )


def resize_request(**changes: Any) -> ApprovalRequest:
    plan = plan_resize(demo_cluster("train01"), "a4", 3, 3, PriceBook.with_overrides())
    request = asked("r-0123456789", plan)
    request.card_message = "1796000000.000100"
    for key, value in changes.items():
        setattr(request, key, value)
    return request


def delete_request() -> ApprovalRequest:
    return asked("r-abcdef0123", plan_delete(demo_cluster("cpu01"), PriceBook.with_overrides()))


OPERATION = "projects/123456789012/locations/us-central1/operations/1000"


def queue_scaled_request() -> ApprovalRequest:
    """A Flex Start pool that scales 0:2 with the queue, made fixed at 3 (the card warns)."""
    document = json.loads(DEMO_FIXTURES.read_text())["clusters"][2]
    document["clusterStatus"] = {"state": "RUNNING"}
    pool = document["nodePools"][0]
    pool.update(provisioningModel="FLEX_START", scalingSpec={"minNodeCount": 0, "maxNodeCount": 2})
    plan = plan_resize(Cluster.model_validate(document), "h100", 3, 3, PriceBook.with_overrides())
    return asked("r-5555555555", plan)


def slurm_config_request() -> ApprovalRequest:
    plan = plan_slurm_config(
        demo_cluster("train01"),
        {"PreemptMode": "REQUEUE", "PreemptExemptTime": "00:10:00"},
        ["PriorityWeightFairshare"],
        PriceBook.with_overrides(),
    )
    return asked("r-6666666666", plan)


def slurm_layout_request() -> ApprovalRequest:
    plan = plan_slurm_layout(
        demo_cluster("train01"),
        LayoutAction.PARTITION_ADD,
        "debug",
        ("a4",),
        PriceBook.with_overrides(),
    )
    return asked("r-7777777777", plan)


CASES: dict[str, Reply] = {
    "resize_pending": request_card(resize_request()),
    "resize_approved": request_card(
        resize_request(state=RequestState.APPROVED, decided_by="U0BOB", decided_at=CREATED + 60)
    ),
    "resize_running": request_card(
        resize_request(state=RequestState.RUNNING, decided_by="U0BOB", decided_at=CREATED + 60)
    ),
    "resize_succeeded": request_card(
        resize_request(
            state=RequestState.SUCCEEDED, decided_by="U0BOB", outcome="finished in 2 min 14 s"
        )
    ),
    "resize_failed": request_card(
        resize_request(
            state=RequestState.FAILED,
            decided_by="U0BOB",
            outcome="failed after 31 s: Quota 'B200_GPUS' exceeded (RESOURCE_EXHAUSTED)",
        )
    ),
    "resize_refused": request_card(
        resize_request(
            state=RequestState.REFUSED,
            decided_by="U0BOB",
            outcome="pool 'a4' now has 5:5 nodes (was 2:2 when this was requested)",
        )
    ),
    "resize_rejected": request_card(
        resize_request(state=RequestState.REJECTED, decided_by="U0BOB")
    ),
    "resize_expired": request_card(resize_request(state=RequestState.EXPIRED)),
    "resize_unknown": request_card(
        resize_request(
            state=RequestState.UNKNOWN,
            decided_by="U0BOB",
            outcome="the control plane did not confirm the change and the cluster could not "
            "be read to check it",
        )
    ),
    "resize_withdrawn": request_card(resize_request(state=RequestState.WITHDRAWN)),
    "resize_queue_scaled_made_fixed": request_card(queue_scaled_request()),
    "delete_pending": request_card(delete_request()),
    "slurm_train01": slurm_reply(demo_cluster("train01")),
    "slurm_config_pending": request_card(slurm_config_request()),
    "slurm_layout_pending": request_card(slurm_layout_request()),
    "progress": thread_reply(
        "train01",
        "reconfiguring node pools (45%)",
        ("operation ", Code(OPERATION), " · running for 47 s"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_card_matches_golden_file(name: str) -> None:
    text, blocks = render(CASES[name])
    rendered = {"text": text, "blocks": blocks}
    assert problems(blocks) == []  # Slack would accept it
    assert_golden(GOLDEN / f"{name}.json", rendered)


def test_every_golden_file_has_a_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(CASES)
