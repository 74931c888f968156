"""What the buttons and the menu of an idle alert do.

Scale to zero from an approver acts at once (it is undone with a resize); from an operator it
posts a request for an approver. Delete always posts a request that a second person must
approve: the alert's dialog says so, and the click never deletes by itself. While a remedy is
open the alert shows it instead of its buttons; if the remedy is rejected, withdrawn, expires
or fails, the alert gets its buttons back (``AlertBoard.remedy_ended``).
"""

from __future__ import annotations

from dataclasses import replace

from handlers.actions import Keep, Remedy, Snooze, Unsnooze
from handlers.entities import Origin
from handlers.errors import Blame, UserError
from handlers.idle.alerts import AlertBoard, Remedies
from handlers.policy import Role, may_approve
from handlers.ports import Clock
from handlers.replies import Button, Code, Reply, Strong, UserRef, notice
from handlers.sweep.alert import kept_text
from handlers.words import duration


class IdleClicks:
    """Each answers one idle-alert click; a reply is shown to the clicker alone. Who may
    click was checked before (``handlers.dispatch``)."""

    def __init__(self, board: AlertBoard, remedies: Remedies, clock: Clock) -> None:
        self.board = board
        self.remedies = remedies
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
            Button(Unsnooze(action.cluster), "Un-snooze"),
        )
        return None

    async def unsnooze(self, actor: str, action: Unsnooze) -> Reply | None:
        """Watched again from now: the alert says so, and a cluster still idle is alerted
        afresh at the next sweep."""
        record, _ = await self.board.records.get(action.cluster)
        if not record.snoozed_until or record.snoozed_until <= self.clock():
            return notice("Not snoozed", "This alert is not snoozed now.")
        await self.board.edit(
            record,
            "watched again",
            (
                Strong("Un-snoozed"),
                " by ",
                UserRef(actor),
                ": watched again; if it is still idle, the next sweep says so.",
            ),
        )
        await self.board.update(
            action.cluster,
            # the same alert: the next sweep reminds in its thread if it is still idle
            lambda r: replace(r, snoozed_until=None, snoozed_by=None, alerted_at=None),
        )
        return None

    async def keep(self, actor: str, action: Keep) -> Reply | None:
        if action.keep:
            record = await self.board.update(
                action.cluster,
                lambda r: replace(r, kept_by=actor, kept_at=self.clock(), auto_action_at=None),
            )
            stop = Button(Keep(action.cluster, keep=False), "Stop keeping")
            await self.board.edit(record, "kept", kept_text(record), stop)
            return None
        # watched again from now: a cluster still idle is alerted at the next sweep
        record, _ = await self.board.records.get(action.cluster)
        if record.kept_by is not None:
            again = (Strong("No longer kept"), " (", UserRef(actor), "): watched again.")
            await self.board.edit(record, "watched again", again)
        await self.board.update(
            action.cluster,
            lambda r: replace(r, kept_by=None, kept_at=None, alerted_at=None),
        )
        cluster_id = action.cluster.rsplit("/", 1)[-1]
        return notice("No longer kept", f"{cluster_id} is watched for idleness again.")

    async def remedy(self, actor: str, role: Role, action: Remedy) -> Reply | None:
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
            request = await self.remedies.ask(
                record, delete=action.delete, actor=actor, origin=Origin.IDLE
            )
        except UserError as error:
            title = "Control plane error" if error.blame == Blame.UPSTREAM else "Not possible"
            return notice(title, error.said)
        record, _ = await self.board.records.get(action.cluster)
        what = "Delete" if action.delete else "Scale to zero"
        # A delete always waits for a second person; scaling to zero is undone by a resize.
        if not action.delete and may_approve(self.remedies.approvals.policy, role):
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
            await self.remedies.approvals.approve_now(request, actor)
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
