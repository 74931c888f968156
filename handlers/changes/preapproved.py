"""Every request's card, owed and posted once; and a change asked and approved in one step
(a schedule's night, approved with its schedule).

A request asked of a person is kept a draft with its card owed, and the card's post makes
it pending. One approved in one step is kept approved with its change and its card owed, in
one transaction; the change is sent first and the card posted after, so that no chat
platform holds a change up. Either way a stop, a database outage or Slack's limits only
delay the card: it is posted once (found by its key after a cut-off post), by any replica.

A draft's card the bot may not post ends the draft, and its asker is told why. An approved
change's card that cannot be posted where it was asked (the bot removed from the channel) is
posted in the alert channel instead, saying why; the change went ahead either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from handlers.changes.approval_card import CARD, card_key, request_card
from handlers.changes.approvals import Approvals
from handlers.changes.execution import KIND, change_key
from handlers.changes.plan import ChangePlan
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.messenger import MessengerError
from handlers.owed.engine import Attempt
from handlers.owed.model import Done, GiveUp, Outcome, Owed
from handlers.owed.posting import post_once, rate_limited
from handlers.ports import OpenRequestExistsError
from handlers.replies import Caution, ChannelRef, Reply, Text


def unpostable(error: MessengerError) -> str:
    """Why a card the bot may not post was not asked, and what to do about it."""
    return (
        f"clusterbot cannot post the approval card in this conversation ({error.code}): "
        "invite it with /invite @clusterbot, or ask in a channel it is in. Nothing was "
        "requested."
    )


class Cards:
    """Asks approved changes, and is the ``card`` worker that posts every request's card:
    a draft's (which makes it pending) and an approved change's (after its change)."""

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
        thread: str | None = None,
        also: Callable[[ApprovalRequest], Sequence[Owed]] | None = None,
    ) -> ApprovalRequest:
        """Keep the request approved by ``approver``, its change and its card owed; send the
        change, then post the card (in ``thread``, when given: a schedule's night goes in its
        schedule's thread, so that a fleet's night is not a thousand cards in the channel),
        and what ``also`` owes with the request (its channel's roll-up) in the same step.
        ``Refused`` when the cluster has a request open."""
        approvals, engine = self.approvals, self.approvals.engine
        request = approvals.new_request(
            actor, channel, plan, origin, request_id, RequestState.APPROVED
        )
        request.decided_by, request.decided_at = approver, request.created_at
        request.card_thread = thread
        owed = [
            engine.due(KIND, change_key(request.id), {"request": request.id}),
            engine.due(CARD, card_key(request.id), {"request": request.id}),
        ]
        with_it = also(request) if also else ()
        try:
            await approvals.store.add_request(request, owe=[*owed, *with_it])
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
        if request is None:
            return Done("its request is gone")
        if request.card_message is None:
            if request.state == RequestState.ABANDONED:
                return Done("abandoned before its card was posted")
            try:
                message = await self._post(attempt, request)
            except MessengerError as error:
                return await self._refused(attempt, request, error)
            if message is None:
                return Done("posted in the alert channel")
            await store.update_request(request.id, card_message=message)
            request.card_message = message
        if request.state == RequestState.DRAFT:  # its card exists: it may be decided now
            await store.transition(
                request.id,
                [RequestState.DRAFT],
                RequestState.PENDING,
                audit=self.approvals.ledger.asked_entry(request),
            )
        fresh = await store.get_request(request.id)
        if fresh is not None and fresh.state not in (request.state, RequestState.PENDING):
            await self.approvals.ledger.redraw(fresh, progress=True)  # moved on meanwhile
        return Done()

    async def _post(self, attempt: Attempt, request: ApprovalRequest) -> str | None:
        """The card, posted once where it was asked; an approved change's card the bot may
        not post there goes to the alert channel, saying why (None)."""
        messenger = self.approvals.messenger
        # a person waits for the card of what they asked: it goes ahead of a crowd of posts
        waited_for = request.state == RequestState.DRAFT
        try:
            return await post_once(
                attempt,
                messenger,
                request.channel,
                request_card(request),
                thread=request.card_thread,
                waited_for=waited_for,
            )
        except MessengerError as error:
            pending = request.state == RequestState.DRAFT
            if not error.not_postable or pending or self.alert_channel in (None, request.channel):
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
            return None

    async def _refused(
        self, attempt: Attempt, request: ApprovalRequest, error: MessengerError
    ) -> Outcome:
        """A rate limit is waited out; a draft's card the bot may not post ends the draft
        (its asker is told why, by ``Approvals.submit``); anything else is tried again."""
        if error.code == "ratelimited":
            return rate_limited(error, self.approvals.clock())
        if error.not_postable and request.state == RequestState.DRAFT:
            await self.approvals.store.delete_request(request.id)
            return GiveUp(unpostable(error))
        raise error
