"""Every kind of change has one effect on the control plane and words for what it does; the
executor and recovery know nothing else of it."""

from __future__ import annotations

from pathlib import Path

from handlers.changes.effects import CREATE, DOING, EFFECTS, PATCH, REMOVE, Next, effect_of
from handlers.plans import ChangePlan, PlanKind

ROOT = Path(__file__).resolve().parent.parent
NAME = "projects/p/locations/r/modelDevelopmentClusters/c01"


def test_every_kind_is_registered_once() -> None:
    assert set(EFFECTS) == set(PlanKind) == set(DOING)
    assert EFFECTS[PlanKind.DELETE] is REMOVE and EFFECTS[PlanKind.RESTORE] is CREATE
    assert {k for k, e in EFFECTS.items() if e is PATCH} == {
        PlanKind.RESIZE,
        PlanKind.SLURM_CONFIG,
        PlanKind.SLURM_LAYOUT,
        PlanKind.SLURM_SCRIPTS,
    }


def test_the_executor_does_not_switch_on_the_kind() -> None:
    source = (ROOT / "handlers" / "execution.py").read_text()
    assert "PlanKind" not in source


def test_what_recovery_does_when_the_cluster_is_gone() -> None:
    def gone(kind: PlanKind) -> Next:
        plan = ChangePlan(kind=kind, cluster=NAME, fingerprint="f")
        return effect_of(plan).look(plan, None).next

    assert gone(PlanKind.DELETE) == Next.FOLLOW  # deleted: the tracker reports it done
    assert gone(PlanKind.RESTORE) == Next.SEND  # not created yet: the look came first
    assert gone(PlanKind.RESIZE) == Next.UNKNOWN
