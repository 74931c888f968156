"""Every kind of change, registered once.

A kind is one module that plans its change and subclasses ``ChangeKind``; it is known to
every flow (approval, execution, tracking, recovery, audit) by being listed here, once in
``KINDS`` and once in ``AnyDetail``, the union a stored plan is read back with.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from handlers.changes.delete import DELETE, DeleteDetail
from handlers.changes.kind import ChangeKind
from handlers.changes.layout import SLURM_LAYOUT, LayoutDetail
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import RESIZE, ResizeDetail
from handlers.changes.restore import RESTORE, RestoreDetail
from handlers.changes.scripts import SLURM_SCRIPTS, ScriptsDetail
from handlers.changes.settings import SLURM_SETTINGS, SettingsDetail

KINDS: dict[str, ChangeKind[Any]] = {
    kind.name: kind
    for kind in (RESIZE, DELETE, RESTORE, SLURM_SETTINGS, SLURM_LAYOUT, SLURM_SCRIPTS)
}
AnyDetail = Annotated[
    ResizeDetail | DeleteDetail | RestoreDetail | SettingsDetail | LayoutDetail | ScriptsDetail,
    Field(discriminator="kind"),
]
_STORED: TypeAdapter[ChangePlan[AnyDetail]] = TypeAdapter(ChangePlan[AnyDetail])


def kind_of(plan: ChangePlan[Any]) -> ChangeKind[Any]:
    return KINDS[plan.kind]


def read_plan(text: str | bytes) -> ChangePlan[Any]:
    """A plan as stored (JSON), its detail read as the model of its kind."""
    return _STORED.validate_json(text)
