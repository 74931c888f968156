"""What sending a change does to the control plane, and what recovery looks for, by the
shape of the change: a PATCH of the cluster (resize, Slurm settings, partitions and login
pool, prolog and epilog scripts), its DELETE, or its CREATE (restore).

The executor and its recovery run every change through its kind's effect without knowing
which kind it is; the kind answers for what "applied" and "drifted" mean for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from bot.vertex.models import Cluster, ClusterState
from bot.vertex.names import ClusterName
from bot.vertex.operations import Operation
from handlers.changes.plan import ChangePlan
from handlers.ports import ControlPlane

if TYPE_CHECKING:
    from handlers.changes.kind import ChangeKind

Plan = ChangePlan[Any]


class Next(StrEnum):
    """What recovery does with a change that may or may not have reached the server."""

    FOLLOW = "follow"  # applied or under way: follow the cluster to the end
    SEND = "send"  # visibly not applied, and the plan still fits: send it (looked first)
    UNKNOWN = "unknown"  # neither: outcome unknown, check the cluster


@dataclass(frozen=True)
class Look:
    next: Next
    why: str = ""


class Effect(Protocol):
    wants_absent: bool  # the cluster must not exist when the change is sent
    keeps_spec: bool  # the cluster's spec is kept before sending, to restore it from
    removes: bool  # the cluster is gone when it is done
    local: bool  # nothing is sent: approving it is what it does (a standing change)

    def unfit(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> str | None:
        """Why the change no longer fits the cluster as read just before sending."""
        ...

    async def send(
        self, vertex: ControlPlane, kind: ChangeKind[Any], plan: Plan, current: Cluster | None
    ) -> Operation: ...

    def look(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> Look:
        """After a crash or a lost reply, from the cluster as it is now (None: absent)."""
        ...


class Patch:
    """A PATCH of the cluster, its fields not in the plan kept as read."""

    wants_absent = False
    keeps_spec = False
    removes = False
    local = False

    def unfit(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else kind.drift(plan, current)

    async def send(
        self, vertex: ControlPlane, kind: ChangeKind[Any], plan: Plan, current: Cluster | None
    ) -> Operation:
        assert current is not None
        return await vertex.update_cluster(kind.apply(current, plan), list(plan.update_mask))

    def look(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.UNKNOWN, f"{plan.cluster_id} no longer exists")
        if current.state == ClusterState.UPDATING or (
            current.state == ClusterState.RUNNING and kind.applied(plan, current)
        ):
            return Look(Next.FOLLOW)
        return _resend_or_unknown(kind, plan, current)


class Remove:
    """The cluster's DELETE; its spec is kept first."""

    wants_absent = False
    keeps_spec = True
    removes = True
    local = False

    def unfit(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else kind.drift(plan, current)

    async def send(
        self, vertex: ControlPlane, kind: ChangeKind[Any], plan: Plan, current: Cluster | None
    ) -> Operation:
        return await vertex.delete_cluster(plan.cluster)

    def look(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> Look:
        if current is None or current.state == ClusterState.STOPPING:
            return Look(Next.FOLLOW)  # gone, or going: the tracker reports it done
        return _resend_or_unknown(kind, plan, current)


class Create:
    """The cluster's CREATE from a kept spec, under its own id or a new one."""

    wants_absent = True
    keeps_spec = False
    removes = False
    local = False

    def unfit(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else f"{plan.cluster_id} exists now"

    async def send(
        self, vertex: ControlPlane, kind: ChangeKind[Any], plan: Plan, current: Cluster | None
    ) -> Operation:
        name = ClusterName.parse(plan.cluster)
        return await vertex.create_cluster(name.target, name.cluster_id, kind.created(plan))

    def look(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.SEND)  # not created: the look-up came first
        if current.state in (ClusterState.PROVISIONING, ClusterState.RUNNING):
            return Look(Next.FOLLOW)  # it exists: the create reached the server
        return Look(Next.UNKNOWN, f"{plan.cluster_id} exists and is {current.state}; check it")


class Record:
    """A standing change (a schedule): approving it is all it does, so nothing is sent and
    recording it again after a crash is harmless."""

    wants_absent = False
    keeps_spec = False
    removes = False
    local = True

    def unfit(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> str | None:
        return None

    async def send(
        self, vertex: ControlPlane, kind: ChangeKind[Any], plan: Plan, current: Cluster | None
    ) -> Operation:
        raise NotImplementedError("a standing change sends nothing")

    def look(self, kind: ChangeKind[Any], plan: Plan, current: Cluster | None) -> Look:
        return Look(Next.SEND)  # nothing was sent: record it


def _resend_or_unknown(kind: ChangeKind[Any], plan: Plan, current: Cluster) -> Look:
    if kind.drift(plan, current) is None:
        return Look(Next.SEND)
    return Look(
        Next.UNKNOWN,
        f"{plan.cluster_id} changed in another way while the change was being sent "
        f"(it is {current.state})",
    )


PATCH, REMOVE, CREATE, RECORD = Patch(), Remove(), Create(), Record()
