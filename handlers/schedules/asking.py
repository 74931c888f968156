"""Asking a night's change: approved as the schedule was and sent before anything is said in
chat (``Cards.submit_approved``: a wake needs no Slack), its card in the schedule's thread and
its minute's roll-up owed in the channel (``rollup.py``), while the schedule's approver still
holds the role. An approver who no longer does approves nothing in their name: the "off" is
asked on a card for a current approver, and a wake, which only gives back what the schedule
took, is approved by the policy."""

from __future__ import annotations

from typing import Any

from handlers.changes.approvals import Approvals
from handlers.changes.plan import ChangePlan
from handlers.changes.preapproved import Cards
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.policy import may_approve
from handlers.ports import RoleSource
from handlers.schedules.model import Phase, Schedule, actor_of
from handlers.schedules.rollup import NightRollup
from handlers.schedules.thread import ScheduleThread


class NightAsking:
    def __init__(
        self,
        *,
        approvals: Approvals,
        cards: Cards,
        roles: RoleSource,
        thread: ScheduleThread,
        rollup: NightRollup,
    ) -> None:
        self.approvals = approvals
        self.cards = cards
        self.roles = roles
        self.thread = thread
        self.rollup = rollup

    async def ask(self, schedule: Schedule, plan: ChangePlan[Any]) -> ApprovalRequest:
        """The night's request under the id the schedule kept; ``CommandError`` when it
        cannot be made (the cluster has another request open)."""
        request_id = schedule.firing_request or ""
        actor, approver = actor_of(schedule.id), await self.approver(schedule)
        if approver is not None:
            return await self.cards.submit_approved(
                actor,
                schedule.channel,
                plan,
                Origin.SCHEDULE,
                approver,
                request_id,
                thread=schedule.thread,
                also=self.rollup.owed_with,
            )
        asked = await self.approvals.submit(
            actor, schedule.channel, plan, Origin.SCHEDULE, request_id=request_id
        )
        who = schedule.approved_by or "nobody"
        await self.thread.say(
            schedule,
            f"asked for an approver on its card: {who}, who approved this schedule, approves "
            "no longer",
        )
        return asked

    async def approve(self, schedule: Schedule, request: ApprovalRequest) -> None:
        """A night's request left pending (a crash between asking and approving): approved
        now, by whoever may approve it for the schedule, or left for a person."""
        approver = await self.approver(schedule)
        if request.state == RequestState.PENDING and approver is not None:
            await self.approvals.approve_now(request, approver)

    async def approver(self, schedule: Schedule) -> str | None:
        """Who approves the schedule's changes now: its approver while they still hold the
        role; for a wake, the policy; else nobody."""
        who = schedule.approved_by
        if who == "policy":
            return who
        if who is not None and may_approve(self.approvals.policy, await self.roles.of(who)):
            return who
        return "policy" if schedule.phase == Phase.WAKING else None
