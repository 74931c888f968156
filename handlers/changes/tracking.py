"""Follows changes to the end, in the approval card's thread.

What is followed is a long-running operation (polled by name), or, when no operation is known
(its reply was lost, or a replica took the change over after a crash), the cluster itself,
watched until it settles. Each is polled with backoff (1 s, x1.5, at most 20 s, like Google's
clients); the thread message under the card is edited as the progress changes, at most once
per 5 s, and finally edited to say how it ended. Edits can be repeated, so the end is shown
exactly once in one message, whatever crashes between the steps. The right to finish is an
atomic claim in the store; state lives in the store, so after a restart every change still in
flight is picked up again, and replicas share the work through short leases.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Unpack

from bot.vertex.errors import NotFoundError, VertexError, error_from_status
from bot.vertex.models import ClusterState
from handlers.changes.approval_card import thread_reply
from handlers.changes.kinds import kind_of
from handlers.changes.ledger import RequestLedger
from handlers.entities import (
    Final,
    OperationChanges,
    OperationKind,
    RequestState,
    TrackedOperation,
)
from handlers.messenger import Messenger, MessengerError
from handlers.owed.posting import POST_WINDOW
from handlers.ports import Clock, ControlPlane, CrashPoint, OperationStore, RequestStore, no_crash
from handlers.replies import Code, Line
from handlers.words import duration

log = logging.getLogger(__name__)

BACKOFF = 1.5
MAX_INTERVAL = 20.0
EDIT_EVERY = 5.0
LEASE = 15.0
# Polls a tick may start. With the 20 s longest step this follows 1,000 operations at their
# pace, and it spreads a crowd that falls due together (a takeover, a fleet-wide change) over
# the ticks that follow instead of polling it in one burst: at most 3,000 operations.get
# calls a minute against the control plane's per-minute read quota.
POLLS_PER_TICK = 50
PATIENCE = 2.0  # seconds a tick waits for its slowest polls, beyond the stagger


def next_interval(interval: float) -> float:
    return min(MAX_INTERVAL, interval * BACKOFF)


_spread = random.Random()


def spread(interval: float) -> float:
    """The wait before the next poll: the backoff step, shortened by up to a fifth at random,
    so that operations started together do not stay in step and poll in bursts."""
    return interval * _spread.uniform(0.8, 1.0)


def progress_key(operation: TrackedOperation) -> str:
    """The key a change's thread message is posted with, to be found after a stop."""
    return f"progress:{operation.request_id}"


def cluster_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


class Tracker:
    def __init__(
        self,
        *,
        store: OperationStore,
        requests: RequestStore,
        vertex: ControlPlane,
        messenger: Messenger,
        ledger: RequestLedger,
        clock: Clock,
        owner: str,
        crash: CrashPoint = no_crash,
        lease: float = LEASE,
        per_tick: int = POLLS_PER_TICK,
        stagger: float = 0.0,
        patience: float = PATIENCE,
    ) -> None:
        self.store = store
        self.requests = requests
        self.vertex = vertex
        self.messenger = messenger
        self.ledger = ledger
        self.clock = clock
        self.owner = owner
        self.crash = crash
        self.lease = lease
        self.per_tick = per_tick
        self.stagger = stagger
        self.patience = patience
        # polls that outlived their tick, and the operation each polls
        self.lingering: dict[asyncio.Future[None], str] = {}
        self._deferred: dict[str, OperationChanges] | None = None
        self.ended = 0  # final messages posted by this replica (a count to notice change by)

    async def poll_due(self) -> int:
        """Poll every operation that is due; returns how many were polled. What the polls
        learn (progress, the next poll time) is saved in one transaction at the end."""
        due = await self.store.claim_due(self.owner, self.clock(), self.lease, self.per_tick)
        still = set(self.lingering.values())
        due = [o for o in due if o.name not in still]  # still being polled from a past tick
        if not due:
            return 0
        self._deferred = {}
        # started ``stagger / len(due)`` apart, not all in one turn of the event loop: each
        # poll's work (its call, its answer, a message to edit) then runs on its own, and a
        # Slack request arriving meanwhile never waits behind fifty of them
        gap = self.stagger / len(due)

        async def staggered(index: int, operation: TrackedOperation) -> None:
            if index and gap:
                await asyncio.sleep(index * gap)
            await self._poll_safely(operation)

        polls: dict[asyncio.Future[None], str] = {
            asyncio.ensure_future(staggered(i, op)): op.name for i, op in enumerate(due)
        }
        slow: set[asyncio.Future[None]] = set(polls)
        try:
            # A poll may wait long: a final message waits its turn under Slack's limits. The
            # tick waits for it only so long, and the poll goes on by itself, still leased,
            # so that one slow message never holds up the polling of every other operation.
            _, slow = await asyncio.wait(polls, timeout=self.stagger + self.patience)
        finally:
            for poll in slow:
                self.lingering[poll] = polls[poll]
                poll.add_done_callback(self._settled)
            deferred, self._deferred = self._deferred, None
            if deferred:
                await self.store.update_operations(list(deferred.items()))
        return len(due)

    def _settled(self, poll: asyncio.Future[None]) -> None:
        self.lingering.pop(poll, None)

    async def settle(self, limit: float) -> None:
        """Let the polls that outlived their tick finish, for ``limit`` seconds at most; the
        rest are cancelled, and their operations are polled again after a restart."""
        if self.lingering:
            _, left = await asyncio.wait(set(self.lingering), timeout=limit)
            for poll in left:
                poll.cancel()

    async def _save(self, name: str, **changes: Unpack[OperationChanges]) -> None:
        """Save an operation's changes now, or with the tick's batch when one is open."""
        if self._deferred is not None:
            self._deferred.setdefault(name, OperationChanges()).update(changes)
        else:
            await self.store.update_operation(name, **changes)

    async def _poll_safely(self, operation: TrackedOperation) -> None:
        try:
            await self.poll(operation)
        except Exception:  # one operation's trouble must not stop the others
            log.exception("polling %s failed; retrying later", operation.name)
            await self.store.update_operation(
                operation.name, next_poll_at=self.clock() + MAX_INTERVAL, owner=None
            )

    async def poll(self, operation: TrackedOperation) -> None:
        if operation.progress_message is None and operation.last_edit_at > 0:
            # a first progress post was begun and not recorded: settled before anything else
            # is said in the thread, so that neither a progress line nor the end is doubled
            wait = operation.last_edit_at + POST_WINDOW - self.clock()
            if wait > 0:  # it may still arrive: nothing is said until it can no longer
                await self._save(operation.name, next_poll_at=self.clock() + wait, owner=None)
                return
            await self._find_progress(operation)
        if operation.final is not None or operation.done:
            await self._finish(operation)  # the outcome is known; only the message is owed
        elif operation.kind == OperationKind.CLUSTER:
            await self._poll_cluster(operation)
        else:
            await self._poll_operation(operation)

    async def _poll_operation(self, operation: TrackedOperation) -> None:
        try:
            current = await self.vertex.get_operation(operation.name)
        except NotFoundError:
            await self._done(operation, "the control plane no longer knows this operation")
            return
        except VertexError as error:
            log.warning("operation %s: %s", operation.name, error.user_message)
            await self._backoff(operation)
            return
        if not current.done:
            await self._progress(operation, current.progress_message or "running")
            return
        failure = None
        if current.error is not None:
            failure = error_from_status(current.error.code, current.error.message).user_message
        created, updated = current.create_time, current.update_time
        ended = self.clock()
        if created is not None and updated is not None:
            # The duration by the control plane's own clock, however late it is noticed.
            ended = operation.started_at + max(0.0, (updated - created).total_seconds())
        await self._done(operation, failure, ended)

    async def _poll_cluster(self, operation: TrackedOperation) -> None:
        """Follow the cluster: done when it settles, judged against the plan."""
        request = await self.requests.get_request(operation.request_id)
        if request is None:
            await self._done(operation, "its request is gone")
            return
        plan = request.plan
        kind = kind_of(plan)
        deleting = kind.effect.removes
        try:
            cluster = await self.vertex.get_cluster(operation.cluster)
        except NotFoundError:
            await self._done(operation, None if deleting else "the cluster no longer exists")
            return
        except VertexError as error:
            log.warning("watching %s: %s", operation.cluster, error.user_message)
            await self._backoff(operation)
            return
        settled_at = self.clock()
        if deleting:
            if cluster.state == ClusterState.STOPPING:
                await self._progress(operation, "deleting (the cluster is STOPPING)")
                return
            await self._done(
                operation, f"the cluster is {cluster.state} again; the delete did not happen"
            )
            return
        if cluster.state in (ClusterState.UPDATING, ClusterState.PROVISIONING):
            await self._progress(operation, f"the cluster is {cluster.state}")
            return
        if cluster.state == ClusterState.RUNNING and kind.applied(plan, cluster):
            await self._done(operation, None, settled_at)
            return
        asked = kind.wanted(plan)
        await self._done(
            operation,
            f"the cluster settled {cluster.state} without the change (wanted {asked})",
            settled_at,
        )

    async def _backoff(self, operation: TrackedOperation) -> None:
        interval = next_interval(operation.interval)
        await self._save(
            operation.name,
            interval=interval,
            next_poll_at=self.clock() + spread(interval),
            owner=None,
        )

    async def _progress(self, operation: TrackedOperation, text: str) -> None:
        now = self.clock()
        interval = next_interval(operation.interval)
        next_poll = now + spread(interval)
        changes = OperationChanges(progress=text, interval=interval, owner=None)
        if text != operation.shown_progress:
            wait = operation.last_edit_at + EDIT_EVERY - now
            if wait <= 0:
                await self._show(operation, text, now)
                changes["shown_progress"] = text
                changes["progress_message"] = operation.progress_message
                changes["last_edit_at"] = operation.last_edit_at
            else:
                next_poll = min(next_poll, now + wait)  # show it as soon as edits are allowed
        changes["next_poll_at"] = next_poll
        await self._save(operation.name, **changes)

    async def _show(self, operation: TrackedOperation, text: str, now: float) -> None:
        what = "operation" if operation.kind == OperationKind.OPERATION else "watching the cluster"
        took = duration(now - operation.started_at)
        note: Line = (
            (f"{what} ", Code(operation.name), f" · running for {took}")
            if operation.kind == OperationKind.OPERATION
            else (f"{what} · for {took}",)
        )
        reply = thread_reply(cluster_id(operation.cluster), text, note)
        if operation.thread is None:  # a card posted after its change was sent
            request = await self.requests.get_request(operation.request_id)
            if request is not None and request.card_message:
                operation.thread = request.card_message
                await self.store.update_operation(operation.name, thread=operation.thread)
        operation.last_edit_at = now
        try:
            if operation.progress_message is None:
                # marked as begun before it is sent, and posted with its key: a stop between
                # the post and its record leaves a post the next poll finds (``poll``)
                await self.store.update_operation(operation.name, last_edit_at=now)
                message = await self.messenger.post(
                    operation.channel, reply, thread=operation.thread, key=progress_key(operation)
                )
                self.crash("progress-posted")
                await self._keep_progress(operation, message)
            else:
                await self.messenger.update(
                    operation.channel, operation.progress_message, reply, progress=True
                )
        except MessengerError as error:
            log.warning("progress of %s not shown: %s", operation.name, error.code)
            if operation.progress_message is None and error.code != "connection_failed":
                operation.last_edit_at = 0.0  # refused: it did not arrive, nothing to look for

    async def _keep_progress(self, operation: TrackedOperation, message: str) -> None:
        """Keep the thread message at once, not with the batch: a restart must edit it, not
        post another; the request keeps it too, for the end told in it."""
        operation.progress_message = message
        await self.requests.update_request(operation.request_id, progress_message=message)
        await self.store.update_operation(operation.name, progress_message=message)

    async def _find_progress(self, operation: TrackedOperation) -> None:
        """Look for a first progress post cut off before its record, by its key; found, it is
        kept; not found (or it cannot be looked for), the next progress is posted anew."""
        try:
            found = await self.messenger.find(
                operation.channel, progress_key(operation), operation.started_at, operation.thread
            )
        except MessengerError as error:
            log.warning("could not look for the progress of %s: %s", operation.name, error.code)
            found = None
        if found is not None:
            await self._keep_progress(operation, found)
        else:
            operation.last_edit_at = 0.0
            await self.store.update_operation(operation.name, last_edit_at=0.0)

    async def _done(
        self, operation: TrackedOperation, error: str | None, ended: float | None = None
    ) -> None:
        operation.done, operation.error = True, error
        operation.done_at = operation.done_at or ended or self.clock()
        await self._finish(operation)

    async def _finish(self, operation: TrackedOperation) -> None:
        if operation.final is None:
            if not await self.store.claim_final(
                operation.name, done=True, error=operation.error, done_at=operation.done_at
            ):
                return  # another poller owns the end
            operation.final = Final.CLAIMED
            self.crash("after-final-claimed")
        took = duration((operation.done_at or self.clock()) - operation.started_at)
        outcome = (
            f"failed after {took}: {operation.error}" if operation.error else f"finished in {took}"
        )
        request = await self.requests.get_request(operation.request_id)
        if request is not None:
            state = RequestState.FAILED if operation.error else RequestState.SUCCEEDED
            await self.ledger.end(
                request, [RequestState.RUNNING], state, actor="control-plane", outcome=outcome
            )
        self.crash("after-final-posted")
        await self.store.update_operation(operation.name, final=Final.POSTED, owner=None)
        self.ended += 1
