"""Recording what happens to a request: the audit entry, the card, the thread message.

How a request ended is owed (``told:REQUEST``, recorded with the ending transition in one
transaction) and told by the owed-work engine, the ``told`` worker: the card redrawn, the end
in the card's thread, a reply that mentions the requester, the listeners. Each is an edit, or a
post made once (``post_once``: looked for by its key after a crash cut it off before its
record), so a replica that takes it over runs them again harmlessly, and a rate limit or a
passing failure delays them without losing them. A draft whose card a stop cut off before it
was recorded has its card found by the key it was posted with, and redrawn as abandoned.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Unpack

from handlers.changes.approval_card import (
    ENDED_WORDS,
    card_key,
    ending_mention,
    ending_text,
    request_card,
    thread_reply,
)
from handlers.entities import ApprovalRequest, AuditEntry, Decision, RequestState
from handlers.messenger import MessageId, Messenger, MessengerError, tell_not_posted
from handlers.owed.engine import Attempt, Engine
from handlers.owed.model import Done, Outcome
from handlers.owed.posting import post_once, refused
from handlers.ports import Clock, People, RequestStore

log = logging.getLogger(__name__)

# Called once a request has ended (with the request as it ended), e.g. to restore the idle
# alert a remedy came from. Must be safe to call twice.
RequestEnded = Callable[[ApprovalRequest], Awaitable[None]]
TOLD = "told"
EXECUTED = frozenset(
    {RequestState.SUCCEEDED, RequestState.FAILED, RequestState.REFUSED, RequestState.UNKNOWN}
)


def told_key(request_id: str) -> str:
    return f"{TOLD}:{request_id}"


def details(**values: Any) -> str:
    """Audit details as compact JSON."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)


class RequestLedger:
    kind = TOLD
    steps = ("told-posted",)

    def __init__(
        self,
        *,
        store: RequestStore,
        messenger: Messenger,
        clock: Clock,
        people: People,
        engine: Engine,
        on_ended: Sequence[RequestEnded] = (),
    ) -> None:
        self.store = store
        self.messenger = messenger
        self.clock = clock
        self.people = people
        self.engine = engine
        self.on_ended = list(on_ended)
        # told the moment a request ends, by the replica that ended it, before any chat: a
        # schedule's night moves on without waiting for Slack (its own check is the fallback)
        self.on_settled: list[RequestEnded] = []
        engine.add(self)

    async def audit(
        self, actor: str, action: str, request: ApprovalRequest, **extra: object
    ) -> None:
        await self.store.audit(self._about(actor, action, request, **extra))

    def _about(
        self, actor: str, action: str, request: ApprovalRequest, **extra: object
    ) -> AuditEntry:
        """The audit entry of what ``actor`` did to ``request``, dated now."""
        extra = {"kind": str(request.kind), **extra}
        return self._entry(self.clock(), actor, action, request.cluster, request.id, extra)

    async def asked(self, request: ApprovalRequest) -> None:
        """The ask, dated when it was made (for a request kept past its draft at once)."""
        await self.store.audit(self.asked_entry(request))

    def asked_entry(self, request: ApprovalRequest) -> AuditEntry:
        """The audit entry of the ask, dated when it was made: kept with the move that makes
        the request pending, once its card exists (by its post, or by a click on it)."""
        extra: dict[str, object] = {
            "kind": str(request.kind),
            "plan": request.plan.model_dump(mode="json"),
        }
        return self._entry(
            request.created_at, request.requester, "requested", request.cluster, request.id, extra
        )

    async def record(
        self, actor: str, action: str, cluster: str, request_id: str | None, **extra: object
    ) -> None:
        """One audit entry, for a request or for what no request stands behind yet."""
        await self.store.audit(self._entry(self.clock(), actor, action, cluster, request_id, extra))

    @staticmethod
    def _entry(
        at: float,
        actor: str,
        action: str,
        cluster: str,
        request_id: str | None,
        extra: dict[str, object],
    ) -> AuditEntry:
        return AuditEntry(
            at=at,
            actor=actor,
            action=action,
            cluster=cluster,
            request_id=request_id,
            details=details(**extra),
        )

    async def redraw(self, request: ApprovalRequest, *, progress: bool = False) -> None:
        """Edit the card to show the request as it is now. A ``progress`` redraw (a step on
        the way: approved, sent, running) is sent when the chat platform's limits leave room
        and is otherwise replaced by the next, never waited for: how the request ends is
        always told (``work``), so a mass of changes never waits on chat."""
        if request.card_message:
            try:
                await self.messenger.update(
                    request.channel, request.card_message, request_card(request), progress=progress
                )
            except MessengerError as error:
                log.warning("could not redraw the card of %s: %s", request.id, error.code)

    async def tell_not_posted(self, request: ApprovalRequest) -> None:
        """The requester of a draft that a stop or crash cut off before its card was
        confirmed: told privately that nothing was requested (a card that did appear is
        dead: its buttons say the request was abandoned)."""
        if not self.people.is_person(request.requester):
            return
        what = f"{request.plan.kind.replace('_', ' ')} request for {request.plan.cluster_id}"
        await tell_not_posted(self.messenger, request.channel, request.requester, what)

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
        """End a request: one conditional transition that keeps its audit entry and owes the
        telling of it, then the telling itself, from here (any replica finishes it when this
        one cannot). True if this call moved it."""
        told = self.engine.due(TOLD, told_key(request.id), {"request": request.id})
        entry = self._about(actor, action or str(state), request, outcome=outcome)
        won = await self.store.transition(
            request.id,
            from_states,
            state,
            owe=[told],
            audit=entry,
            outcome=outcome,
            finished_at=entry.at,
            **decision,
        )
        fresh = await self.store.get_request(request.id)
        if fresh is None or fresh.state != state:
            return False
        if won:
            for hook in self.on_settled:
                try:
                    await hook(fresh)
                except Exception:  # a hook's own check catches up later
                    log.exception("a hook failed after %s ended", request.id)
        await self.engine.run(told.key)
        return won

    async def work(self, attempt: Attempt) -> Outcome:
        """Tell how a request ended: the ``told`` worker."""
        request = await self.store.get_request(str(attempt.subject["request"]))
        if request is None:
            return Done("gone")
        try:
            await self._tell(request, attempt)
        except MessengerError as error:
            return refused(error, self.clock(), f"cannot tell in {request.channel}")
        for listener in self.on_ended:
            try:
                await listener(request)
            except Exception:  # one listener's trouble must not lose the others
                log.exception("a listener failed after %s ended", request.id)
        return Done()

    async def _tell(self, request: ApprovalRequest, attempt: Attempt) -> None:
        if request.state == RequestState.ABANDONED and not request.card_message:
            request.card_message = await self._find_card(request)
        if request.card_message:
            await self.messenger.update(
                request.channel, request.card_message, request_card(request), owed=True
            )
        elif request.state == RequestState.ABANDONED and not attempt.item.result.get("whisper"):
            await self.tell_not_posted(request)
            await attempt.keep(whisper=True)
        if request.state in EXECUTED:
            reply = thread_reply(request.plan.cluster_id, ending_text(request), ())
            if request.progress_message:
                await self.messenger.update(
                    request.channel, request.progress_message, reply, owed=True
                )
            else:
                posted = await post_once(
                    attempt,
                    self.messenger,
                    request.channel,
                    reply,
                    thread=request.lines_thread,
                    name="end",
                )
                request.progress_message = posted
                await self.store.update_request(request.id, progress_message=posted)
        if (
            not request.mention_message
            and request.card_message
            and request.state in ENDED_WORDS
            and self.people.is_person(request.requester)
        ):
            posted = await post_once(
                attempt,
                self.messenger,
                request.channel,
                ending_mention(request),
                thread=request.lines_thread,
                name="mention",
            )
            await self.store.update_request(request.id, mention_message=posted)

    async def _find_card(self, request: ApprovalRequest) -> MessageId | None:
        """The card of a draft that a stop cut off between its post and its record, found
        by the key it was posted with; None when it never arrived (or cannot be looked for)."""
        try:
            found = await self.messenger.find(
                request.channel, card_key(request.id), request.created_at
            )
        except MessengerError as error:
            log.warning("could not look for the card of %s: %s", request.id, error.code)
            return None
        if found is not None:
            await self.store.update_request(request.id, card_message=found)
        return found
