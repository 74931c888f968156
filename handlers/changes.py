"""Change requests: plan, ask for approval, approve exactly once, execute, expire.

Approval is an atomic pending -> approved transition in the store, so fifty clicks on two
replicas still send one PATCH. Before sending, the cluster is read again and compared with the
plan's fingerprint (the API has no etag): a cluster that changed in between is refused.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Protocol

from bot.store import Store, details
from bot.vertex.client import VertexClient
from bot.vertex.errors import NotFoundError, OutcomeUnknownError, VertexError
from bot.vertex.models import Cluster, Operation
from handlers.cards import request_card
from handlers.clusters import ClusterDirectory, error_text
from handlers.commands import CommandError, Delete, Resize
from handlers.costs import PriceBook
from handlers.messenger import Messenger
from handlers.plans import ChangePlan, PlanError, apply_plan, drift, plan_delete, plan_resize
from handlers.policy import Policy, Role, approval_refusal
from handlers.records import ApprovalRequest, AuditEntry, RequestState
from handlers.replies import Reply, Text, escape, mention

log = logging.getLogger(__name__)


class OperationWatcher(Protocol):
    async def track(self, request: ApprovalRequest, operation: Operation) -> None: ...


def new_request_id() -> str:
    return "r-" + secrets.token_hex(5)


class ChangeService:
    def __init__(
        self,
        store: Store,
        vertex: VertexClient,
        directory: ClusterDirectory,
        policy: Policy,
        prices: PriceBook,
        messenger: Messenger,
        watcher: OperationWatcher,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.vertex = vertex
        self.directory = directory
        self.policy = policy
        self.prices = prices
        self.messenger = messenger
        self.watcher = watcher
        self.clock = clock

    async def _audit(
        self, actor: str, action: str, request: ApprovalRequest, **extra: object
    ) -> None:
        await self.store.audit(
            AuditEntry(
                at=self.clock(),
                actor=actor,
                action=action,
                cluster=request.cluster,
                request_id=request.id,
                details=details(kind=request.kind, **extra),
            )
        )

    async def redraw(self, request_id: str) -> None:
        request = await self.store.get_request(request_id)
        if request is not None and request.card_ts:
            await self.messenger.update(request.channel, request.card_ts, request_card(request))

    # -- asking --------------------------------------------------------------------------------

    async def request_change(
        self, actor: str, channel: str, command: Resize | Delete, origin: str = "command"
    ) -> ApprovalRequest:
        """Plan the change and post its approval card; raise CommandError when it cannot be."""
        subcommand = "resize" if isinstance(command, Resize) else "delete"
        cluster = await self.directory.resolve(command.cluster, subcommand)
        try:
            if isinstance(command, Resize):
                plan = plan_resize(
                    cluster, command.pool, command.min_nodes, command.max_nodes, self.prices
                )
            else:
                plan = plan_delete(cluster, self.prices)
        except PlanError as error:
            raise CommandError(str(error), subcommand) from None
        return await self.submit(actor, channel, plan, origin)

    async def submit(
        self, actor: str, channel: str, plan: ChangePlan, origin: str = "command"
    ) -> ApprovalRequest:
        """Store a planned change as a pending request and post its card."""
        busy = await self.store.open_requests(plan.cluster)
        if busy:
            other = busy[0]
            raise CommandError(
                f"{plan.cluster_id} already has an open {other.kind} request ({other.id}, "
                f"{other.state}); it must be decided or finish first",
                plan.kind if plan.kind in ("resize", "delete") else None,
            )
        now = self.clock()
        request = ApprovalRequest(
            id=new_request_id(),
            plan=plan,
            requester=actor,
            channel=channel,
            created_at=now,
            expires_at=now + self.policy.approval.expiry_minutes * 60,
            origin=origin,
        )
        await self.store.add_request(request)
        await self._audit(actor, "requested", request, plan=plan.model_dump(mode="json"))
        request.card_ts = await self.messenger.post(channel, request_card(request))
        await self.store.update_request(request.id, card_ts=request.card_ts)
        return request

    async def submit_approved(
        self, actor: str, channel: str, plan: ChangePlan, origin: str
    ) -> ApprovalRequest:
        """Submit and approve in one step: an approver's click on an idle alert, or policy."""
        request = await self.submit(actor, channel, plan, origin)
        won = await self.store.transition(
            request.id,
            [RequestState.PENDING],
            RequestState.APPROVED,
            decided_by=actor,
            decided_at=self.clock(),
        )
        if won:
            await self._audit(actor, "approved", request, via=origin)
            await self.redraw(request.id)
            await self.execute(request.id)
        return await self.store.get_request(request.id) or request

    # -- deciding ------------------------------------------------------------------------------

    async def decide(self, actor: str, role: Role, request_id: str, approve: bool) -> Reply | None:
        """Approve or reject; returns a reply for the clicker alone, or None when all went well."""
        request = await self.store.get_request(request_id)
        if request is None:
            return Reply("Unknown request").add(Text(f"There is no request {escape(request_id)}."))
        if request.state != RequestState.PENDING:
            who = f" by {mention(request.decided_by)}" if request.decided_by else ""
            return Reply("Already decided").add(
                Text(f"Request `{escape(request.id)}` is already {request.state}{who}.")
            )
        if not approve:
            if role < Role.OPERATOR and actor != request.requester:
                return Reply("Not allowed").add(
                    Text(f"Rejecting needs the operator role; you are {role.label}.")
                )
            return await self._reject(actor, request)
        refusal = approval_refusal(self.policy, actor, role, request.requester, request.kind)
        if refusal is not None:
            await self._audit(actor, "approval_refused", request, reason=refusal)
            return Reply("Not allowed").add(Text(f"You cannot approve this: {refusal}."))
        now = self.clock()
        if now >= request.expires_at:
            await self.expire(request)
            return Reply("Expired").add(Text("This request expired before your click."))
        won = await self.store.transition(
            request.id,
            [RequestState.PENDING],
            RequestState.APPROVED,
            decided_by=actor,
            decided_at=now,
        )
        if not won:
            return await self.decide(actor, role, request_id, approve)  # now says who won
        await self._audit(actor, "approved", request)
        await self.redraw(request.id)
        await self.execute(request.id)
        return None

    async def _reject(self, actor: str, request: ApprovalRequest) -> Reply | None:
        won = await self.store.transition(
            request.id,
            [RequestState.PENDING],
            RequestState.REJECTED,
            decided_by=actor,
            decided_at=self.clock(),
            finished_at=self.clock(),
        )
        if not won:
            fresh = await self.store.get_request(request.id)
            state = fresh.state if fresh else "gone"
            return Reply("Already decided").add(Text(f"Request is already {state}."))
        await self._audit(actor, "rejected", request)
        await self.redraw(request.id)
        return None

    async def expire(self, request: ApprovalRequest) -> bool:
        won = await self.store.transition(
            request.id, [RequestState.PENDING], RequestState.EXPIRED, finished_at=self.clock()
        )
        if won:
            await self._audit("policy", "expired", request)
            await self.redraw(request.id)
        return won

    async def expire_due(self) -> int:
        expired = 0
        for request in await self.store.expired_requests(self.clock()):
            expired += await self.expire(request)
        return expired

    # -- executing -----------------------------------------------------------------------------

    async def _refuse(self, request: ApprovalRequest, reason: str) -> None:
        await self.store.transition(
            request.id,
            [RequestState.APPROVED],
            RequestState.REFUSED,
            outcome=reason,
            finished_at=self.clock(),
        )
        await self._audit(request.decided_by or "policy", "refused", request, reason=reason)
        await self.redraw(request.id)
        await self.messenger.post(
            request.channel,
            Reply(f"Not applied: {reason}").add(Text(f"Not applied: {escape(reason)}")),
            thread_ts=request.card_ts,
        )

    async def execute(self, request_id: str) -> None:
        """Send an approved change, after checking the cluster did not change since the plan."""
        request = await self.store.get_request(request_id)
        if request is None or request.state != RequestState.APPROVED:
            return
        plan = request.plan
        try:
            current: Cluster = await self.vertex.get_cluster(plan.cluster)
        except NotFoundError:
            await self._refuse(request, f"{plan.cluster_id} no longer exists")
            return
        except VertexError as error:
            await self._refuse(request, error_text(error, f"read {plan.cluster_id}"))
            return
        changed = drift(plan, current)
        if changed is not None:
            await self._refuse(request, f"{changed}; ask again with a fresh request")
            return
        try:
            if plan.kind == "delete":
                operation = await self.vertex.delete_cluster(plan.cluster)
            else:
                operation = await self.vertex.update_cluster(
                    apply_plan(current, plan), list(plan.update_mask)
                )
        except OutcomeUnknownError as error:
            await self._refuse(
                request,
                f"{error.user_message}; see `/cluster show {plan.cluster_id}` before asking again",
            )
            return
        except VertexError as error:
            await self._refuse(request, error_text(error, f"{plan.kind} {plan.cluster_id}"))
            return
        await self.store.transition(
            request.id, [RequestState.APPROVED], RequestState.RUNNING, operation=operation.name
        )
        await self._audit(
            request.decided_by or "policy", "operation_started", request, operation=operation.name
        )
        request.operation = operation.name
        await self.watcher.track(request, operation)
        await self.redraw(request.id)

    async def finish(self, request_id: str, succeeded: bool, outcome: str) -> None:
        """Record how a request's operation ended and redraw its card."""
        request = await self.store.get_request(request_id)
        if request is None:
            return
        state = RequestState.SUCCEEDED if succeeded else RequestState.FAILED
        won = await self.store.transition(
            request.id, [RequestState.RUNNING], state, outcome=outcome, finished_at=self.clock()
        )
        if won:
            await self._audit("control-plane", str(state), request, outcome=outcome)
            await self.redraw(request.id)
