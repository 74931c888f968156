"""What a capability adds, declared in one object, and what it is built from.

A capability is a package of the core (reading, changes, slurm, idle, health, schedules,
spend) that declares, in its ``capability.py``, everything it adds: its subcommands (with
their usage), its clicks, its kinds of change, its forms, and how its service is built
from the kernel. One list names the capabilities (``handlers/capabilities.py``); the registry
(``handlers/registry.py``) folds their declarations and refuses two of one name; the
dispatcher hands each subcommand and click its own capability's service. Nothing
central names a capability.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from handlers.changes.approvals import Approvals
    from handlers.changes.kind import ChangeKind
    from handlers.clicking import Click
    from handlers.commanding import Subcommand
    from handlers.costs import PriceBook
    from handlers.forms.spec import FormKindSpec
    from handlers.policy import Policy
    from handlers.reading.clusters import ClusterDirectory
    from handlers.reading.reports import Reports


@dataclass(frozen=True)
class Kernel:
    """What every capability's service is built from: the policy, the prices, the cluster
    directory, the approval flow every change goes through, the read side, every declared
    subcommand (for help), and ``parts``: pieces the composition root still builds for a
    capability, by the capability's name."""

    policy: Policy
    prices: PriceBook
    directory: ClusterDirectory
    approvals: Approvals
    reports: Reports
    commands: tuple[Subcommand[Any], ...] = ()
    parts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Capability:
    name: str
    # its service, handed to its subcommands' and clicks' ``run``; None where it is off
    # (its subcommands then say so)
    build: Callable[[Kernel], Any]
    commands: tuple[Subcommand[Any], ...] = ()
    clicks: tuple[Click, ...] = ()
    kinds: tuple[ChangeKind[Any], ...] = ()  # the kinds of change it plans
    forms: tuple[FormKindSpec, ...] = ()  # the forms its subcommands open
