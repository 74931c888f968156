"""A change plan: what a change will do, exactly, before anyone approves it.

Every plan has the same frame: the cluster, the ``updateMask``, the estimated cost per hour
before and after (a range when a pool scales with the queue), warnings the approver must see,
and a fingerprint of the cluster's configuration when the plan was made. The API has no
etag, so the fingerprint is how an approval notices that the cluster changed in between.
What is particular to one kind of change (its pools, its slurm.conf keys, its scripts, the
spec it creates) is the plan's ``detail``, a model owned by that kind's module; ``kind``
names which.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from handlers.costs import PriceBook, Range
from handlers.domain.models import Cluster
from handlers.domain.names import target_of
from handlers.errors import UserError

# The parts of a cluster a change depends on; output fields (status, events) are left out.
FINGERPRINT_FIELDS = ("nodePools", "orchestratorSpec", "labels", "displayName")
# Fields that plans stored before kinds had a detail of their own kept at the top level.
FLAT_DETAIL_FIELDS = (
    *("pools", "settings", "layout", "scripts", "spec", "restored_from", "kept_at"),
    *("losses", "kept"),
)


class PlanError(UserError):
    """The change cannot be planned; the message is meant for the user."""


class Detail(BaseModel):
    """What one kind of change holds beyond the frame; ``kind`` tells the kinds apart, and
    ``change_kind`` is the kind itself, bound when the kind is made (``ChangeKind``)."""

    model_config = ConfigDict(frozen=True)
    change_kind: ClassVar[Any] = None

    kind: str


D = TypeVar("D", bound=Detail)


class ChangePlan(BaseModel, Generic[D]):
    model_config = ConfigDict(frozen=True)

    cluster: str
    detail: D
    update_mask: tuple[str, ...] = ()
    cost_before: float | None = None
    cost_after: float | None = None  # with every changed pool at its new minimum
    cost_after_high: float | None = None  # at the new maxima; None: same as cost_after
    fingerprint: str
    warnings: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_detail(cls, data: Any) -> Any:
        """Read a plan stored before its kind's fields moved into ``detail``."""
        if not isinstance(data, dict) or "detail" in data or "kind" not in data:
            return data
        data = dict(data)
        detail = {"kind": data.pop("kind")}
        for name in FLAT_DETAIL_FIELDS:
            if name in data:
                detail[name] = data.pop(name)
        return {**data, "detail": detail}

    @property
    def kind(self) -> str:
        return self.detail.kind

    @property
    def cluster_id(self) -> str:
        return self.cluster.rsplit("/", 1)[-1]

    @property
    def target(self) -> str:
        """``project/region`` of the cluster."""
        return target_of(self.cluster)

    @property
    def after(self) -> Range:
        high = self.cost_after if self.cost_after_high is None else self.cost_after_high
        return Range(self.cost_after, high)

    @property
    def cost_delta(self) -> Range:
        if self.cost_before is None or not self.after.known:
            return Range(None, None)
        assert self.after.low is not None and self.after.high is not None
        return Range(self.after.low - self.cost_before, self.after.high - self.cost_before)


def fingerprint(cluster: Cluster) -> str:
    document = cluster.to_api()
    relevant: dict[str, Any] = {k: document.get(k) for k in FINGERPRINT_FIELDS}
    relevant["nodePools"] = sorted(relevant.get("nodePools") or [], key=lambda p: str(p["id"]))
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def require_running(cluster: Cluster) -> None:
    if cluster.state != "RUNNING":
        raise PlanError(
            f"{cluster.cluster_id} is {cluster.state}; changes can be requested when it is RUNNING"
        )


def costless(
    cluster: Cluster, detail: D, mask: str, prices: PriceBook, warnings: tuple[str, ...] = ()
) -> ChangePlan[D]:
    """A Slurm change under one mask path: the cluster costs what it costs now."""
    cost = prices.cluster_hour(cluster)
    return ChangePlan(
        cluster=cluster.name or "",
        detail=detail,
        update_mask=(mask,),
        cost_before=cost,
        cost_after=cost,
        fingerprint=fingerprint(cluster),
        warnings=warnings,
    )


def total(values: Iterable[float | None]) -> float | None:
    """The sum, or None when any part is unknown."""
    result = 0.0
    for value in values:
        if value is None:
            return None
        result += value
    return result
