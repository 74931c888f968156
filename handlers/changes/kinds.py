"""Which kind a plan is of, and how a stored plan is read back.

A kind is one module that plans its change and subclasses ``ChangeKind``; its capability
declares it (``Capability.kinds``), and so it is known to every flow (approval, execution,
tracking, recovery, audit). A kind is bound to its detail model when it is made, so a plan
names its kind by its detail alone; a stored plan is read back with its own detail model
among the kinds the registry holds (``Registry.read_plan``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail


@functools.cache
def _reader(models: tuple[type[Detail], ...]) -> TypeAdapter[ChangePlan[Any]]:
    """How a stored plan is read: its detail chosen by ``kind`` among these models."""
    details: Any = Union[models]  # noqa: UP007
    generic: Any = ChangePlan
    return TypeAdapter(generic[Annotated[details, Field(discriminator="kind")]])


def kind_of(plan: ChangePlan[Any]) -> ChangeKind[Any]:
    kind = type(plan.detail).change_kind
    if kind is None:
        raise LookupError(f"{type(plan.detail).__name__} belongs to no kind of change")
    return kind  # type: ignore[no-any-return]


def read_plan(text: str | bytes, kinds: Iterable[ChangeKind[Any]]) -> ChangePlan[Any]:
    """A plan as stored (JSON), its detail read as the model of its kind."""
    return _reader(tuple(kind.detail for kind in kinds)).validate_json(text)
