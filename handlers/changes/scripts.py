"""Prolog and epilog scripts: one added, replaced, removed or moved. The whole list is sent
under its mask; the rules live in ``handlers/slurm/scripts.py``.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.changes.effects import PATCH
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, costless, require_running
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.replies import Note, Part, Table, Text, bullets
from handlers.slurm.scripts import (
    ScriptAction,
    ScriptChange,
    ScriptError,
    apply_scripts,
    script_change,
    scripts_applied,
)

NAME: Final = "slurm_scripts"


class ScriptsDetail(Detail):
    kind: Literal["slurm_scripts"] = NAME
    scripts: ScriptChange


ScriptsPlan = ChangePlan[ScriptsDetail]


def plan_slurm_scripts(
    cluster: Cluster,
    which: str,
    action: ScriptAction,
    index: int,
    to: int | None,
    prices: PriceBook,
    content: str | None = None,
) -> ScriptsPlan:
    """Add, replace, remove or move one prolog or epilog script; the whole list is sent."""
    require_running(cluster)
    try:
        change = script_change(cluster, which, action, index, to, content)
    except ScriptError as error:
        raise PlanError(str(error)) from None
    return costless(cluster, ScriptsDetail(scripts=change), change.mask, prices)


class ScriptsKind(ChangeKind[ScriptsDetail]):
    name = NAME
    detail = ScriptsDetail
    effect = PATCH
    doing = "change the prolog or epilog scripts of"
    heading = "Slurm scripts request"
    verb = "change the prolog or epilog scripts of"

    def card(self, plan: ScriptsPlan) -> list[Part]:
        scripts = plan.detail.scripts
        return [
            Text(bullets([scripts.words])),
            Table.of(("#", "BEFORE (sha256, first line)", "AFTER"), scripts.rows()),
            Note("The whole list is sent (updateMask replaces it), each script as it is now."),
        ]

    def wanted(self, plan: ScriptsPlan) -> str:
        return plan.detail.scripts.words

    def apply(self, cluster: Cluster, plan: ScriptsPlan) -> Cluster:
        return apply_scripts(cluster, plan.detail.scripts)

    def applied(self, plan: ScriptsPlan, current: Cluster) -> bool:
        return scripts_applied(plan.detail.scripts, current)


SLURM_SCRIPTS = ScriptsKind()
