"""Sending an approved change, and finishing every approved change whatever dies and when.

The steps, each one a state the database remembers before the next begins:

1. ``approved`` (this replica holds the request's lease): a thread message is posted under
   the card, the cluster is read again and checked against the plan's fingerprint.
2. ``executing`` is written *before* the PATCH or DELETE is sent.
3. The reply's operation is recorded together with ``running``; the tracker follows it.

A replica that dies leaves its lease to run out; any replica then recovers the request:
``approved`` is simply executed (nothing was sent); ``executing`` is decided by looking at the
cluster: applied or in progress -> follow the cluster until it settles; visibly not applied
and the plan still matches -> send it (never blindly: the look-up came first); anything else
-> "outcome unknown, check the cluster". No request stays approved or executing without an
owner, and none blocks its cluster for ever.
"""

from __future__ import annotations

import asyncio
import logging

from bot.vertex.errors import (
    AppliedWithoutReplyError,
    NotFoundError,
    OutcomeUnknownError,
    VertexError,
)
from bot.vertex.models import Cluster
from handlers.changes.effects import Finished, Next, Planes
from handlers.changes.kinds import kind_of
from handlers.changes.ledger import RequestLedger
from handlers.entities import (
    ApprovalRequest,
    KeptSpec,
    OperationKind,
    RequestState,
    TrackedOperation,
)
from handlers.ports import Clock, ControlPlane, CrashPoint, NodeUpdater, RequestStore, no_crash
from handlers.reading.clusters import error_text
from handlers.replies import UserRef

log = logging.getLogger(__name__)
LEASE = 15.0  # seconds a replica's claim on a request lasts unless it renews it
LOOK_RETRY = 30.0  # a look-up that failed is tried again this much later
GIVE_UP = 15 * 60.0  # a change that cannot be looked up for this long: outcome unknown
FIRST_POLL = 1.0
RECOVERIES_AT_ONCE = 8
IN_FLIGHT = (RequestState.APPROVED, RequestState.EXECUTING)


class Executor:
    def __init__(
        self,
        *,
        store: RequestStore,
        vertex: ControlPlane,
        ledger: RequestLedger,
        clock: Clock,
        owner: str,
        crash: CrashPoint = no_crash,
        lease: float = LEASE,
        nodes: NodeUpdater | None = None,
    ) -> None:
        self.store = store
        self.vertex = vertex
        self.planes = Planes(vertex, nodes)
        self.ledger = ledger
        self.clock = clock
        self.owner = owner
        self.crash = crash
        self.lease = lease

    async def execute(self, request_id: str) -> None:
        """Send an approved change this replica owns; anything else is left alone."""
        request = await self.store.get_request(request_id)
        if request is None or request.state != RequestState.APPROVED:
            return
        if request.owner != self.owner:
            return
        await self._execute(request)

    async def _execute(self, request: ApprovalRequest) -> None:
        plan = request.plan
        by = UserRef(request.decided_by) if request.decided_by else "policy"
        await self.ledger.show(
            request,
            "approved; checking the cluster before sending the change",
            ("approved by ", by),
        )
        kind = kind_of(plan)
        effect = kind.effect
        try:
            current: Cluster | None = await self.vertex.get_cluster(plan.cluster)
        except NotFoundError:
            if not effect.wants_absent:
                await self._end(
                    request, RequestState.REFUSED, f"{plan.cluster_id} no longer exists"
                )
                return
            current = None  # a create wants it absent
        except VertexError as error:
            await self._end(
                request, RequestState.REFUSED, error_text(error, f"read {plan.cluster_id}")
            )
            return
        self.crash("after-reread")
        changed = effect.unfit(kind, plan, current)
        if changed is not None:
            await self._end(
                request, RequestState.REFUSED, f"{changed}; ask again with a fresh request"
            )
            return
        if not await self.store.transition(
            request.id,
            [RequestState.APPROVED],
            RequestState.EXECUTING,
            held_by=self.owner,
            executing_at=self.clock(),
        ):
            return  # the lease was lost: another replica acts on it now
        request.state, request.executing_at = RequestState.EXECUTING, self.clock()
        await self._send(request, current)

    async def _send(self, request: ApprovalRequest, current: Cluster | None) -> None:
        """Send the change; the request is ``executing``, so a crash from here is recovered
        by a look-up. A delete keeps the cluster's spec first, to restore it from."""
        plan = request.plan
        kind = kind_of(plan)
        effect = kind.effect
        if effect.keeps_spec and current is not None:
            kept = KeptSpec(plan.cluster, current.spec(), self.clock(), request.id)
            await self.store.keep_spec(kept)
        self.crash("before-patch")
        try:
            operation = await effect.send(self.planes, kind, plan, current)
        except AppliedWithoutReplyError:
            await self._follow_cluster(request)
            return
        except OutcomeUnknownError as error:
            await self._end(request, RequestState.UNKNOWN, error.user_message)
            return
        except VertexError as error:
            # Refused by the control plane, or visibly not applied once the retries ran out.
            await self._end(
                request,
                RequestState.REFUSED,
                error_text(error, f"{kind.doing} {plan.cluster_id}"),
            )
            return
        self.crash("after-patch")
        if isinstance(operation, Finished):  # it ended as it was sent
            await self._end(request, operation.state, operation.outcome)
            return
        # The tracker takes the duration from the operation's own times when it ends.
        await self._follow(
            request,
            OperationKind.OPERATION,
            operation.name,
            self.clock(),
            progress=operation.progress_message,
            poll_now=operation.done,
        )
        self.crash("after-operation-recorded")

    async def _follow_cluster(self, request: ApprovalRequest) -> None:
        """No operation is known: watch the cluster itself until it settles."""
        await self._follow(
            request,
            OperationKind.CLUSTER,
            f"cluster:{request.id}",
            request.executing_at or self.clock(),
            progress="the change was accepted; following the cluster",
        )

    async def _follow(
        self,
        request: ApprovalRequest,
        kind: OperationKind,
        name: str,
        started: float,
        *,
        progress: str | None = None,
        poll_now: bool = False,
    ) -> None:
        now = self.clock()
        operation = TrackedOperation(
            name=name,
            request_id=request.id,
            cluster=request.cluster,
            channel=request.channel,
            thread=request.card_message,
            started_at=started,
            next_poll_at=now if poll_now else now + FIRST_POLL,
            progress=progress,
            progress_message=request.progress_message,
            kind=kind,
        )
        if await self.store.start_following(request.id, self.owner, operation):
            request.state, request.operation = RequestState.RUNNING, name
            await self.ledger.audit(
                request.decided_by or "policy", "operation_started", request, operation=name
            )
            await self.ledger.redraw(request)

    async def _end(self, request: ApprovalRequest, state: RequestState, outcome: str) -> None:
        await self.ledger.end(
            request,
            IN_FLIGHT,
            state,
            actor=request.decided_by or "policy",
            outcome=outcome,
            held_by=self.owner,
        )

    # -- recovery ------------------------------------------------------------------------------

    async def recover_orphans(self) -> int:
        """Take over approved requests whose owner died, and finish each; returns how many."""
        now = self.clock()
        claimed = []
        for request in await self.store.orphaned_requests(now):
            if await self.store.claim_request(request.id, self.owner, now, self.lease):
                claimed.append(request.id)
        bound = asyncio.Semaphore(RECOVERIES_AT_ONCE)

        async def one(request_id: str) -> None:
            async with bound:
                try:
                    await self.recover(request_id)
                except Exception:  # one request's trouble must not stop the others
                    log.exception("recovering request %s failed; retrying later", request_id)

        await asyncio.gather(*(one(r) for r in claimed))
        return len(claimed)

    async def recover(self, request_id: str) -> None:
        request = await self.store.get_request(request_id)
        if request is None or request.owner != self.owner:
            return
        log.info("recovering request %s (%s)", request.id, request.state)
        if request.state == RequestState.APPROVED:
            await self._execute(request)  # nothing was sent yet
        elif request.state == RequestState.EXECUTING:
            await self._look(request)

    async def _look(self, request: ApprovalRequest) -> None:
        """The change may or may not have reached the server: decide by looking at the cluster."""
        plan = request.plan
        try:
            now: Cluster | None = await self.vertex.get_cluster(plan.cluster)
        except NotFoundError:
            now = None
        except VertexError as error:
            since = self.clock() - (request.executing_at or request.decided_at or 0.0)
            if since > GIVE_UP:
                await self._end(request, RequestState.UNKNOWN, error_text(error, "check it"))
            else:  # try again later, on whichever replica gets there first
                await self.store.update_request(
                    request.id, owner=None, lease_until=self.clock() + LOOK_RETRY
                )
            return
        kind = kind_of(plan)
        look = kind.effect.look(kind, plan, now)
        if look.next == Next.FOLLOW:
            await self._follow_cluster(request)
        elif look.next == Next.SEND:
            await self._send(request, now)  # visibly not applied: the look-up came first
        else:
            await self._end(request, RequestState.UNKNOWN, look.why)
