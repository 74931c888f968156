"""Every kind of change, registered once.

A kind is one module that plans its change and subclasses ``ChangeKind``; listed in
``KINDS`` it is known to every flow (approval, execution, tracking, recovery, audit), and a
stored plan of it is read back with its own detail model.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from handlers.changes.delete import DELETE
from handlers.changes.kind import ChangeKind
from handlers.changes.layout import SLURM_LAYOUT
from handlers.changes.plan import ChangePlan, Detail
from handlers.changes.resize import RESIZE
from handlers.changes.restore import RESTORE
from handlers.changes.scripts import SLURM_SCRIPTS
from handlers.changes.settings import SLURM_SETTINGS
from handlers.health.kinds import NODE_DRAIN, NODE_RESUME
from handlers.schedules.kind import SCHEDULE

KINDS: dict[str, ChangeKind[Any]] = {
    kind.name: kind
    for kind in (
        RESIZE,
        DELETE,
        RESTORE,
        SLURM_SETTINGS,
        SLURM_LAYOUT,
        SLURM_SCRIPTS,
        SCHEDULE,
        NODE_RESUME,
        NODE_DRAIN,
    )
}


@functools.cache
def _reader(models: tuple[type[Detail], ...]) -> TypeAdapter[ChangePlan[Any]]:
    """How a stored plan is read: its detail chosen by ``kind`` among these models."""
    details: Any = Union[models]  # noqa: UP007
    generic: Any = ChangePlan
    return TypeAdapter(generic[Annotated[details, Field(discriminator="kind")]])


def kind_of(plan: ChangePlan[Any]) -> ChangeKind[Any]:
    return KINDS[plan.kind]


def read_plan(text: str | bytes) -> ChangePlan[Any]:
    """A plan as stored (JSON), its detail read as the model of its kind."""
    return _reader(tuple(kind.detail for kind in KINDS.values())).validate_json(text)
