"""Delete: the cluster removed, with what it loses and what outlives it on the card.

The spec is kept before the DELETE is sent (the ``Remove`` effect), so a done delete offers
Restore on its card.
"""

from __future__ import annotations

from typing import Final, Literal

from handlers.actions import RestoreClicked
from handlers.changes.effects import REMOVE
from handlers.changes.kind import ChangeKind
from handlers.changes.plan import ChangePlan, Detail, PlanError, fingerprint
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.entities import ApprovalRequest, RequestState
from handlers.replies import Button, Buttons, Code, Confirm, Line, Note, Part, Strong, Text, bullets

NAME: Final = "delete"


class DeleteDetail(Detail):
    kind: Literal["delete"] = NAME
    losses: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


DeletePlan = ChangePlan[DeleteDetail]


def _losses(cluster: Cluster) -> list[str]:
    nodes = sum(cluster.nodes(p) for p in cluster.node_pools)
    slurm = cluster.slurm
    losses = [
        f"all {nodes} node{'s' if nodes != 1 else ''} in pools "
        f"{', '.join(p.id for p in cluster.node_pools)}, with their local disks",
        "the Slurm controller, its queue (running and pending jobs are killed) and its "
        "accounting data",
    ]
    if slurm.partitions:
        losses.append("partitions " + ", ".join(p.id for p in slurm.partitions))
    scripts = len(slurm.prolog_bash_scripts or []) + len(slurm.epilog_bash_scripts or [])
    if scripts:
        losses.append(f"{scripts} prolog/epilog scripts and the slurm.conf settings")
    return losses


def _kept(cluster: Cluster) -> list[str]:
    kept = []
    home = cluster.slurm.home_directory_storage
    if home:
        kept.append(
            f"home directories in {home}: a separate resource, not deleted with the cluster"
        )
    for pool in cluster.node_pools:
        for mount in [*(pool.filestores or []), *(pool.lustres or [])]:
            kept.append(f"{mount}, mounted on {pool.id}: not deleted with the cluster")
    for pool in cluster.node_pools:
        if pool.reserved:
            name = f" {pool.reservation_name}" if pool.reservation_name else ""
            kept.append(
                f"the reservation{name} behind {pool.id}: deleting the cluster does not "
                "release it, and it is billed until it is released"
            )
    return list(dict.fromkeys(kept))


def plan_delete(cluster: Cluster, prices: PriceBook) -> DeletePlan:
    if cluster.state in ("STOPPING", "PROVISIONING"):
        raise PlanError(f"{cluster.cluster_id} is {cluster.state}; it cannot be deleted now")
    freed = prices.freed_hour(cluster, cluster.node_pools)
    before = prices.cluster_hour(cluster)
    return ChangePlan(
        cluster=cluster.name or "",
        detail=DeleteDetail(losses=tuple(_losses(cluster)), kept=tuple(_kept(cluster))),
        cost_before=before,
        cost_after=None if before is None or freed is None else before - freed,
        fingerprint=fingerprint(cluster),
    )


class DeleteKind(ChangeKind[DeleteDetail]):
    name = NAME
    detail = DeleteDetail
    effect = REMOVE
    doing = "delete"
    heading = "Delete request"
    verb = "delete"
    destructive = True
    needs_running = False

    def ask(self, plan: DeletePlan) -> Line:
        return (" asks to ", Strong("delete"), " cluster ", *super().ask(plan)[1:])

    def card(self, plan: DeletePlan) -> list[Part]:
        parts: list[Part] = [Text(Strong("This will remove"), "\n" + bullets(plan.detail.losses))]
        if plan.detail.kept:
            parts.append(Text(Strong("Kept"), "\n" + bullets(plan.detail.kept)))
        return parts

    def approve(self, plan: DeletePlan) -> tuple[str, str, Confirm | None]:
        confirm = Confirm(
            title=f"Delete {plan.cluster_id}?",
            text=(
                "This deletes ",
                Strong(plan.cluster_id),
                " and everything listed on the card. It cannot be undone.",
            ),
            confirm="Delete",
            deny="Cancel",
            danger=True,
        )
        return "Approve delete", "danger", confirm

    def finished(self, request: ApprovalRequest) -> list[Part]:
        if request.state != RequestState.SUCCEEDED:
            return []
        return [
            Buttons((Button(RestoreClicked(request.id), "Restore"),)),
            Note(
                "Its spec was kept before the delete: Restore (or ",
                Code(f"/cluster restore {request.plan.cluster_id}"),
                ") asks to create it again.",
            ),
        ]

    def wanted(self, plan: DeletePlan) -> str:
        return "the cluster deleted"

    def words(self, plan: DeletePlan) -> str:
        return "delete the cluster"

    def applied(self, plan: DeletePlan, current: Cluster) -> bool:
        return current.state == "STOPPING"


DELETE = DeleteKind()
