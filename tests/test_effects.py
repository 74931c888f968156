"""Every kind of change is one unit, registered once, with one effect on the control plane;
the flows that run changes know nothing else of it."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from handlers.capabilities import REGISTRY
from handlers.changes.effects import CREATE, PATCH, REMOVE, Next
from handlers.changes.kind import ChangeKind
from handlers.changes.kinds import kind_of
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import ResizeDetail
from handlers.changes.restore import RestoreDetail

ROOT = Path(__file__).resolve().parent.parent
NAME = "projects/p/locations/r/modelDevelopmentClusters/c01"
# The flows that run any change: none may name a kind, its detail or its module.
FLOWS = (
    *("changes/approvals", "changes/approval_card", "changes/execution", "changes/tracking"),
    *("changes/ledger", "reading/audit"),
)

KINDS = REGISTRY.kinds  # every capability's kinds of change


def test_every_kind_is_registered_once_with_its_detail_and_effect() -> None:
    assert all(k.detail.model_fields["kind"].default == name for name, k in KINDS.items())
    assert len({k.detail for k in KINDS.values()}) == len(KINDS)
    assert all(isinstance(k, ChangeKind) and k.doing and k.heading for k in KINDS.values())
    assert KINDS["delete"].effect is REMOVE and KINDS["restore"].effect is CREATE
    # the shipped kinds' effects (a kind added beside them brings its own)
    assert {n for n, k in KINDS.items() if k.effect is PATCH} >= {
        "resize",
        "slurm_config",
        "slurm_layout",
        "slurm_scripts",
    }
    assert "delete" in [n for n, k in KINDS.items() if k.destructive]


def _names(module: str) -> set[str]:
    tree = ast.parse((ROOT / "handlers" / f"{module}.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_flows_do_not_know_which_kind_they_run() -> None:
    kind_words = {*KINDS, "RESIZE", "DELETE", "RESTORE", "PlanKind"}
    kind_words |= {k.detail.__name__ for k in KINDS.values()}
    kind_words |= {f"handlers.changes.{m}" for m in ("resize", "delete", "settings", "layout")}
    kind_words |= {"handlers.changes.scripts"}
    for module in FLOWS:
        assert not kind_words & _names(module), module


def test_what_recovery_does_when_the_cluster_is_gone() -> None:
    def gone(detail: Any) -> Next:
        plan = ChangePlan(cluster=NAME, detail=detail, fingerprint="f")
        kind = kind_of(plan)
        return kind.effect.look(kind, plan, None).next

    assert gone(KINDS["delete"].detail()) == Next.FOLLOW  # deleted: the tracker reports it
    spec = RestoreDetail(spec={}, restored_from=NAME, kept_at=1.0)
    assert gone(spec) == Next.SEND  # not created yet: the look came first
    assert gone(ResizeDetail()) == Next.UNKNOWN


def test_a_plan_stored_before_kinds_had_details_reads_back_as_its_kind() -> None:
    """Rows written by earlier releases kept each kind's fields at the top of the plan."""
    pool = {
        "pool_id": "a4",
        "machine": "a4-highgpu-8g",
        "min_before": 0,
        "max_before": 4,
        "min_after": 2,
        "max_after": 4,
        "cost_before": 0.0,
        "cost_after": 1.0,
    }
    flat = {
        "kind": "resize",
        "cluster": NAME,
        "update_mask": ["node_pools"],
        "pools": [pool],
        "settings": [],
        "layout": None,
        "scripts": None,
        "spec": None,
        "restored_from": None,
        "kept_at": None,
        "fingerprint": "f",
        "losses": [],
        "kept": [],
        "warnings": [],
    }
    plan = REGISTRY.read_plan(json.dumps(flat))
    assert isinstance(plan.detail, ResizeDetail) and plan.kind == "resize"
    assert plan.detail.sizes == {"a4": (2, 4)}
    again = REGISTRY.read_plan(plan.model_dump_json())
    assert again == plan and isinstance(again.detail, ResizeDetail)
    deleted = REGISTRY.read_plan(json.dumps({**flat, "kind": "delete", "losses": ["all 4 nodes"]}))
    assert deleted.detail.losses == ("all 4 nodes",)
