"""Slurm layout: a partition added or removed, the default partition chosen, or the login
pool moved. The rules (what the API refuses, pools left running no jobs) live in
``handlers/slurm/layout.py``.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.changes.effects import PATCH
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, costless, require_running
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.replies import Note, Part, Table, Text, bullets
from handlers.slurm.layout import (
    LayoutAction,
    LayoutChange,
    LayoutError,
    apply_layout,
    layout_applied,
    layout_change,
)

NAME: Final = "slurm_layout"


class LayoutDetail(Detail):
    kind: Literal["slurm_layout"] = NAME
    layout: LayoutChange


LayoutPlan = ChangePlan[LayoutDetail]


def plan_slurm_layout(
    cluster: Cluster,
    action: LayoutAction,
    name: str,
    pools: tuple[str, ...],
    prices: PriceBook,
) -> LayoutPlan:
    """Add, remove or choose the default partition, or move the login pool; refused before
    any card when the API would refuse it or pools would be left running no jobs."""
    require_running(cluster)
    try:
        change, warnings = layout_change(cluster, action, name, pools)
    except LayoutError as error:
        raise PlanError(str(error)) from None
    return costless(cluster, LayoutDetail(layout=change), change.mask, prices, warnings)


class LayoutKind(ChangeKind[LayoutDetail]):
    name = NAME
    detail = LayoutDetail
    effect = PATCH
    doing = "change the partitions or login pool of"
    heading = "Slurm partitions request"
    verb = "change the partitions or login pool of"

    def card(self, plan: LayoutPlan) -> list[Part]:
        """Every partition, the default partition and the login pool, before and after."""
        layout = plan.detail.layout
        parts: list[Part] = [
            Text(bullets([layout.words])),
            Table.of(("", "BEFORE", "AFTER"), layout.rows()),
        ]
        if layout.mask.endswith(".partitions"):
            parts.append(
                Note(
                    "The whole partition list is sent (updateMask replaces it); every other "
                    "partition is kept as it is, and the first stays first."
                )
            )
        return parts

    def wanted(self, plan: LayoutPlan) -> str:
        return plan.detail.layout.words

    def apply(self, cluster: Cluster, plan: LayoutPlan) -> Cluster:
        return apply_layout(cluster, plan.detail.layout)

    def applied(self, plan: LayoutPlan, current: Cluster) -> bool:
        return layout_applied(plan.detail.layout, current)


SLURM_LAYOUT = LayoutKind()
