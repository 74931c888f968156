"""Recording what happens to a request: the audit entry, the card, the thread message.

Every step after a state transition is an edit (the card, the thread message) or an append
that a repeat does no harm to, so a replica that takes over after a crash can run them again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Unpack

from handlers.changes.approval_card import (
    ENDED_WORDS,
    ending_mention,
    ending_text,
    request_card,
    thread_reply,
)
from handlers.entities import ApprovalRequest, AuditEntry, Decision, RequestState
from handlers.messenger import Messenger, MessengerError, tell_not_posted
from handlers.ports import Clock, People, RequestStore
from handlers.replies import Line

log = logging.getLogger(__name__)

# Called once a request has ended (with the request as it ended), e.g. to restore the idle
# alert a remedy came from. Must be safe to call twice.
RequestEnded = Callable[[ApprovalRequest], Awaitable[None]]
EXECUTED = frozenset(
    {RequestState.SUCCEEDED, RequestState.FAILED, RequestState.REFUSED, RequestState.UNKNOWN}
)


def details(**values: Any) -> str:
    """Audit details as compact JSON."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)


class RequestLedger:
    def __init__(
        self,
        *,
        store: RequestStore,
        messenger: Messenger,
        clock: Clock,
        people: People,
        on_ended: Sequence[RequestEnded] = (),
    ) -> None:
        self.store = store
        self.messenger = messenger
        self.clock = clock
        self.people = people
        self.on_ended = tuple(on_ended)

    async def audit(
        self, actor: str, action: str, request: ApprovalRequest, **extra: object
    ) -> None:
        await self.record(
            actor, action, request.cluster, request.id, kind=str(request.kind), **extra
        )

    async def asked(self, request: ApprovalRequest) -> None:
        """The ask, dated when it was made: it is written once the card exists, and a click
        on the card may be audited before this runs."""
        extra: dict[str, object] = {
            "kind": str(request.kind),
            "plan": request.plan.model_dump(mode="json"),
        }
        await self._write(
            request.created_at, request.requester, "requested", request.cluster, request.id, extra
        )

    async def record(
        self, actor: str, action: str, cluster: str, request_id: str | None, **extra: object
    ) -> None:
        """One audit entry, for a request or for what no request stands behind yet."""
        await self._write(self.clock(), actor, action, cluster, request_id, extra)

    async def _write(
        self,
        at: float,
        actor: str,
        action: str,
        cluster: str,
        request_id: str | None,
        extra: dict[str, object],
    ) -> None:
        entry = AuditEntry(
            at=at,
            actor=actor,
            action=action,
            cluster=cluster,
            request_id=request_id,
            details=details(**extra),
        )
        await self.store.audit(entry)

    async def redraw(self, request: ApprovalRequest) -> None:
        """Edit the card to show the request as it is now."""
        if request.card_message:
            try:
                await self.messenger.update(
                    request.channel, request.card_message, request_card(request)
                )
            except MessengerError as error:
                log.warning("could not redraw the card of %s: %s", request.id, error.code)

    async def show(self, request: ApprovalRequest, text: str, note: Line = ()) -> None:
        """Put ``text`` in the card's thread: edit the request's thread message, or post it
        (and remember it) when there is none yet."""
        reply = thread_reply(request.plan.cluster_id, text, note)
        if request.progress_message:
            await self.messenger.update(request.channel, request.progress_message, reply)
            return
        posted = await self.messenger.post(request.channel, reply, thread=request.card_message)
        request.progress_message = posted
        await self.store.update_request(request.id, progress_message=posted)

    async def tell_not_posted(self, request: ApprovalRequest) -> None:
        """The requester of a draft that a stop or crash cut off before its card was
        confirmed: told privately that nothing was requested (a card that did appear is
        dead: its buttons say the request was abandoned)."""
        if not self.people.is_person(request.requester):
            return
        what = f"{request.plan.kind.replace('_', ' ')} request for {request.plan.cluster_id}"
        await tell_not_posted(self.messenger, request.channel, request.requester, what)

    async def mention(self, request: ApprovalRequest) -> None:
        """Tell the requester how it ended, in a thread reply that mentions them, once: the
        reply's id is kept, so a repeat of these steps does not post it again (a crash
        between the post and the write can post it twice, never lose it). A requester that
        is not a person (a pipeline's service account) is not mentioned."""
        if (
            request.mention_message
            or not request.card_message
            or request.state not in ENDED_WORDS
            or not self.people.is_person(request.requester)
        ):
            return
        try:
            posted = await self.messenger.post(
                request.channel, ending_mention(request), thread=request.card_message
            )
        except MessengerError as error:
            log.warning("could not tell the requester how %s ended: %s", request.id, error.code)
            return
        request.mention_message = posted
        await self.store.update_request(request.id, mention_message=posted)

    async def end(
        self,
        request: ApprovalRequest,
        from_states: Sequence[RequestState],
        state: RequestState,
        *,
        actor: str,
        outcome: str | None = None,
        action: str | None = None,
        **decision: Unpack[Decision],
    ) -> bool:
        """End a request: one conditional transition, then the audit entry, the card, the
        thread message and the listeners. A request already in ``state`` (this end was begun
        before a crash) gets the steps after the transition again; True if this call moved it.
        """
        won = await self.store.transition(
            request.id,
            from_states,
            state,
            outcome=outcome,
            finished_at=self.clock(),
            **decision,
        )
        fresh = await self.store.get_request(request.id)
        if fresh is None or fresh.state != state:
            return False
        if won:
            await self.audit(actor, action or str(state), fresh, outcome=outcome)
        await self.conclude(fresh)
        return won

    async def conclude(self, request: ApprovalRequest) -> None:
        """The steps after an ending transition, each safe to repeat."""
        await self.redraw(request)
        if request.state == RequestState.ABANDONED and not request.card_message:
            await self.tell_not_posted(request)
        if request.state in EXECUTED:
            try:
                await self.show(request, ending_text(request))
            except MessengerError as error:
                log.warning("could not post how %s ended: %s", request.id, error.code)
        await self.mention(request)
        for listener in self.on_ended:
            try:
                await listener(request)
            except Exception:  # one listener's trouble must not lose the others
                log.exception("a listener failed after %s ended", request.id)
