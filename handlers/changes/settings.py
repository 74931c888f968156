"""Slurm settings: slurm.conf keys set and unset in the cluster's ``config`` map.

The map is replaced whole by its mask, so the PATCH sends every key, changed or not; the
rules for which keys and values are refused live in ``handlers/slurm/settings.py``.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.changes.effects import PATCH
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, costless, require_running
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.replies import Code, Note, Part, Table, Text, bullets
from handlers.slurm.settings import (
    SettingChange,
    SettingError,
    config_after,
    meaning,
    same_config,
    setting_changes,
    slurm_copy,
)

NAME: Final = "slurm_config"
MASK = "orchestrator_spec.slurm_spec.config"  # the REST document's mask path


class SettingsDetail(Detail):
    kind: Literal["slurm_config"] = NAME
    settings: tuple[SettingChange, ...] = ()


SettingsPlan = ChangePlan[SettingsDetail]


def plan_slurm_config(
    cluster: Cluster, sets: dict[str, str], unsets: list[str], prices: PriceBook
) -> SettingsPlan:
    """Set and unset slurm.conf keys; refused before any card when a key is managed by the
    service, a known key's value is malformed, or nothing would change."""
    require_running(cluster)
    try:
        changes = setting_changes(cluster.slurm.config or {}, sets, unsets)
    except SettingError as error:
        raise PlanError(f"{error} on {cluster.cluster_id}") from None
    return costless(cluster, SettingsDetail(settings=tuple(changes)), MASK, prices)


class SettingsKind(ChangeKind[SettingsDetail]):
    name = NAME
    detail = SettingsDetail
    effect = PATCH
    doing = "change the Slurm settings of"
    heading = "Slurm settings request"
    verb = "change the slurm.conf settings of"

    def card(self, plan: SettingsPlan) -> list[Part]:
        """slurm.conf keys before and after, and what each known key does."""
        settings = plan.detail.settings
        rows = [(c.key, c.before or "(not set)", c.after or "(unset)") for c in settings]
        parts: list[Part] = [
            Text(bullets([c.words for c in settings])),
            Table.of(("KEY", "BEFORE", "AFTER"), rows),
        ]
        for change in settings:
            known = meaning(change.key)
            if known:
                parts.append(Note(Code(change.key), f": {known}"))
        whole = "The whole slurm.conf map is sent (updateMask replaces it); other keys are kept."
        return [*parts, Note(whole)]

    def wanted(self, plan: SettingsPlan) -> str:
        return ", ".join(c.words for c in plan.detail.settings)

    def apply(self, cluster: Cluster, plan: SettingsPlan) -> Cluster:
        changed, slurm = slurm_copy(cluster)
        # a map field is replaced whole by its mask: send every key, changed or not
        slurm.config = config_after(cluster.slurm.config or {}, plan.detail.settings)
        return changed

    def applied(self, plan: SettingsPlan, current: Cluster) -> bool:
        now = current.slurm.config or {}
        return same_config(config_after(now, plan.detail.settings), now)


SLURM_SETTINGS = SettingsKind()
