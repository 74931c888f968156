"""The one list of capabilities. A new capability is its package (with a ``capability.py``
declaring what it adds, ``handlers/capability.py``) and one line here; the order is the
order of help."""

from __future__ import annotations

from typing import Any

from handlers.capability import Capability
from handlers.changes.capability import CHANGES, RELEASES
from handlers.health.capability import HEALTH_CAPABILITY
from handlers.idle.capability import IDLE
from handlers.owners.capability import OWNERS
from handlers.reading.capability import READING
from handlers.registry import Registry
from handlers.schedules.capability import SCHEDULES_CAPABILITY
from handlers.slurm.capability import SLURM
from handlers.spend.capability import DIGEST, SPEND

CAPABILITIES: tuple[Capability[Any], ...] = (
    READING,
    SLURM,
    CHANGES,
    IDLE,
    SPEND,
    SCHEDULES_CAPABILITY,
    HEALTH_CAPABILITY,
    OWNERS,
    RELEASES,
    DIGEST,
)
REGISTRY = Registry(CAPABILITIES)
