"""Injected faults: errors, delays and broken connections, before or after a change."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from bot.sandbox.controlplane import rpc


@dataclass
class Fault:
    """An injected failure or delay for requests matching a method and a path pattern."""

    id: int
    method: str | None = None
    path: str | None = None
    status: int | None = None
    message: str | None = None
    rate: float | None = None
    count: int | None = None
    latency_ms: float = 0.0
    retry_after: int | None = None
    when: str = "before"
    operation_error: dict[str, Any] | None = None  # {"code", "message", "details"}
    details: list[dict[str, Any]] | None = None  # the error's google.rpc.Status details
    skip: int = 0  # let this many matching requests through first
    drop: bool = False  # close the connection with no reply (after: once the change is made)
    fired: int = 0
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        return not (self.path and not re.search(self.path, path))

    def to_api(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class FaultLog:
    """The simulator state's faults (a mixin of ``SimulatorState``)."""

    faults: list[Fault]
    _ids: itertools.count[int]

    def add_fault(self, spec: dict[str, Any]) -> Fault:
        allowed = set(Fault.__dataclass_fields__) - {"id", "fired", "seen"}
        unknown = set(spec) - allowed
        if unknown:
            raise rpc.invalid(f"unknown fault fields: {', '.join(sorted(unknown))}")
        when = spec.get("when", "before")
        if when not in ("before", "after"):
            raise rpc.invalid("when must be 'before' or 'after'")
        status = spec.get("status")
        if when == "after" and status is not None and status not in rpc.LOST_REPLY_STATUSES:
            # A refusal (400, 403, 404, 409...) means the change was not made; only a reply
            # that can be lost on the way (429, any 5xx) may follow an applied change.
            statuses = ", ".join(map(str, sorted(rpc.LOST_REPLY_STATUSES)))
            raise rpc.invalid(f"a status after the change must be one of {statuses}")
        fault = Fault(id=next(self._ids), **spec)
        self.faults.append(fault)
        return fault

    def pick_fault(self, method: str, path: str, chance: float) -> Fault | None:
        """The first matching fault that fires for this request, counting it as used."""
        for fault in self.faults:
            if not fault.matches(method, path):
                continue
            fault.seen += 1
            if fault.seen <= fault.skip:
                continue
            if fault.count is not None and fault.fired >= fault.count:
                continue
            if fault.rate is not None and chance >= fault.rate:
                continue
            fault.fired += 1
            return fault
        return None
