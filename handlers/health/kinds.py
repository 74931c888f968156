"""A Slurm node's state as changes: Resume node and Drain node, each a kind of change of its
own, asked from a health alert, approved by a second person on a card, audited, and sent
through slurmrestd's update_node (``SLURM_NODE``).

- RESUME (scontrol(1): "return a node to service ... a DOWN node may be RESUMEd, and a DRAIN
  or DRAINING node is also made available"): the node takes jobs again. The card says what
  took it out and who, because a node drained by a health check may fail the next job.
- DRAIN with a reason (scontrol(1): "no further job will be scheduled on that node; running
  jobs are allowed to complete"; a reason is required): for a node that fails or does not
  respond while Slurm still schedules onto it.
Neither changes what the cluster costs: the node's VM is billed either way.
"""

from __future__ import annotations

from typing import Final, Literal, TypeVar

from handlers.changes.effects import SLURM_NODE
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, fingerprint, require_running
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.domain.operations import SlurmNode
from handlers.replies import Part, Table, Text, bullets
from handlers.sweep.health import BrokenNode, NodeTrouble

RESUME: Final = "node_resume"
DRAIN: Final = "node_drain"
OUT = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL"})  # out of service
MAX_REASON = 200  # clusterbot's bound on a reason (Slurm states none)


class NodeDetail(Detail):
    node: str
    trouble: str = ""  # what was wrong with it when asked ("" for a node in service)
    reason: str = ""  # RESUME: Slurm's reason it clears; DRAIN: the reason it sets
    by: str = ""  # who set the reason it clears


N = TypeVar("N", bound=NodeDetail)


class ResumeDetail(NodeDetail):
    kind: Literal["node_resume"] = RESUME


class DrainDetail(NodeDetail):
    kind: Literal["node_drain"] = DRAIN


def plan_resume(cluster: Cluster, node: BrokenNode, prices: PriceBook) -> ChangePlan[ResumeDetail]:
    require_running(cluster)
    if node.trouble == NodeTrouble.NOT_RESPONDING:
        raise PlanError(
            f"{node.name} is not responding: Slurm returns it to service by itself once it "
            "answers again; a RESUME does not reach it"
        )
    detail = ResumeDetail(node=node.name, trouble=str(node.trouble), reason=node.reason, by=node.by)
    return _plan(cluster, detail, prices)


def plan_drain(
    cluster: Cluster, node: str, reason: str, prices: PriceBook, trouble: str = ""
) -> ChangePlan[DrainDetail]:
    require_running(cluster)
    reason = " ".join(reason.split())
    if not reason:
        raise PlanError("a drain needs a reason: Slurm keeps it on the node for everyone to see")
    if len(reason) > MAX_REASON:
        raise PlanError(f"the reason is {len(reason)} characters; at most {MAX_REASON}")
    return _plan(cluster, DrainDetail(node=node, trouble=trouble, reason=reason), prices)


def _plan(cluster: Cluster, detail: N, prices: PriceBook) -> ChangePlan[N]:
    cost = prices.cluster_hour(cluster)
    return ChangePlan(
        cluster=cluster.name or "",
        detail=detail,
        cost_before=cost,
        cost_after=cost,  # the VM is billed in service or not
        fingerprint=fingerprint(cluster),
    )


class NodeKind(ChangeKind[N]):
    effect = SLURM_NODE
    state: str  # the update_node_msg's state

    def drift(self, plan: ChangePlan[N], current: Cluster) -> str | None:
        # a node's state is Slurm's, not the cluster's configuration: only RUNNING matters
        return None if current.state == "RUNNING" else f"{current.cluster_id} is {current.state}"

    def title(self, plan: ChangePlan[N]) -> str:
        return f"{self.heading}: {plan.cluster_id} / {plan.detail.node}"

    def node(self, plan: ChangePlan[N]) -> str:
        return plan.detail.node

    def message(self, plan: ChangePlan[N]) -> tuple[list[str], str | None]:
        return [self.state], None

    def card(self, plan: ChangePlan[N]) -> list[Part]:
        detail = plan.detail
        row = (detail.node, detail.trouble or "in service", detail.reason or "-", detail.by or "-")
        return [
            Text(bullets([self.effect_words(plan)])),
            Table.of(("NODE", "NOW", "REASON", "SET BY"), [row]),
        ]

    def effect_words(self, plan: ChangePlan[N]) -> str:
        raise NotImplementedError

    def shows(self, plan: ChangePlan[N], node: SlurmNode) -> bool:
        raise NotImplementedError

    def done(self, plan: ChangePlan[N]) -> str:
        raise NotImplementedError


class ResumeKind(NodeKind[ResumeDetail]):
    name = RESUME
    detail = ResumeDetail
    state = "RESUME"
    doing = "resume a node of"
    heading = "Resume node request"
    verb = "return a Slurm node to service in"

    def effect_words(self, plan: ChangePlan[ResumeDetail]) -> str:
        return (
            f"Slurm's RESUME of {plan.detail.node}: it takes jobs again. If what took it out "
            "remains (an Xid error, a failed health check), its next job may fail"
        )

    def wanted(self, plan: ChangePlan[ResumeDetail]) -> str:
        return f"resume node {plan.detail.node}"

    def shows(self, plan: ChangePlan[ResumeDetail], node: SlurmNode) -> bool:
        return not node.states & OUT

    def done(self, plan: ChangePlan[ResumeDetail]) -> str:
        return f"{plan.detail.node} is back in service"


class DrainKind(NodeKind[DrainDetail]):
    name = DRAIN
    detail = DrainDetail
    state = "DRAIN"
    doing = "drain a node of"
    heading = "Drain node request"
    verb = "drain a Slurm node of"

    def message(self, plan: ChangePlan[DrainDetail]) -> tuple[list[str], str | None]:
        return [self.state], plan.detail.reason

    def effect_words(self, plan: ChangePlan[DrainDetail]) -> str:
        return (
            f"Slurm's DRAIN of {plan.detail.node} with the reason {plan.detail.reason!r}: no "
            "new job starts on it, and the jobs on it run to their end"
        )

    def wanted(self, plan: ChangePlan[DrainDetail]) -> str:
        return f"drain node {plan.detail.node} ({plan.detail.reason})"

    def shows(self, plan: ChangePlan[DrainDetail], node: SlurmNode) -> bool:
        return bool(node.states & {"DRAIN", "DRAINED", "DRAINING"})

    def done(self, plan: ChangePlan[DrainDetail]) -> str:
        return f"{plan.detail.node} is drained"


NODE_RESUME, NODE_DRAIN = ResumeKind(), DrainKind()
