"""What the buttons and the menu of an idle alert do.

Scale to zero from an approver acts at once (it is undone with a resize); from an operator it
posts a request for an approver. Delete always posts a request that a second person must
approve: the alert's dialog says so, and the click never deletes by itself. While a remedy is
open the alert shows it instead of its buttons; if the remedy is rejected, withdrawn, expires
or fails, the alert gets its buttons back (``AlertBoard.remedy_ended``).
"""

from __future__ import annotations

from dataclasses import replace

from bot.vertex.errors import VertexError
from handlers.actions import Keep, Remedy, Snooze
from handlers.alerts import AlertBoard
from handlers.approvals import Approvals
from handlers.commands import CommandError
from handlers.costs import PriceBook
from handlers.entities import Origin
from handlers.idle_alert import kept_text
from handlers.plans import ChangePlan, PlanError, PlanKind, plan_delete, plan_scale_to_zero
from handlers.policy import Role, may_approve
from handlers.ports import Clock, ControlPlane
from handlers.replies import Code, Reply, Strong, UserRef, notice
from handlers.words import duration


class IdleClicks:
    """Each answers one idle-alert click; a reply is shown to the clicker alone. Who may
    click was checked before (``handlers.dispatch``)."""

    def __init__(
        self,
        board: AlertBoard,
        changes: Approvals,
        vertex: ControlPlane,
        prices: PriceBook,
        clock: Clock,
    ) -> None:
        self.board = board
        self.changes = changes
        self.vertex = vertex
        self.prices = prices
        self.clock = clock

    async def snooze(self, actor: str, action: Snooze) -> Reply | None:
        until = self.clock() + action.seconds
        record = await self.board.update(
            action.cluster,
            lambda r: replace(r, snoozed_until=until, snoozed_by=actor, auto_action_at=None),
        )
        await self.board.edit(
            record,
            "snoozed",
            (
                Strong("Snoozed"),
                " by ",
                UserRef(actor),
                f" for {duration(action.seconds)}; clusterbot will say again if it is still "
                "idle then.",
            ),
        )
        return None

    async def keep(self, actor: str, action: Keep) -> Reply | None:
        if action.keep:
            record = await self.board.update(
                action.cluster,
                lambda r: replace(r, kept_by=actor, kept_at=self.clock(), auto_action_at=None),
            )
            await self.board.edit(record, "kept", kept_text(record))
            return None
        # watched again from now: a cluster still idle is alerted at the next sweep
        await self.board.update(
            action.cluster,
            lambda r: replace(r, kept_by=None, kept_at=None, alerted_at=None, alert_ts=None),
        )
        cluster_id = action.cluster.rsplit("/", 1)[-1]
        return notice("No longer kept", f"{cluster_id} is watched for idleness again.")

    async def remedy(self, actor: str, role: Role, action: Remedy) -> Reply | None:
        kind = PlanKind.DELETE if action.delete else PlanKind.RESIZE
        record, _ = await self.board.records.get(action.cluster)
        if record.remedy:
            return notice(
                "Already asked",
                "Request ",
                Code(record.remedy),
                " for this cluster is still open; decide it first.",
            )
        record = await self.board.update(action.cluster, lambda r: replace(r, auto_action_at=None))
        try:
            cluster = await self.vertex.get_cluster(action.cluster)
            plan: ChangePlan = (
                plan_delete(cluster, self.prices)
                if kind == PlanKind.DELETE
                else plan_scale_to_zero(cluster, self.prices)
            )
            channel = record.alert_channel or self.board.channel or ""
            request = await self.changes.submit(actor, channel, plan, origin=Origin.IDLE)
        except (PlanError, CommandError) as error:
            return notice("Not possible", str(error))
        except VertexError as error:
            return notice("Control plane error", error.user_message)
        record = await self.board.update(action.cluster, lambda r: replace(r, remedy=request.id))
        what = "Delete" if kind == PlanKind.DELETE else "Scale to zero"
        # A delete always waits for a second person; scaling to zero is undone by a resize.
        if kind == PlanKind.RESIZE and may_approve(self.changes.policy, role, kind):
            await self.board.edit(
                record,
                "answered",
                (
                    Strong(what),
                    " approved by ",
                    UserRef(actor),
                    ": request ",
                    Code(request.id),
                    ", under way (progress under its card).",
                ),
            )
            await self.changes.approve_now(request, actor)
            return None
        await self.board.edit(
            record,
            "answered",
            (
                Strong(what),
                " asked by ",
                UserRef(actor),
                ": request ",
                Code(request.id),
                " waits for an approver on its card. If it is rejected or expires, this alert "
                "gets its buttons back.",
            ),
        )
        return None
