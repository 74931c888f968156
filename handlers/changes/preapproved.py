"""A change asked and approved in one step (a schedule's night, approved with its schedule):
the request is kept approved, with its change and its card owed, in one transaction; the
change is sent first and the card posted after, so that no chat platform holds a change up.

A card that cannot be posted where it was asked (the bot removed from the channel) is posted
in the alert channel instead, saying why; the change went ahead either way.
"""

from __future__ import annotations

from typing import Any

from handlers.changes.approval_card import card_key, request_card
from handlers.changes.approvals import Approvals
from handlers.changes.execution import KIND, change_key
from handlers.changes.plan import ChangePlan
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.messenger import MessengerError
from handlers.owed.engine import Attempt
from handlers.owed.model import Done, Later, Outcome
from handlers.owed.posting import RATE_LIMITED_AGAIN, post_once
from handlers.ports import OpenRequestExistsError
from handlers.replies import Caution, ChannelRef, Reply, Text

CARD = "card"  # the worker's kind; its items' keys are card_key's


class Cards:
    """Asks approved changes, and is the ``card`` worker that posts their cards."""

    kind = CARD
    steps = ("card-posted",)

    def __init__(self, approvals: Approvals, alert_channel: str | None) -> None:
        self.approvals = approvals
        self.alert_channel = alert_channel

    async def submit_approved(
        self,
        actor: str,
        channel: str,
        plan: ChangePlan[Any],
        origin: Origin,
        approver: str,
        request_id: str | None = None,
    ) -> ApprovalRequest:
        """Keep the request approved by ``approver``, its change and its card owed; send the
        change, then post the card. ``Refused`` when the cluster has a request open."""
        approvals, engine = self.approvals, self.approvals.engine
        request = approvals.new_request(
            actor, channel, plan, origin, request_id, RequestState.APPROVED
        )
        request.decided_by, request.decided_at = approver, request.created_at
        owed = [
            engine.due(KIND, change_key(request.id), {"request": request.id}),
            engine.due(CARD, card_key(request.id), {"request": request.id}),
        ]
        try:
            await approvals.store.add_request(request, owe=owed)
        except OpenRequestExistsError:
            raise await approvals._busy(plan) from None
        await approvals.ledger.asked(request)
        await approvals.ledger.audit(approver, "approved", request, via=origin)
        for item in owed:  # the change first: the card may wait on the chat platform
            await engine.run(item.key)
        return await approvals.store.get_request(request.id) or request

    async def work(self, attempt: Attempt) -> Outcome:
        store = self.approvals.store
        request = await store.get_request(str(attempt.subject["request"]))
        if request is None or request.card_message:
            return Done()
        messenger = self.approvals.messenger
        try:
            message = await post_once(attempt, messenger, request.channel, request_card(request))
        except MessengerError as error:
            if error.code == "ratelimited":
                return Later(self.approvals.clock() + RATE_LIMITED_AGAIN, "rate limited")
            if not error.not_postable or self.alert_channel in (None, request.channel):
                raise
            assert self.alert_channel is not None
            moved = Reply(f"{request.id}: its card", public=True).add(
                Text(
                    Caution(),
                    " clusterbot could not post this card in ",
                    ChannelRef(request.channel),
                    f" ({error.code}); the change went ahead:",
                ),
                *request_card(request).parts,
            )
            await post_once(attempt, messenger, self.alert_channel, moved, name="elsewhere")
            return Done("posted in the alert channel")
        await store.update_request(request.id, card_message=message)
        fresh = await store.get_request(request.id)
        if fresh is not None and fresh.state != request.state:  # it moved on meanwhile
            await self.approvals.ledger.redraw(fresh)
        return Done()
