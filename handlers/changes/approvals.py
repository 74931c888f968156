"""Change requests: plan, ask for approval, approve exactly once, reject, withdraw, expire.

A request is pending only once its card exists: it is kept as a draft with its card owed
(``handlers/owed``), in one transaction, and the card worker (``Cards``) posts it and makes it
pending, whatever stops or fails meanwhile; a card the bot may not post deletes the draft, so
nothing is left pending and the cluster is not blocked. Approval is an atomic pending -> approved
transition that also makes this replica the request's owner (a lease), so fifty clicks on two
replicas still send one PATCH; the executor then sends the change.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Protocol

from handlers.changes.approval_card import CARD, card_key
from handlers.changes.execution import KIND, change_key
from handlers.changes.kinds import kind_of
from handlers.changes.ledger import RequestLedger
from handlers.changes.plan import ChangePlan, PlanError
from handlers.changes.restore import plan_restore
from handlers.costs import PriceBook
from handlers.domain.errors import NotFoundError, VertexError
from handlers.domain.models import Cluster
from handlers.domain.names import ClusterName
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.grammar import CommandError, Refused
from handlers.messenger import Messenger
from handlers.owed.engine import Engine
from handlers.owed.model import OwedState
from handlers.policy import Policy, Role, approval_refusal, may_approve
from handlers.ports import Clock, CrashPoint, OpenRequestExistsError, RequestStore, no_crash
from handlers.reading.clusters import ClusterDirectory, error_text
from handlers.reading.deleted import find_kept, restored_name
from handlers.replies import Code, Reply, UserRef, notice

log = logging.getLogger(__name__)
DRAFT_TIMEOUT = 60.0  # a draft older than this lost its card to a crash: abandon it


class Planned(Protocol):
    """A command that asks for a change: the cluster it names, its subcommand (for errors),
    and the plan it makes of the cluster as read."""

    @property
    def cluster(self) -> str: ...

    @property
    def subcommand(self) -> str: ...

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]: ...


def new_request_id() -> str:
    return "r-" + secrets.token_hex(5)


_NOT_ASKED = "The approval card could not be posted; nothing was requested."


def _notice_unknown(request_id: str) -> Reply:
    return notice("Unknown request", f"There is no request {request_id}.")


class Approvals:
    def __init__(
        self,
        *,
        store: RequestStore,
        directory: ClusterDirectory,
        policy: Policy,
        prices: PriceBook,
        messenger: Messenger,
        ledger: RequestLedger,
        engine: Engine,
        clock: Clock,
        owner: str,
        crash: CrashPoint = no_crash,
    ) -> None:
        self.store = store
        self.directory = directory
        self.policy = policy
        self.prices = prices
        self.messenger = messenger
        self.ledger = ledger
        self.engine = engine
        self.clock = clock
        self.owner = owner
        self.crash = crash

    # -- asking --------------------------------------------------------------------------------

    async def request_change(
        self, actor: str, channel: str, command: Planned, origin: Origin = Origin.COMMAND
    ) -> ApprovalRequest:
        """Plan the change and post its approval card; raise CommandError when it cannot be."""
        cluster = await self.directory.resolve(command.cluster, command.subcommand)
        try:
            plan = command.plan(cluster, self.prices)
        except PlanError as error:
            raise CommandError(str(error), command.subcommand) from None
        return await self.submit(actor, channel, plan, origin)

    async def request_restore(
        self, actor: str, channel: str, key: str, new_id: str | None = None
    ) -> ApprovalRequest:
        """Plan the create of a deleted cluster from its kept spec and post the card; refused
        first when nothing was kept or a cluster of that name exists now."""
        kept = find_kept(await self.store.deleted_specs(), key)
        name = restored_name(kept, new_id)
        self.directory.confine(name)
        try:
            await self.directory.vertex.get_cluster(ClusterName.parse(name))
        except NotFoundError:
            pass
        else:
            cid = name.rsplit("/", 1)[-1]
            raise Refused(
                f"{cid} exists now; restore it under another id: "
                f"/cluster restore {kept.cluster_id} as NEW_ID"
            )
        return await self.submit(actor, channel, plan_restore(kept, name, self.prices))

    async def restore_clicked(self, user: str, request_id: str) -> Reply:
        """**Restore** on a finished delete's card: the same as /cluster restore, asked in
        the delete's channel."""
        deleted = await self.store.get_request(request_id)
        if deleted is None:
            return notice("Not restored", "That delete request is no longer known.")
        try:
            request = await self.request_restore(user, deleted.channel, deleted.cluster)
        except CommandError as error:
            return notice("Not restored", error.reason)
        except VertexError as error:  # the control plane could not be asked: say so plainly
            return notice("Not restored", error_text(error, "ask to restore it"))
        return notice("Restore asked", f"The request {request.id} is posted for approval.")

    async def submit(
        self,
        actor: str,
        channel: str,
        plan: ChangePlan[Any],
        origin: Origin = Origin.COMMAND,
        request_id: str | None = None,
    ) -> ApprovalRequest:
        """Keep the change as a draft with its card owed, in one transaction, and post the
        card now: the request is pending once its card exists (``Cards``). A caller that
        recorded its intent first passes the id it chose (``request_id``). ``Refused`` when
        the cluster has a request open or the bot may not post here (nothing is kept then);
        a card that could not be posted yet is still owed, and the draft is returned."""
        request = self.new_request(actor, channel, plan, origin, request_id)
        card = self.engine.due(CARD, card_key(request.id), {"request": request.id})
        try:
            await self.store.add_request(request, owe=[card])
        except OpenRequestExistsError:
            raise await self._busy(plan) from None
        self.crash("after-draft")
        try:
            await self.engine.run(card.key)
        except Exception as error:  # owed: any replica posts it once the store answers
            log.warning("the card of %s is owed and not posted yet: %s", request.id, error)
        fresh = await self.store.get_request(request.id)
        if fresh is None:  # the bot may not post here: the worker dropped the draft
            item = await self.engine.store.get_owed(card.key)
            raise Refused(item.note if item is not None and item.note else _NOT_ASKED)
        return fresh

    async def card_pending(self, request: ApprovalRequest) -> Reply | None:
        """What to tell the asker of a request whose card is owed but not posted yet (a
        passing failure of the chat platform or the store); None once it is posted."""
        if request.state != RequestState.DRAFT:
            return None
        item = await self.engine.store.get_owed(card_key(request.id))
        # the engine's note of the last try is "Error: what it said"; the person gets the what
        why = f" (last try: {item.note.split(': ', 1)[-1]})" if item and item.note else ""
        return notice(
            "Card on its way",
            f"The approval card of {request.id} could not be posted yet{why}. clusterbot "
            "keeps it and posts it as soon as it can; nothing needs to be asked again.",
        )

    async def _card_owed(self, draft: ApprovalRequest) -> bool:
        item = await self.engine.store.get_owed(card_key(draft.id))
        return item is not None and item.state == OwedState.DUE

    def new_request(
        self,
        actor: str,
        channel: str,
        plan: ChangePlan[Any],
        origin: Origin,
        request_id: str | None,
        state: RequestState = RequestState.DRAFT,
    ) -> ApprovalRequest:
        """A request as it is first kept, inside the targets (every change, whichever way it
        was asked); its owner is the replica asking, so that its drafts end at a restart."""
        self.directory.confine(plan.cluster)
        now = self.clock()
        return ApprovalRequest(
            id=request_id or new_request_id(),
            plan=plan,
            requester=actor,
            channel=channel,
            created_at=now,
            expires_at=now + self.policy.approval.expiry_minutes * 60,
            origin=origin,
            state=state,
            owner=self.owner,
        )

    async def _busy(self, plan: ChangePlan[Any]) -> Refused:
        other = next(iter(await self.store.open_requests(plan.cluster)), None)
        what = (
            f"an open {other.kind} request ({other.id}, {other.state})"
            if other
            else "an open request"
        )
        return Refused(f"{plan.cluster_id} already has {what}; it must be decided or finish first")

    async def approve_now(self, request: ApprovalRequest, actor: str) -> ApprovalRequest:
        """Approve a request as it is asked (an approver's click on an idle alert, or the
        idle policy's auto-action) and send it."""
        if await self._approve(request, actor, via=request.origin):
            await self._send(request.id)
        return await self.store.get_request(request.id) or request

    async def approve_as_policy(self, request: ApprovalRequest) -> ApprovalRequest:
        return await self.approve_now(request, "policy")

    # -- deciding ------------------------------------------------------------------------------

    async def _approve(self, request: ApprovalRequest, actor: str, **audit: object) -> bool:
        """pending -> approved, exactly once, and its change owed in the same step: from here
        it is sent whatever dies, by this replica or any other."""
        owed = self.engine.due(KIND, change_key(request.id), {"request": request.id})
        won = await self.store.transition(
            request.id,
            [RequestState.PENDING],
            RequestState.APPROVED,
            decided_by=actor,
            decided_at=self.clock(),
            owe=[owed],
        )
        if not won:
            return False
        self.crash("after-approval")
        fresh = await self.store.get_request(request.id) or request
        await self.ledger.audit(actor, "approved", fresh, **audit)
        return True

    async def _send(self, request_id: str) -> None:
        """Send an approved change now, from here, before anything is said in chat; then the
        card shows it as it stands (the change's own steps redraw it when it moves on)."""
        await self.engine.run(change_key(request_id))
        fresh = await self.store.get_request(request_id)
        if fresh is not None and fresh.state in (RequestState.APPROVED, RequestState.EXECUTING):
            await self.ledger.redraw(fresh, progress=True)

    async def _clicked(self, request_id: str, card_message: str | None) -> ApprovalRequest | None:
        """The request a card's button names. A click proves the card exists: a draft whose
        asker has not yet recorded it is pending from now, and its card's id is known."""
        request = await self.store.get_request(request_id)
        if request is None:
            return None
        if card_message and request.card_message is None:
            await self.store.update_request(request.id, card_message=card_message)
        if request.state == RequestState.DRAFT:
            await self.store.transition(
                request.id,
                [RequestState.DRAFT],
                RequestState.PENDING,
                audit=self.ledger.asked_entry(request),
            )
        fresh = await self.store.get_request(request.id) or request
        if fresh.state == RequestState.ABANDONED:
            await self.ledger.redraw(fresh)  # the card shows it was interrupted
        return fresh

    async def decide(
        self,
        actor: str,
        role: Role,
        request_id: str,
        approve: bool,
        card_message: str | None = None,
    ) -> Reply | None:
        """Approve or reject; returns a reply for the clicker alone, or None when all went well."""
        request = await self._clicked(request_id, card_message)
        if request is None:
            return _notice_unknown(request_id)
        if request.state != RequestState.PENDING:
            return self._already(request)
        if not approve:
            if actor == request.requester:
                return await self.withdraw(actor, request_id)
            if not may_approve(self.policy, role, destructive=kind_of(request.plan).destructive):
                return notice(
                    "Not allowed",
                    f"Rejecting is for approvers; you are {role.label}. The requester can "
                    "withdraw their own request.",
                )
            if not await self.ledger.end(
                request,
                [RequestState.PENDING],
                RequestState.REJECTED,
                actor=actor,
                action="rejected",
                decided_by=actor,
                decided_at=self.clock(),
            ):
                return await self._already_now(request_id)
            return None
        destructive = kind_of(request.plan).destructive
        refusal = approval_refusal(
            self.policy, actor, role, request.requester, request.kind, destructive=destructive
        )
        if refusal is not None:
            await self.ledger.audit(actor, "approval_refused", request, reason=refusal)
            return notice("Not allowed", f"You cannot approve this: {refusal}.")
        if self.clock() >= request.expires_at:
            await self.expire(request)
            return notice("Expired", "This request expired before your click.")
        if not await self._approve(request, actor):
            return await self._already_now(request_id)
        await self._send(request.id)
        return None

    async def withdraw(
        self, actor: str, request_id: str, card_message: str | None = None
    ) -> Reply | None:
        """The requester takes their own request back, while it waits for an approver."""
        request = await self._clicked(request_id, card_message)
        if request is None:
            return _notice_unknown(request_id)
        if actor != request.requester:
            return notice(
                "Not allowed",
                "Only ",
                UserRef(request.requester),
                ", who asked for it, can withdraw it.",
            )
        if request.state != RequestState.PENDING:
            return self._already(request)
        if not await self.ledger.end(
            request, [RequestState.PENDING], RequestState.WITHDRAWN, actor=actor, action="withdrawn"
        ):
            return await self._already_now(request_id)
        return None

    def _already(self, request: ApprovalRequest) -> Reply:
        who = (" by ", UserRef(request.decided_by)) if request.decided_by else ()
        return notice(
            "Already decided",
            "Request ",
            Code(request.id),
            f" is already {request.state}",
            *who,
            ".",
        )

    async def _already_now(self, request_id: str) -> Reply:
        fresh = await self.store.get_request(request_id)
        if fresh is None:
            return _notice_unknown(request_id)
        return self._already(fresh)

    # -- housekeeping --------------------------------------------------------------------------

    async def expire(self, request: ApprovalRequest) -> bool:
        return await self.ledger.end(
            request, [RequestState.PENDING], RequestState.EXPIRED, actor="policy", action="expired"
        )

    async def expire_due(self) -> int:
        """Expire pending requests past their time, and abandon drafts a crash left behind."""
        now = self.clock()
        ended = 0
        for request in await self.store.expired_requests(now):
            ended += await self.expire(request)
        for draft in await self.store.stale_drafts(now - DRAFT_TIMEOUT):
            if not await self._card_owed(draft):  # one still owed is posted, however late
                ended += await self.abandon(draft)
        return ended

    async def abandon(self, draft: ApprovalRequest) -> bool:
        """A draft whose card was never confirmed: ended, and its requester told privately
        (``RequestLedger.conclude``), so the cluster is free and nobody waits for a card."""
        return await self.ledger.end(
            draft, [RequestState.DRAFT], RequestState.ABANDONED, actor="policy"
        )

    async def abandon_own_drafts(self) -> int:
        """At start: the drafts this replica was posting when it stopped. Nothing else can
        finish them, so they are ended now rather than blocking their clusters a minute."""
        drafts = await self.store.requests_in([RequestState.DRAFT])
        mine = [d for d in drafts if d.owner == self.owner and not await self._card_owed(d)]
        return sum([await self.abandon(d) for d in mine])
