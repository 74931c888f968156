"""What sending a change does to the control plane, and what recovery looks for, by the
shape of the change: a PATCH of the cluster (resize, Slurm settings, partitions and login
pool, prolog and epilog scripts), its DELETE, or its CREATE (restore).

The executor and its recovery run every change through its effect without knowing which
kind it is; a new kind of change names the effect it has (``EFFECTS``) and what it does in
words (``DOING``), and adds nothing to either.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.vertex.models import Cluster, ClusterState
from bot.vertex.names import ClusterName
from bot.vertex.operations import Operation
from handlers.plans import ChangePlan, PlanKind, applied, apply_plan, drift
from handlers.ports import ControlPlane


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

    def unfit(self, plan: ChangePlan, current: Cluster | None) -> str | None:
        """Why the change no longer fits the cluster as read just before sending."""
        ...

    async def send(
        self, vertex: ControlPlane, plan: ChangePlan, current: Cluster | None
    ) -> Operation: ...

    def look(self, plan: ChangePlan, current: Cluster | None) -> Look:
        """After a crash or a lost reply, from the cluster as it is now (None: absent)."""
        ...


class Patch:
    """A PATCH of the cluster, its fields not in the plan kept as read."""

    wants_absent = False
    keeps_spec = False

    def unfit(self, plan: ChangePlan, current: Cluster | None) -> str | None:
        return None if current is None else drift(plan, current)

    async def send(
        self, vertex: ControlPlane, plan: ChangePlan, current: Cluster | None
    ) -> Operation:
        assert current is not None
        return await vertex.update_cluster(apply_plan(current, plan), list(plan.update_mask))

    def look(self, plan: ChangePlan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.UNKNOWN, f"{plan.cluster_id} no longer exists")
        if current.state == ClusterState.UPDATING or (
            current.state == ClusterState.RUNNING and applied(plan, current)
        ):
            return Look(Next.FOLLOW)
        return _resend_or_unknown(plan, current)


class Remove:
    """The cluster's DELETE; its spec is kept first."""

    wants_absent = False
    keeps_spec = True

    def unfit(self, plan: ChangePlan, current: Cluster | None) -> str | None:
        return None if current is None else drift(plan, current)

    async def send(
        self, vertex: ControlPlane, plan: ChangePlan, current: Cluster | None
    ) -> Operation:
        return await vertex.delete_cluster(plan.cluster)

    def look(self, plan: ChangePlan, current: Cluster | None) -> Look:
        if current is None or current.state == ClusterState.STOPPING:
            return Look(Next.FOLLOW)  # gone, or going: the tracker reports it done
        return _resend_or_unknown(plan, current)


class Create:
    """The cluster's CREATE from a kept spec, under its own id or a new one."""

    wants_absent = True
    keeps_spec = False

    def unfit(self, plan: ChangePlan, current: Cluster | None) -> str | None:
        return None if current is None else f"{plan.cluster_id} exists now"

    async def send(
        self, vertex: ControlPlane, plan: ChangePlan, current: Cluster | None
    ) -> Operation:
        assert plan.spec is not None
        name = ClusterName.parse(plan.cluster)
        return await vertex.create_cluster(
            name.target, name.cluster_id, Cluster.model_validate(plan.spec)
        )

    def look(self, plan: ChangePlan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.SEND)  # not created: the look-up came first
        if current.state in (ClusterState.PROVISIONING, ClusterState.RUNNING):
            return Look(Next.FOLLOW)  # it exists: the create reached the server
        return Look(Next.UNKNOWN, f"{plan.cluster_id} exists and is {current.state}; check it")


def _resend_or_unknown(plan: ChangePlan, current: Cluster) -> Look:
    if drift(plan, current) is None:
        return Look(Next.SEND)
    return Look(
        Next.UNKNOWN,
        f"{plan.cluster_id} changed in another way while the change was being sent "
        f"(it is {current.state})",
    )


PATCH, REMOVE, CREATE = Patch(), Remove(), Create()
EFFECTS: dict[PlanKind, Effect] = {
    PlanKind.RESIZE: PATCH,
    PlanKind.SLURM_CONFIG: PATCH,
    PlanKind.SLURM_LAYOUT: PATCH,
    PlanKind.SLURM_SCRIPTS: PATCH,
    PlanKind.DELETE: REMOVE,
    PlanKind.RESTORE: CREATE,
}
DOING = {  # what a change does, for "Could not …"
    PlanKind.RESIZE: "resize",
    PlanKind.DELETE: "delete",
    PlanKind.SLURM_CONFIG: "change the Slurm settings of",
    PlanKind.SLURM_LAYOUT: "change the partitions or login pool of",
    PlanKind.RESTORE: "restore",
    PlanKind.SLURM_SCRIPTS: "change the prolog or epilog scripts of",
}


def effect_of(plan: ChangePlan) -> Effect:
    return EFFECTS[plan.kind]
