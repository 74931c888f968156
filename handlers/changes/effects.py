"""What sending a change does to the control plane, and what recovery looks for, by the
shape of the change: a PATCH of the cluster (resize, Slurm settings, partitions and login
pool, prolog and epilog scripts), its DELETE, its CREATE (restore), nothing at all (a
standing change, recorded), or a change that ends as it is sent (a Slurm node's state).

The executor and its recovery run every change through its kind's effect without knowing
which kind it is; the kind answers for what "applied" and "drifted" mean for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, cast

from handlers.changes.plan import ChangePlan
from handlers.domain.errors import SlurmRefusedError, SlurmUnreadableError
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName
from handlers.domain.operations import Operation, SlurmNode
from handlers.domain.pools import ClusterState
from handlers.entities import RequestState
from handlers.ports import ControlPlane, NodeUpdater

Plan = ChangePlan[Any]


class Kind(Protocol):
    """What an effect asks of the kind of change it sends (``handlers.changes.kind``)."""

    recorded: str

    def apply(self, cluster: Cluster, plan: Plan) -> Cluster: ...

    def created(self, plan: Plan) -> Cluster: ...

    def applied(self, plan: Plan, current: Cluster) -> bool: ...

    def drift(self, plan: Plan, current: Cluster) -> str | None: ...


class Next(StrEnum):
    """What recovery does with a change that may or may not have reached the server."""

    FOLLOW = "follow"  # applied or under way: follow the cluster to the end
    SEND = "send"  # visibly not applied, and the plan still fits: send it (looked first)
    UNKNOWN = "unknown"  # neither: outcome unknown, check the cluster


@dataclass(frozen=True)
class Look:
    next: Next
    why: str = ""


SEND_WINDOW = 160.0  # seconds a control-plane change may be applied once sent, retries included
NODE_WINDOW = 50.0  # the same for a Slurm node update through the proxy (a shorter deadline)


@dataclass(frozen=True)
class Planes:
    """What an effect sends to: the control plane, and Slurm's node updates through it; and
    how long a call to each may still be applied once it is sent (its deadline, retries and
    the server's own timeout included)."""

    vertex: ControlPlane
    nodes: NodeUpdater | None = None
    window: float = SEND_WINDOW
    node_window: float = NODE_WINDOW


class Unsettled(Exception):
    """Whether the change applied is not known yet, and a later look will tell (a reply that
    never came, a Slurm that did not answer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Finished:
    """A change that ended as it was sent (no operation to follow): how, and in what words."""

    state: RequestState
    outcome: str


class Effect(Protocol):
    wants_absent: bool  # the cluster must not exist when the change is sent
    keeps_spec: bool  # the cluster's spec is kept before sending, to restore it from
    removes: bool  # the cluster is gone when it is done

    def window(self, planes: Planes) -> float:
        """How long its call may still be applied once sent."""
        ...

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        """Why the change no longer fits the cluster as read just before sending."""
        ...

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        """The operation to follow, or how the change ended as it was sent."""
        ...

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        """After a crash or a lost reply, from the cluster as it is now (None: absent)."""
        ...


class ControlPlaneEffect:
    """An effect sent to the control plane itself."""

    wants_absent = False
    keeps_spec = False
    removes = False

    def window(self, planes: Planes) -> float:
        return planes.window


class Patch(ControlPlaneEffect):
    """A PATCH of the cluster, its fields not in the plan kept as read."""

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else kind.drift(plan, current)

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        assert current is not None
        return await planes.vertex.update_cluster(kind.apply(current, plan), list(plan.update_mask))

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.UNKNOWN, f"{plan.cluster_id} no longer exists")
        if current.state == ClusterState.UPDATING or (
            current.state == ClusterState.RUNNING and kind.applied(plan, current)
        ):
            return Look(Next.FOLLOW)
        return _resend_or_unknown(kind, plan, current)


class Remove(ControlPlaneEffect):
    """The cluster's DELETE; its spec is kept first."""

    keeps_spec = True
    removes = True

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else kind.drift(plan, current)

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        return await planes.vertex.delete_cluster(plan.cluster)

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        if current is None or current.state == ClusterState.STOPPING:
            return Look(Next.FOLLOW)  # gone, or going: the tracker reports it done
        return _resend_or_unknown(kind, plan, current)


class Create(ControlPlaneEffect):
    """The cluster's CREATE from a kept spec, under its own id or a new one."""

    wants_absent = True

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        return None if current is None else f"{plan.cluster_id} exists now"

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        name = ClusterName.parse(plan.cluster)
        return await planes.vertex.create_cluster(name.target, name.cluster_id, kind.created(plan))

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.SEND)  # not created: the look-up came first
        if current.state in (ClusterState.PROVISIONING, ClusterState.RUNNING):
            return Look(Next.FOLLOW)  # it exists: the create reached the server
        return Look(Next.UNKNOWN, f"{plan.cluster_id} exists and is {current.state}; check it")


class Record(ControlPlaneEffect):
    """A standing change (a schedule): approving it is all it does, so nothing is sent and
    recording it again after a crash is harmless."""

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        return None

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        return Finished(RequestState.SUCCEEDED, kind.recorded)  # approved is done

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        return Look(Next.SEND)  # nothing was sent: record it


class NodeChange(Protocol):
    """What a kind of change to one Slurm node tells ``NodeUpdate``."""

    def node(self, plan: Plan) -> str: ...

    def message(self, plan: Plan) -> tuple[list[str], str | None]:
        """The update_node_msg's ``state`` and ``reason``."""
        ...

    def shows(self, plan: Plan, node: SlurmNode) -> bool:
        """Whether the node as Slurm lists it shows the change."""
        ...

    def done(self, plan: Plan) -> str: ...


class NodeUpdate:
    """A Slurm node's state, set through the control plane's proxy (slurmrestd's
    ``POST /slurm/vX/node/NAME``, the update_node of SchedMD's OpenAPI spec). It ends as it is
    sent: slurmctld applies it at once, so there is no operation to follow. The node is read
    before every send, so a change sent before a crash, or whose reply was lost, is found
    applied and not sent a second time; a Slurm that does not answer is asked again later."""

    wants_absent = False
    keeps_spec = False
    removes = False

    def window(self, planes: Planes) -> float:
        return planes.node_window

    def unfit(self, kind: Kind, plan: Plan, current: Cluster | None) -> str | None:
        if current is None or current.state == ClusterState.RUNNING:
            return None
        return f"{plan.cluster_id} is now {current.state}, so its Slurm cannot be reached"

    async def send(
        self, planes: Planes, kind: Kind, plan: Plan, current: Cluster | None
    ) -> Operation | Finished:
        change, updater = cast(NodeChange, kind), planes.nodes
        if updater is None:
            return Finished(RequestState.REFUSED, "this clusterbot does not reach Slurm")
        name = change.node(plan)
        found = await self._node(updater, plan, name)
        if isinstance(found, Finished):
            return found
        if change.shows(plan, found):  # sent before a crash, or done by someone else
            return Finished(RequestState.SUCCEEDED, f"{change.done(plan)} (found so)")
        states, reason = change.message(plan)
        try:
            await updater.update_node(plan.cluster, name, states, reason)
        except SlurmRefusedError as error:
            return Finished(RequestState.REFUSED, f"slurmrestd refused it: {error.reason}")
        except SlurmUnreadableError as error:  # it may have reached slurmctld: look later
            raise Unsettled(f"{error.reason}; node {name} is looked at again") from None
        return Finished(RequestState.SUCCEEDED, change.done(plan))

    @staticmethod
    async def _node(updater: NodeUpdater, plan: Plan, name: str) -> SlurmNode | Finished:
        try:
            nodes = await updater.nodes(plan.cluster)
        except SlurmUnreadableError as error:  # nothing sent: asked again a little later
            raise Unsettled(f"{error.reason}; nothing was sent yet") from None
        found = next((n for n in nodes if n.name == name), None)
        if found is None:
            return Finished(RequestState.REFUSED, f"Slurm has no node {name} now")
        return found

    def look(self, kind: Kind, plan: Plan, current: Cluster | None) -> Look:
        if current is None:
            return Look(Next.UNKNOWN, f"{plan.cluster_id} no longer exists")
        return Look(Next.SEND)  # the send reads the node first: never twice


def _resend_or_unknown(kind: Kind, plan: Plan, current: Cluster) -> Look:
    if kind.drift(plan, current) is None:
        return Look(Next.SEND)
    return Look(
        Next.UNKNOWN,
        f"{plan.cluster_id} changed in another way while the change was being sent "
        f"(it is {current.state})",
    )


PATCH, REMOVE, CREATE, RECORD = Patch(), Remove(), Create(), Record()
SLURM_NODE = NodeUpdate()
