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
from handlers.alerts import AlertBoard
from handlers.approvals import Approvals
from handlers.commands import CommandError
from handlers.costs import PriceBook
from handlers.entities import Origin
from handlers.idle_alert import kept_text
from handlers.plans import ChangePlan, PlanError, PlanKind, plan_delete, plan_scale_to_zero
from handlers.policy import Role, may_approve
from handlers.ports import Clock, ControlPlane
from handlers.replies import Reply, Text, escape, mention
from handlers.words import duration


def _notice(title: str, text: str) -> Reply:
    return Reply(title).add(Text(text))


class IdleClicks:
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

    async def click(self, action: str, actor: str, role: Role, value: str) -> Reply | None:
        """Answer an idle-alert button; a reply is shown to the clicker alone."""
        if role < Role.OPERATOR:
            return _notice(
                "Not allowed",
                f"Acting on idle alerts needs the operator role; you are {role.label}.",
            )
        if action == "idle_snooze":
            seconds_text, _, cluster = value.partition("|")
            try:
                seconds = float(seconds_text)
            except ValueError:
                return _notice("Not understood", "That snooze choice is not one clusterbot offers.")
            until = self.clock() + seconds
            record = await self.board.update(
                cluster,
                lambda r: replace(r, snoozed_until=until, snoozed_by=actor, auto_action_at=None),
            )
            await self.board.edit(
                record,
                "snoozed",
                f"*Snoozed* by {mention(actor)} for {duration(seconds)}; clusterbot will say "
                "again if it is still idle then.",
            )
            return None
        if action == "idle_keep":
            record = await self.board.update(
                value,
                lambda r: replace(r, kept_by=actor, kept_at=self.clock(), auto_action_at=None),
            )
            await self.board.edit(record, "kept", kept_text(record))
            return None
        if action == "idle_unkeep":
            # watched again from now: a cluster still idle is alerted at the next sweep
            await self.board.update(
                value,
                lambda r: replace(r, kept_by=None, kept_at=None, alerted_at=None, alert_ts=None),
            )
            return _notice(
                "No longer kept",
                f"{escape(value.rsplit('/', 1)[-1])} is watched for idleness again.",
            )
        kind = PlanKind.DELETE if action == "idle_delete" else PlanKind.RESIZE
        return await self._remedy(kind, actor, role, value)

    async def _remedy(
        self, kind: PlanKind, actor: str, role: Role, cluster_name: str
    ) -> Reply | None:
        record, _ = await self.board.records.get(cluster_name)
        if record.remedy:
            return _notice(
                "Already asked",
                f"Request `{escape(record.remedy)}` for this cluster is still open; decide it "
                "first.",
            )
        record = await self.board.update(cluster_name, lambda r: replace(r, auto_action_at=None))
        try:
            cluster = await self.vertex.get_cluster(cluster_name)
            plan: ChangePlan = (
                plan_delete(cluster, self.prices)
                if kind == PlanKind.DELETE
                else plan_scale_to_zero(cluster, self.prices)
            )
            channel = record.alert_channel or self.board.channel or ""
            request = await self.changes.submit(actor, channel, plan, origin=Origin.IDLE)
        except (PlanError, CommandError) as error:
            return _notice("Not possible", escape(str(error)))
        except VertexError as error:
            return _notice("Control plane error", escape(error.user_message))
        record = await self.board.update(cluster_name, lambda r: replace(r, remedy=request.id))
        what = "delete" if kind == PlanKind.DELETE else "scale to zero"
        # A delete always waits for a second person; scaling to zero is undone by a resize.
        acting = kind == PlanKind.RESIZE and may_approve(self.changes.policy, role, kind)
        if acting:
            await self.board.edit(
                record,
                "answered",
                f"*{what.capitalize()}* approved by {mention(actor)}: request `{request.id}`, "
                "under way (progress under its card).",
            )
            await self.changes.approve_now(request, actor)
            return None
        await self.board.edit(
            record,
            "answered",
            f"*{what.capitalize()}* asked by {mention(actor)}: request `{request.id}` waits for "
            "an approver on its card. If it is rejected or expires, this alert gets its buttons "
            "back.",
        )
        return None
