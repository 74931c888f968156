"""What a person's command or click runs on, built once by ``handlers.services.build``: the
read side, the change service and, where idle alerts are on, their clicks. One name for one
bag: the registry's commands and the click table take it alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from handlers.changes.approvals import Approvals
    from handlers.health.clicks import HealthClicks
    from handlers.idle.clicks import IdleClicks
    from handlers.reading.reports import Reports
    from handlers.schedules.service import Schedules
    from handlers.spend.report import SpendReport


@dataclass(frozen=True)
class Desk:
    reports: Reports
    approvals: Approvals
    idle: IdleClicks | None = None
    spend: SpendReport | None = None  # None: the store keeps no spend ledger
    schedules: Schedules | None = None  # None: no schedule store
    health: HealthClicks | None = None  # None: no health alerts are posted
