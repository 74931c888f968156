"""Sending an approved change, as the owed-work engine's worker for the ``change`` items.

Approving a request owes its change (``change:REQUEST``, recorded with the approval in one
transaction); the engine runs it at once on the replica that approved it, and any replica
takes it over whenever the one running it dies or loses the database. Each attempt:

1. ``approved``: the cluster is read again and checked against the plan's fingerprint;
   ``executing`` is written, then the call's in-flight time, and only then is the PATCH,
   DELETE, CREATE or node update sent. Nothing is said in chat before the change is sent: a
   rate-limited or lost channel never holds a change up.
2. The reply's operation is recorded together with ``running``; the tracker follows it, and
   the item is done.
3. ``executing`` (an attempt that died, or a call whose outcome is unknown): after the call's
   in-flight time, the cluster (or the node) is looked at. Applied or in progress: followed.
   Visibly not applied and the plan still fits: sent again. Neither: "outcome unknown". A
   look that cannot be made is tried again, for ``GIVE_UP`` at most.
"""

from __future__ import annotations

import logging

from handlers.changes.effects import (
    NODE_WINDOW,
    SEND_WINDOW,
    Finished,
    Next,
    Planes,
    Unsettled,
)
from handlers.changes.kinds import kind_of
from handlers.changes.ledger import RequestLedger
from handlers.changes.tracking import FOLLOW, follow_key
from handlers.domain.errors import (
    AppliedWithoutReplyError,
    NotFoundError,
    OutcomeUnknownError,
    VertexError,
)
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName
from handlers.entities import (
    ApprovalRequest,
    KeptSpec,
    OperationKind,
    Origin,
    RequestState,
    TrackedOperation,
)
from handlers.owed.engine import Attempt
from handlers.owed.model import Done, Later, Outcome
from handlers.pacing import WriteQuota
from handlers.ports import Clock, ControlPlane, NodeUpdater, RequestStore
from handlers.reading.clusters import error_text

log = logging.getLogger(__name__)
KIND = "change"
LOOK_RETRY = 15.0  # a look-up that failed, or a Slurm that did not answer, is tried again then
GIVE_UP = 15 * 60.0  # a change that cannot be looked at or settled for this long: unknown
FIRST_POLL = 1.0
IN_FLIGHT = (RequestState.APPROVED, RequestState.EXECUTING)
# asked by a person, one at a time: sent at once, counted in the write quota; the rest (a
# schedule's night, a pipeline's release, the idle policy's own action) come in crowds and
# wait for their slot
BY_PEOPLE = frozenset({Origin.COMMAND, Origin.IDLE, Origin.HEALTH})


def change_key(request_id: str) -> str:
    return f"{KIND}:{request_id}"


class Executor:
    """The ``change`` worker: one attempt at one approved request."""

    kind = KIND
    steps = ("after-reread", "before-patch", "after-patch", "after-operation-recorded")

    def __init__(
        self,
        *,
        store: RequestStore,
        vertex: ControlPlane,
        ledger: RequestLedger,
        clock: Clock,
        nodes: NodeUpdater | None = None,
        window: float = SEND_WINDOW,
        node_window: float = NODE_WINDOW,
        quota: WriteQuota | None = None,
    ) -> None:
        self.store = store
        self.quota = quota
        self.vertex = vertex
        self.planes = Planes(vertex, nodes, window=window, node_window=node_window)
        self.ledger = ledger
        self.clock = clock

    async def work(self, attempt: Attempt) -> Outcome:
        request = await self.store.get_request(str(attempt.subject["request"]))
        if request is None or request.state not in IN_FLIGHT:
            return Done("nothing left to send")
        if request.state == RequestState.APPROVED:
            waiting = self._slot(request, attempt.key)
            if waiting is not None:
                return waiting
            outcome: Outcome | None = None
            try:
                outcome = await self._execute(request, attempt)
                return outcome
            finally:
                self._went(request, attempt.key, outcome)
        return await self._look(request, attempt)

    def _slot(self, request: ApprovalRequest, key: str, *, going: bool = False) -> Later | None:
        """Later, at its slot, when the write quota has no room for this change now;
        ``going``: the call is about to go (``WriteQuota.go``), and is on its way if not."""
        scope = self._scope(request)
        if self.quota is None or scope is None:
            return None
        ahead = request.origin in BY_PEOPLE
        if going:
            at = self.quota.go(key, scope, ahead=ahead)
        else:
            at = self.quota.slot(key, scope, ahead=ahead)
        if at <= self.clock():
            return None
        return Later(at, "waiting for its place in the control plane's write quota")

    def _went(self, request: ApprovalRequest, key: str, outcome: Outcome | None) -> None:
        """The attempt's call came back, or did not go: its slot is let go, unless the
        minute had no room for the call yet (it keeps its place for when it has)."""
        scope = self._scope(request)
        if self.quota is None or scope is None:
            return
        if self.quota.answered(key, scope) or not isinstance(outcome, Later):
            self.quota.done(key)

    def _scope(self, request: ApprovalRequest) -> str | None:
        try:
            return ClusterName.parse(request.plan.cluster).target.parent
        except ValueError:
            return None

    async def _execute(self, request: ApprovalRequest, attempt: Attempt) -> Outcome:
        plan = request.plan
        kind = kind_of(plan)
        effect = kind.effect
        try:
            current: Cluster | None = await self.vertex.get_cluster(plan.cluster)
        except NotFoundError:
            if not effect.wants_absent:
                return await self._end(
                    request, RequestState.REFUSED, f"{plan.cluster_id} no longer exists"
                )
            current = None  # a create wants it absent
        except VertexError as error:
            return await self._end(
                request, RequestState.REFUSED, error_text(error, f"read {plan.cluster_id}")
            )
        attempt.step("after-reread")
        changed = effect.unfit(kind, plan, current)
        if changed is not None:
            return await self._end(
                request, RequestState.REFUSED, f"{changed}; ask again with a fresh request"
            )
        waiting = self._slot(request, attempt.key, going=True)
        if waiting is not None:  # its slot came before the minute had room for its call
            return waiting
        now = self.clock()
        if not await self.store.transition(
            request.id, [RequestState.APPROVED], RequestState.EXECUTING, executing_at=now
        ):
            return Done("moved on meanwhile")
        request.state, request.executing_at = RequestState.EXECUTING, now
        return await self._send(request, current, attempt)

    async def _send(
        self, request: ApprovalRequest, current: Cluster | None, attempt: Attempt
    ) -> Outcome:
        """Send the change; the request is ``executing``, so whatever dies from here is
        settled by a look-up. A delete keeps the cluster's spec first, to restore it from."""
        plan = request.plan
        kind = kind_of(plan)
        effect = kind.effect
        if effect.keeps_spec and current is not None:
            kept = KeptSpec(plan.cluster, current.spec(), self.clock(), request.id)
            await self.store.keep_spec(kept)
        attempt.step("before-patch")
        # Until the call has returned, one way or another, it may be applied: a replica that
        # dies meanwhile leaves that recorded, and nobody looks before it is over. Once it has
        # returned, nothing of it is in flight (the server gives up on a try before the client
        # does: ``X-Server-Timeout``), whether or not it applied.
        await attempt.sending(effect.window(self.planes))
        try:
            operation = await effect.send(self.planes, kind, plan, current)
        except AppliedWithoutReplyError:
            await attempt.sent()
            return await self._follow_cluster(attempt, request)
        except OutcomeUnknownError as error:
            await attempt.sent()
            if not error.later:  # the look was refused outright: waiting will not help
                return await self._end(request, RequestState.UNKNOWN, error.user_message)
            return await self._unsettled(request, error.user_message)
        except Unsettled as error:
            await attempt.sent()
            return await self._unsettled(request, error.reason)
        except VertexError as error:
            # Refused by the control plane, or visibly not applied once the retries ran out.
            await attempt.sent()
            return await self._end(
                request, RequestState.REFUSED, error_text(error, f"{kind.doing} {plan.cluster_id}")
            )
        await attempt.sent()
        attempt.step("after-patch")
        if isinstance(operation, Finished):  # it ended as it was sent
            return await self._end(request, operation.state, operation.outcome)
        # The tracker takes the duration from the operation's own times when it ends.
        outcome = await self._follow(
            attempt,
            request,
            OperationKind.OPERATION,
            operation.name,
            self.clock(),
            progress=operation.progress_message,
            poll_now=operation.done,
        )
        attempt.step("after-operation-recorded")
        return outcome

    async def _unsettled(self, request: ApprovalRequest, why: str) -> Outcome:
        """Whether it applied is not known yet: looked at again a little later, and ended
        "outcome unknown" only when no look could settle it for ``GIVE_UP``."""
        if self._too_long(request):
            return await self._end(request, RequestState.UNKNOWN, why)
        return Later(self.clock() + LOOK_RETRY, why)

    def _too_long(self, request: ApprovalRequest) -> bool:
        since = self.clock() - (request.executing_at or request.decided_at or 0.0)
        return since > GIVE_UP

    async def _follow_cluster(self, attempt: Attempt, request: ApprovalRequest) -> Outcome:
        """No operation is known: watch the cluster itself until it settles."""
        return await self._follow(
            attempt,
            request,
            OperationKind.CLUSTER,
            f"cluster:{request.id}",
            request.executing_at or self.clock(),
            progress="the change was accepted; following the cluster",
        )

    async def _follow(
        self,
        attempt: Attempt,
        request: ApprovalRequest,
        kind: OperationKind,
        name: str,
        started: float,
        *,
        progress: str | None = None,
        poll_now: bool = False,
    ) -> Outcome:
        now = self.clock()
        operation = TrackedOperation(
            name=name,
            request_id=request.id,
            cluster=request.cluster,
            channel=request.channel,
            thread=request.lines_thread,
            started_at=started,
            next_poll_at=now if poll_now else now + FIRST_POLL,
            progress=progress,
            progress_message=request.progress_message,
            kind=kind,
        )
        # followed to its end by the tracker, owed with the move that makes it so
        follow = attempt.engine.due(
            FOLLOW, follow_key(request.id), {"operation": name}, at=operation.next_poll_at
        )
        if await self.store.start_following(request.id, operation, owe=[follow]):
            request.state, request.operation = RequestState.RUNNING, name
            await self.ledger.audit(
                request.decided_by or "policy", "operation_started", request, operation=name
            )
            await self.ledger.redraw(request, progress=True)
        return Done(f"following {name}")

    async def _end(self, request: ApprovalRequest, state: RequestState, outcome: str) -> Outcome:
        await self.ledger.end(
            request, IN_FLIGHT, state, actor=request.decided_by or "policy", outcome=outcome
        )
        return Done(str(state))

    async def _look(self, request: ApprovalRequest, attempt: Attempt) -> Outcome:
        """The change may or may not have reached the server, and no call of it can still be
        applied: decide by looking at the cluster."""
        plan = request.plan
        log.info("settling request %s by a look at %s", request.id, plan.cluster_id)
        try:
            now: Cluster | None = await self.vertex.get_cluster(plan.cluster)
        except NotFoundError:
            now = None
        except VertexError as error:
            if self._too_long(request):
                return await self._end(request, RequestState.UNKNOWN, error_text(error, "check it"))
            return Later(self.clock() + LOOK_RETRY, error_text(error, "look at it"))
        kind = kind_of(plan)
        look = kind.effect.look(kind, plan, now)
        if look.next == Next.FOLLOW:
            await attempt.sent()
            return await self._follow_cluster(attempt, request)
        if look.next == Next.SEND:
            return await self._send(request, now, attempt)  # visibly not applied: looked first
        await attempt.sent()
        return await self._end(request, RequestState.UNKNOWN, look.why)
